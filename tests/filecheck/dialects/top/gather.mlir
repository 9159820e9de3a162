// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<5x4xf32>) -> tensor<2x3x4xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<5x4xf32>) -> tensor<5x4xf32>
  %ids = "top.weight"() {names = ["ids"]} : () -> tensor<2x3xi64>
  %y = "top.gather"(%x, %ids) {axis = 0, names = ["y"]} : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  func.return %y : tensor<2x3x4xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<5x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT: %[[IDS:.*]] = "top.weight"() {names = ["ids"]} : () -> tensor<2x3xi64>
// CHECK-NEXT: %[[Y:.*]] = "top.gather"(%[[X]], %[[IDS]]) {axis = 0 : i64, names = ["y"]} : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
