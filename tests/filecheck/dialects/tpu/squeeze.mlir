// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x1x4xf16>) -> tensor<3x4xf16> {
  %y = "tpu.squeeze"(%arg0) {axes = [0, 2], names = ["y"]} : (tensor<1x3x1x4xf16>) -> tensor<3x4xf16>
  func.return %y : tensor<3x4xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.squeeze"(%arg0) {axes = [0 : i64, 2 : i64], names = ["y"]} : (tensor<1x3x1x4xf16>) -> tensor<3x4xf16>
// CHECK-NEXT: func.return
