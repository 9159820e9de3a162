// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3xi8>, %arg1: tensor<2x3xi8>) -> (tensor<2x3xi8>, tensor<2x3xi8>) {
  %none = "top.none"() : () -> none
  %y = "tpu.logical"(%arg0, %arg1) {mode = "xor", names = ["y"]} : (tensor<2x3xi8>, tensor<2x3xi8>) -> tensor<2x3xi8>
  %z = "tpu.logical"(%y, %none) {mode = "not", names = ["z"]} : (tensor<2x3xi8>, none) -> tensor<2x3xi8>
  func.return %y, %z : tensor<2x3xi8>, tensor<2x3xi8>
}

// CHECK:      %[[NONE:.*]] = "top.none"() : () -> none
// CHECK-NEXT: %[[Y:.*]] = "tpu.logical"(%arg0, %arg1) {mode = "xor", names = ["y"]} : (tensor<2x3xi8>, tensor<2x3xi8>) -> tensor<2x3xi8>
// CHECK-NEXT: %[[Z:.*]] = "tpu.logical"(%[[Y]], %[[NONE]]) {mode = "not", names = ["z"]} : (tensor<2x3xi8>, none) -> tensor<2x3xi8>
// CHECK-NEXT: func.return
