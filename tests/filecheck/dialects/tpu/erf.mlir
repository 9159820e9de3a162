// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %y = "tpu.erf"(%arg0) {names = ["y"]} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// CHECK:      %[[Y:.*]] = "tpu.erf"(%arg0) {names = ["y"]} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: func.return
