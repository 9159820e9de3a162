// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x8xf16>) -> tensor<1x8xf16> {
  %y = "tpu.clip"(%arg0) {min = 0.0, max = 6.0, names = ["y"]} : (tensor<1x8xf16>) -> tensor<1x8xf16>
  func.return %y : tensor<1x8xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.clip"(%arg0) {min = 0.000000e+00 : f64, max = 6.000000e+00 : f64, names = ["y"]} : (tensor<1x8xf16>) -> tensor<1x8xf16>
// CHECK-NEXT: func.return
