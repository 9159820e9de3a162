// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// INT8 leaky_relu: alpha as multiplier >> rshift (13 / 128).

func.func @main(%arg0: tensor<1x8x4x4xi8>) -> tensor<1x8x4x4xi8> {
  %y = "tpu.leaky_relu"(%arg0) {alpha = 0.1, multiplier = [13], rshift = [7], round_mode = "half_away_from_zero", names = ["y"]} : (tensor<1x8x4x4xi8>) -> tensor<1x8x4x4xi8>
  func.return %y : tensor<1x8x4x4xi8>
}

// CHECK:      %[[Y:.*]] = "tpu.leaky_relu"(%arg0) {alpha = 1.000000e-01 : f64, multiplier = [13 : i64], rshift = [7 : i64], round_mode = "half_away_from_zero", names = ["y"]} : (tensor<1x8x4x4xi8>) -> tensor<1x8x4x4xi8>
// CHECK-NEXT: func.return
