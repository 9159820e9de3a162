// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x4xf16>) -> tensor<1x3x8x8xf16> {
  %y = "tpu.interp"(%arg0) {mode = "linear", coordinate_mode = "half_pixel", nearest_mode = "round_prefer_floor", scales = [1.0, 1.0, 2.0, 2.0], names = ["y"]} : (tensor<1x3x4x4xf16>) -> tensor<1x3x8x8xf16>
  func.return %y : tensor<1x3x8x8xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.interp"(%arg0) {mode = "linear", coordinate_mode = "half_pixel", nearest_mode = "round_prefer_floor", scales = [1.000000e+00 : f64, 1.000000e+00 : f64, 2.000000e+00 : f64, 2.000000e+00 : f64], names = ["y"]} : (tensor<1x3x4x4xf16>) -> tensor<1x3x8x8xf16>
// CHECK-NEXT: func.return
