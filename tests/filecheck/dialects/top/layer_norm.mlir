// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x5x8xf32>) -> tensor<2x5x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %scale = "top.weight"() {names = ["scale"]} : () -> tensor<8xf32>
  %none = "top.none"() : () -> none
  %y = "top.layer_norm"(%x, %scale, %none) {axis = -1, epsilon = 1.0e-5, names = ["y"]} : (tensor<2x5x8xf32>, tensor<8xf32>, none) -> tensor<2x5x8xf32>
  func.return %y : tensor<2x5x8xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
// CHECK-NEXT: %[[SCALE:.*]] = "top.weight"() {names = ["scale"]} : () -> tensor<8xf32>
// CHECK-NEXT: %[[NONE:.*]] = "top.none"() : () -> none
// CHECK-NEXT: %[[Y:.*]] = "top.layer_norm"(%[[X]], %[[SCALE]], %[[NONE]]) {axis = -1 : i64, epsilon = 1.000000e-05 : f64, names = ["y"]} : (tensor<2x5x8xf32>, tensor<8xf32>, none) -> tensor<2x5x8xf32>
