// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %0 = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %1 = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %2 = "top.none"() : () -> none
  %3 = "top.conv"(%0, %1, %2) {kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], group = 1, do_relu = true, relu_limit = 6.0 : f64, names = ["y"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x8x8xf32>
  func.return %3 : tensor<1x4x8x8xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
// CHECK-NEXT: %[[W:.*]] = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
// CHECK-NEXT: %[[N:.*]] = "top.none"() : () -> none
// CHECK-NEXT: %[[Y:.*]] = "top.conv"(%[[X]], %[[W]], %[[N]]) {kernel_shape = [3 : i64, 3 : i64], strides = [1 : i64, 1 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], dilations = [1 : i64, 1 : i64], group = 1 : i64, do_relu = true, relu_limit = 6.000000e+00 : f64, names = ["y"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x8x8xf32>
