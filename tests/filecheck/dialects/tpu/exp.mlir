// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3x4xf16>) -> tensor<2x3x4xf16> {
  %y = "tpu.exp"(%arg0) {names = ["y"]} : (tensor<2x3x4xf16>) -> tensor<2x3x4xf16>
  func.return %y : tensor<2x3x4xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.exp"(%arg0) {names = ["y"]} : (tensor<2x3x4xf16>) -> tensor<2x3x4xf16>
// CHECK-NEXT: func.return
