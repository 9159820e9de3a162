// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %y = "tpu.round"(%arg0) {names = ["y"]} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  func.return %y : tensor<2x2xf32>
}

// CHECK:      %[[Y:.*]] = "tpu.round"(%arg0) {names = ["y"]} : (tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK-NEXT: func.return
