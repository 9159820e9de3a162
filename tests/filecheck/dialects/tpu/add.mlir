// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// INT8 add with broadcasting: one multiplier and rshift per input.

func.func @main(%arg0: tensor<1x16x8x8xi8>, %arg1: tensor<1x16x1x1xi8>) -> tensor<1x16x8x8xi8> {
  %y = "tpu.add"(%arg0, %arg1) {do_relu = true, multiplier = [23, 17], rshift = [5, 5], round_mode = "half_away_from_zero", quant_mode = "multiplier_shift", names = ["y"]} : (tensor<1x16x8x8xi8>, tensor<1x16x1x1xi8>) -> tensor<1x16x8x8xi8>
  func.return %y : tensor<1x16x8x8xi8>
}

// CHECK:      %[[Y:.*]] = "tpu.add"(%arg0, %arg1) {do_relu = true, multiplier = [23 : i64, 17 : i64], rshift = [5 : i64, 5 : i64], round_mode = "half_away_from_zero", quant_mode = "multiplier_shift", names = ["y"]} : (tensor<1x16x8x8xi8>, tensor<1x16x1x1xi8>) -> tensor<1x16x8x8xi8>
// CHECK-NEXT: func.return
