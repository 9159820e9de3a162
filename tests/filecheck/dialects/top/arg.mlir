// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3x4xf32>) -> tensor<2x4xi64> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %y = "top.arg"(%x) {mode = "max", axis = 1, keepdims = false, select_last_index = true, names = ["y"]} : (tensor<2x3x4xf32>) -> tensor<2x4xi64>
  func.return %y : tensor<2x4xi64>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.arg"(%[[X]]) {mode = "max", axis = 1 : i64, keepdims = false, select_last_index = true, names = ["y"]} : (tensor<2x3x4xf32>) -> tensor<2x4xi64>
