// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = "top.interp"(%x) {mode = "nearest", coordinate_mode = "asymmetric", nearest_mode = "floor", scales = [1.0, 1.0, 2.0, 2.0], names = ["y"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>
  func.return %y : tensor<1x3x8x8xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.interp"(%[[X]]) {mode = "nearest", coordinate_mode = "asymmetric", nearest_mode = "floor", scales = [1.000000e+00 : f64, 1.000000e+00 : f64, 2.000000e+00 : f64, 2.000000e+00 : f64], names = ["y"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>
