// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x8x4x4xf16>) -> tensor<1x8x4x4xf16> {
  %y = "tpu.lrn"(%arg0) {size = 5, alpha = 0.0001, beta = 0.75, bias = 1.0, names = ["y"]} : (tensor<1x8x4x4xf16>) -> tensor<1x8x4x4xf16>
  func.return %y : tensor<1x8x4x4xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.lrn"(%arg0) {size = 5 : i64, alpha = 1.000000e-04 : f64, beta = 7.500000e-01 : f64, bias = 1.000000e+00 : f64, names = ["y"]} : (tensor<1x8x4x4xf16>) -> tensor<1x8x4x4xf16>
// CHECK-NEXT: func.return
