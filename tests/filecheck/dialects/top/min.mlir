// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %a = "top.input"(%arg0) {names = ["a"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<3xf32>
  %y = "top.min"(%a, %b) {names = ["y"]} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}

// CHECK:      %[[A:.*]] = "top.input"(%arg0) {names = ["a"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<3xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.min"(%[[A]], %[[B]]) {names = ["y"]} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
