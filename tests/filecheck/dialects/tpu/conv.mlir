// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// An INT8 conv (i8 input and filter, i32 bias, per-channel requant) and an
// F16 depthwise conv with a stride of 2 and no bias.

func.func @main(%arg0: tensor<1x3x8x8xi8>, %arg1: tensor<1x8x8x8xf16>) -> (tensor<1x4x8x8xi8>, tensor<1x8x4x4xf16>) {
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xi8>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<4xi32>
  %dw = "top.weight"() {names = ["dw"]} : () -> tensor<8x1x3x3xf16>
  %none = "top.none"() : () -> none
  %y = "tpu.conv"(%arg0, %w, %b) {kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], group = 1, do_relu = true, multiplier = [19290, 21127, 17500, 30000], rshift = [18, 18, 17, 19], round_mode = "half_away_from_zero", quant_mode = "multiplier_shift", names = ["y"]} : (tensor<1x3x8x8xi8>, tensor<4x3x3x3xi8>, tensor<4xi32>) -> tensor<1x4x8x8xi8>
  %z = "tpu.conv"(%arg1, %dw, %none) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], group = 8, do_relu = true, relu_limit = 6.0, names = ["z"]} : (tensor<1x8x8x8xf16>, tensor<8x1x3x3xf16>, none) -> tensor<1x8x4x4xf16>
  func.return %y, %z : tensor<1x4x8x8xi8>, tensor<1x8x4x4xf16>
}

// CHECK:      %[[W:.*]] = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xi8>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<4xi32>
// CHECK-NEXT: %[[DW:.*]] = "top.weight"() {names = ["dw"]} : () -> tensor<8x1x3x3xf16>
// CHECK-NEXT: %[[NONE:.*]] = "top.none"() : () -> none
// CHECK-NEXT: %[[Y:.*]] = "tpu.conv"(%arg0, %[[W]], %[[B]]) {kernel_shape = [3 : i64, 3 : i64], strides = [1 : i64, 1 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], dilations = [1 : i64, 1 : i64], group = 1 : i64, do_relu = true, multiplier = [19290 : i64, 21127 : i64, 17500 : i64, 30000 : i64], rshift = [18 : i64, 18 : i64, 17 : i64, 19 : i64], round_mode = "half_away_from_zero", quant_mode = "multiplier_shift", names = ["y"]} : (tensor<1x3x8x8xi8>, tensor<4x3x3x3xi8>, tensor<4xi32>) -> tensor<1x4x8x8xi8>
// CHECK-NEXT: %[[Z:.*]] = "tpu.conv"(%arg1, %[[DW]], %[[NONE]]) {kernel_shape = [3 : i64, 3 : i64], strides = [2 : i64, 2 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], group = 8 : i64, do_relu = true, relu_limit = 6.000000e+00 : f64, names = ["z"]} : (tensor<1x8x8x8xf16>, tensor<8x1x3x3xf16>, none) -> tensor<1x8x4x4xf16>
// CHECK-NEXT: func.return
