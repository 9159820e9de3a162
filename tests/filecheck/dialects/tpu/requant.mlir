// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// Per-channel i32 -> i8, and per-tensor i8 -> ui8 with a zero point.

func.func @main(%arg0: tensor<1x4x2x2xi32>, %arg1: tensor<1x8xi8>) -> (tensor<1x4x2x2xi8>, tensor<1x8xui8>) {
  %y = "tpu.requant"(%arg0) {multiplier = [1518, 1622, 1400, 1900], rshift = [16, 16, 15, 16], zero_point = 0, round_mode = "half_away_from_zero", axis = 1, quant_mode = "multiplier_shift", names = ["y"]} : (tensor<1x4x2x2xi32>) -> tensor<1x4x2x2xi8>
  %z = "tpu.requant"(%arg1) {multiplier = [3], rshift = [1], zero_point = 128, round_mode = "half_up", names = ["z"]} : (tensor<1x8xi8>) -> tensor<1x8xui8>
  func.return %y, %z : tensor<1x4x2x2xi8>, tensor<1x8xui8>
}

// CHECK:      %[[Y:.*]] = "tpu.requant"(%arg0) {multiplier = [1518 : i64, 1622 : i64, 1400 : i64, 1900 : i64], rshift = [16 : i64, 16 : i64, 15 : i64, 16 : i64], zero_point = 0 : i64, round_mode = "half_away_from_zero", axis = 1 : i64, quant_mode = "multiplier_shift", names = ["y"]} : (tensor<1x4x2x2xi32>) -> tensor<1x4x2x2xi8>
// CHECK-NEXT: %[[Z:.*]] = "tpu.requant"(%arg1) {multiplier = [3 : i64], rshift = [1 : i64], zero_point = 128 : i64, round_mode = "half_up", names = ["z"]} : (tensor<1x8xi8>) -> tensor<1x8xui8>
// CHECK-NEXT: func.return
