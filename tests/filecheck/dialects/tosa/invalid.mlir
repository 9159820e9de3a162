// RUN: tpu-opt %s --split-input-file --verify-diagnostics | filecheck %s

// The rules of TOSA 1.0 that IREE's verifier enforces (tpu_xdsl/dialects/tosa_rules.py).

// PyTorch's 7x7/2 pad 3 on 224: (224 - 1 + 6 - 6) % 2 == 1, so IREE refuses it unless the
// bottom/right padding is trimmed by one.
func.func @main(%x: tensor<1x224x224x3xf32>, %w: tensor<8x7x7x3xf32>, %b: tensor<8xf32>) {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %0 = "tosa.conv2d"(%x, %w, %b, %z, %z) <{acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 3, 3, 3, 3>, stride = array<i64: 2, 2>}> : (tensor<1x224x224x3xf32>, tensor<8x7x7x3xf32>, tensor<8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x112x112x8xf32>
  func.return
}

// CHECK: 'tosa.conv2d' input size 224 with padding 3+3, kernel 7 and dilation 1 is not divisible by stride 2 (TOSA needs (H - 1 + pads - (K - 1) * d) % s == 0)

// -----

// The same conv with the padding trimmed is valid, and its output size is checked.
func.func @main(%x: tensor<1x224x224x3xf32>, %w: tensor<8x7x7x3xf32>, %b: tensor<8xf32>) {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %0 = "tosa.conv2d"(%x, %w, %b, %z, %z) <{acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 3, 2, 3, 2>, stride = array<i64: 2, 2>}> : (tensor<1x224x224x3xf32>, tensor<8x7x7x3xf32>, tensor<8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x112x111x8xf32>
  func.return
}

// CHECK: 'tosa.conv2d' result shape [1, 112, 111, 8] should be [1, 112, 112, 8]

// -----

func.func @main(%x: tensor<1x7x7x4xf32>) {
  %0 = "tosa.max_pool2d"(%x) <{kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>}> : (tensor<1x7x7x4xf32>) -> tensor<1x3x3x4xf32>
  func.return
}

// CHECK: 'tosa.max_pool2d' input size 7 with padding 0+0 and kernel 2 is not divisible by stride 2 (TOSA needs (H + pads - K) % s == 0)

// -----

func.func @main(%a: tensor<1x4xi8>, %b: tensor<1x4xi8>) {
  %0 = "tosa.add"(%a, %b) : (tensor<1x4xi8>, tensor<1x4xi8>) -> tensor<1x4xi8>
  func.return
}

// CHECK: 'tosa.add' on i8 is outside TOSA's integer profile; rescale the operands to i32 first

// -----

func.func @main(%x: tensor<1x4xi32>) {
  %m = "tosa.const"() <{values = dense<1073741824> : tensor<1xi32>}> : () -> tensor<1xi32>
  %s = "tosa.const"() <{values = dense<31> : tensor<1xi8>}> : () -> tensor<1xi8>
  %zi = "tosa.const"() <{values = dense<0> : tensor<1xi32>}> : () -> tensor<1xi32>
  %zo = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %0 = "tosa.rescale"(%x, %m, %s, %zi, %zo) <{input_unsigned = false, output_unsigned = false, per_channel = false, rounding_mode = #tosa.rounding_mode<INEXACT_ROUND>, scale32 = true}> : (tensor<1x4xi32>, tensor<1xi32>, tensor<1xi8>, tensor<1xi32>, tensor<1xi8>) -> tensor<1x4xi8>
  func.return
}

// CHECK: 'tosa.rescale' rounding_mode INEXACT_ROUND is not supported; use SINGLE_ROUND or DOUBLE_ROUND

// -----

// Per channel: one multiplier and shift per channel of the last axis.
func.func @main(%x: tensor<1x4xi32>) {
  %m = "tosa.const"() <{values = dense<1073741824> : tensor<3xi32>}> : () -> tensor<3xi32>
  %s = "tosa.const"() <{values = dense<31> : tensor<3xi8>}> : () -> tensor<3xi8>
  %zi = "tosa.const"() <{values = dense<0> : tensor<1xi32>}> : () -> tensor<1xi32>
  %zo = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %0 = "tosa.rescale"(%x, %m, %s, %zi, %zo) <{input_unsigned = false, output_unsigned = false, per_channel = true, rounding_mode = #tosa.rounding_mode<SINGLE_ROUND>, scale32 = true}> : (tensor<1x4xi32>, tensor<3xi32>, tensor<3xi8>, tensor<1xi32>, tensor<1xi8>) -> tensor<1x4xi8>
  func.return
}

// CHECK: 'tosa.rescale' multiplier must have 4 entries, not [3]

// -----

func.func @main(%x: tensor<1x2x3xf32>) {
  %0 = "tosa.transpose"(%x) <{perms = array<i32: 0, 2, 2>}> : (tensor<1x2x3xf32>) -> tensor<1x3x3xf32>
  func.return
}

// CHECK: 'tosa.transpose' perms [0, 2, 2] is not a permutation of the 3 dims

// -----

func.func @main(%x: tensor<2x3xf32>) {
  %s = "tosa.const_shape"() <{values = dense<[7]> : tensor<1xindex>}> : () -> !tosa.shape<1>
  %0 = "tosa.reshape"(%x, %s) : (tensor<2x3xf32>, !tosa.shape<1>) -> tensor<7xf32>
  func.return
}

// CHECK: 'tosa.reshape' cannot reshape [2, 3] to [7]: element counts differ

// -----

func.func @main() {
  %0 = "tosa.const"() <{values = dense<1.0> : tensor<2xf32>}> : () -> tensor<3xf32>
  func.return
}

// CHECK: 'tosa.const' values must have the result type tensor<3xf32>
