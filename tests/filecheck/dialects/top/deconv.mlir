// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x4x8x8xf32>) -> tensor<1x2x16x16xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x2x3x3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<2xf32>
  %y = "top.deconv"(%x, %w, %b) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1], output_padding = [1, 1], group = 1, do_relu = true, relu_limit = 6.0, names = ["y"]} : (tensor<1x4x8x8xf32>, tensor<4x2x3x3xf32>, tensor<2xf32>) -> tensor<1x2x16x16xf32>
  func.return %y : tensor<1x2x16x16xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
// CHECK-NEXT: %[[W:.*]] = "top.weight"() {names = ["w"]} : () -> tensor<4x2x3x3xf32>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<2xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.deconv"(%[[X]], %[[W]], %[[B]]) {kernel_shape = [3 : i64, 3 : i64], strides = [2 : i64, 2 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], dilations = [1 : i64, 1 : i64], output_padding = [1 : i64, 1 : i64], group = 1 : i64, do_relu = true, relu_limit = 6.000000e+00 : f64, names = ["y"]} : (tensor<1x4x8x8xf32>, tensor<4x2x3x3xf32>, tensor<2xf32>) -> tensor<1x2x16x16xf32>
