// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x10xf32>) -> tensor<2x10xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x10xf32>) -> tensor<2x10xf32>
  %y = "top.log_softmax"(%x) {axis = -1, names = ["y"]} : (tensor<2x10xf32>) -> tensor<2x10xf32>
  func.return %y : tensor<2x10xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<2x10xf32>) -> tensor<2x10xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.log_softmax"(%[[X]]) {axis = -1 : i64, names = ["y"]} : (tensor<2x10xf32>) -> tensor<2x10xf32>
