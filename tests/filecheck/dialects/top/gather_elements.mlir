// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<3x4xf32>) -> tensor<3x2xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %ids = "top.weight"() {names = ["ids"]} : () -> tensor<3x2xi64>
  %y = "top.gather_elements"(%x, %ids) {axis = 1, names = ["y"]} : (tensor<3x4xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
  func.return %y : tensor<3x2xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: %[[IDS:.*]] = "top.weight"() {names = ["ids"]} : () -> tensor<3x2xi64>
// CHECK-NEXT: %[[Y:.*]] = "top.gather_elements"(%[[X]], %[[IDS]]) {axis = 1 : i64, names = ["y"]} : (tensor<3x4xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
