// Stock xdsl-opt knows TOP and TPU through the xdsl.universe entry point.
// RUN: xdsl-opt %s | filecheck %s
// RUN: xdsl-opt %s | xdsl-opt --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %0 = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %1 = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %2 = "top.none"() : () -> none
  %3 = "top.conv"(%0, %1, %2) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], names = ["y"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x8x8xf32>
  func.return %3 : tensor<1x4x8x8xf32>
}

// CHECK:      func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
// CHECK-NEXT:   %0 = "top.input"(%arg0) {names = ["x"]}
// CHECK-NEXT:   %1 = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
// CHECK-NEXT:   %2 = "top.none"() : () -> none
// CHECK-NEXT:   %3 = "top.conv"(%0, %1, %2) {kernel_shape = [3 : i64, 3 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], names = ["y"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x8x8xf32>
