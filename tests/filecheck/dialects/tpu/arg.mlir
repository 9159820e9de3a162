// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3x4xf16>) -> tensor<2x4xi32> {
  %y = "tpu.arg"(%arg0) {mode = "max", axis = 1, keepdims = false, select_last_index = false, names = ["y"]} : (tensor<2x3x4xf16>) -> tensor<2x4xi32>
  func.return %y : tensor<2x4xi32>
}

// CHECK:      %[[Y:.*]] = "tpu.arg"(%arg0) {mode = "max", axis = 1 : i64, keepdims = false, select_last_index = false, names = ["y"]} : (tensor<2x3x4xf16>) -> tensor<2x4xi32>
// CHECK-NEXT: func.return
