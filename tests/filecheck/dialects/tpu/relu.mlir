// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x4x4x4xf16>) -> tensor<1x4x4x4xf16> {
  %y = "tpu.relu"(%arg0) {relu_limit = 6.0, names = ["y"]} : (tensor<1x4x4x4xf16>) -> tensor<1x4x4x4xf16>
  func.return %y : tensor<1x4x4x4xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.relu"(%arg0) {relu_limit = 6.000000e+00 : f64, names = ["y"]} : (tensor<1x4x4x4xf16>) -> tensor<1x4x4x4xf16>
// CHECK-NEXT: func.return
