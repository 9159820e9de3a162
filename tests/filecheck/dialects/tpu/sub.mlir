// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// Asymmetric UINT8 sub.

func.func @main(%arg0: tensor<1x8xui8>, %arg1: tensor<1x8xui8>) -> tensor<1x8xui8> {
  %y = "tpu.sub"(%arg0, %arg1) {multiplier = [7, 7], rshift = [3, 3], input_zero_points = [128, 128], output_zero_point = 128, round_mode = "half_away_from_zero", names = ["y"]} : (tensor<1x8xui8>, tensor<1x8xui8>) -> tensor<1x8xui8>
  func.return %y : tensor<1x8xui8>
}

// CHECK:      %[[Y:.*]] = "tpu.sub"(%arg0, %arg1) {multiplier = [7 : i64, 7 : i64], rshift = [3 : i64, 3 : i64], input_zero_points = [128 : i64, 128 : i64], output_zero_point = 128 : i64, round_mode = "half_away_from_zero", names = ["y"]} : (tensor<1x8xui8>, tensor<1x8xui8>) -> tensor<1x8xui8>
// CHECK-NEXT: func.return
