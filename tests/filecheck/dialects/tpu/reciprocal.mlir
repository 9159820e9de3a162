// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<3x3xf16>) -> tensor<3x3xf16> {
  %y = "tpu.reciprocal"(%arg0) {names = ["y"]} : (tensor<3x3xf16>) -> tensor<3x3xf16>
  func.return %y : tensor<3x3xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.reciprocal"(%arg0) {names = ["y"]} : (tensor<3x3xf16>) -> tensor<3x3xf16>
// CHECK-NEXT: func.return
