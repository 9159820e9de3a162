// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3xi1>, %arg1: tensor<2x3xi1>) -> tensor<2x3xi1> {
  %a = "top.input"(%arg0) {names = ["a"]} : (tensor<2x3xi1>) -> tensor<2x3xi1>
  %b = "top.input"(%arg1) {names = ["b"]} : (tensor<2x3xi1>) -> tensor<2x3xi1>
  %none = "top.none"() : () -> none
  %y = "top.logical"(%a, %b) {mode = "xor", names = ["y"]} : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  %z = "top.logical"(%y, %none) {mode = "not", names = ["z"]} : (tensor<2x3xi1>, none) -> tensor<2x3xi1>
  func.return %z : tensor<2x3xi1>
}

// CHECK:      %[[A:.*]] = "top.input"(%arg0) {names = ["a"]} : (tensor<2x3xi1>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[B:.*]] = "top.input"(%arg1) {names = ["b"]} : (tensor<2x3xi1>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[NONE:.*]] = "top.none"() : () -> none
// CHECK-NEXT: %[[Y:.*]] = "top.logical"(%[[A]], %[[B]]) {mode = "xor", names = ["y"]} : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[Z:.*]] = "top.logical"(%[[Y]], %[[NONE]]) {mode = "not", names = ["z"]} : (tensor<2x3xi1>, none) -> tensor<2x3xi1>
