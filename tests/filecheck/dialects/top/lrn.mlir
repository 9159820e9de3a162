// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = "top.lrn"(%x) {size = 3, alpha = 1.0e-4, beta = 0.75, bias = 2.0, names = ["y"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  func.return %y : tensor<1x3x4x4xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.lrn"(%[[X]]) {size = 3 : i64, alpha = 1.000000e-04 : f64, beta = 7.500000e-01 : f64, bias = 2.000000e+00 : f64, names = ["y"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
