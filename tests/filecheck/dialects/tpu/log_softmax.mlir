// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x5xf32>) -> tensor<2x5xf32> {
  %y = "tpu.log_softmax"(%arg0) {axis = -1, names = ["y"]} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  func.return %y : tensor<2x5xf32>
}

// CHECK:      %[[Y:.*]] = "tpu.log_softmax"(%arg0) {axis = -1 : i64, names = ["y"]} : (tensor<2x5xf32>) -> tensor<2x5xf32>
// CHECK-NEXT: func.return
