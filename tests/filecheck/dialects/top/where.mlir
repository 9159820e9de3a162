// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3xi1>, %arg1: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %c = "top.input"(%arg0) {names = ["c"]} : (tensor<2x3xi1>) -> tensor<2x3xi1>
  %a = "top.input"(%arg1) {names = ["a"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<3xf32>
  %y = "top.where"(%c, %a, %b) {names = ["y"]} : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}

// CHECK:      %[[C:.*]] = "top.input"(%arg0) {names = ["c"]} : (tensor<2x3xi1>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[A:.*]] = "top.input"(%arg1) {names = ["a"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<3xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.where"(%[[C]], %[[A]], %[[B]]) {names = ["y"]} : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
