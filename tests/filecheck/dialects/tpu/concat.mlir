// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// INT8 concat: each input requantized to the output scale.

func.func @main(%arg0: tensor<1x2x4x4xi8>, %arg1: tensor<1x3x4x4xi8>) -> tensor<1x5x4x4xi8> {
  %y = "tpu.concat"(%arg0, %arg1) {axis = 1, do_relu = false, multiplier = [1, 3], rshift = [0, 1], round_mode = "half_away_from_zero", names = ["y"]} : (tensor<1x2x4x4xi8>, tensor<1x3x4x4xi8>) -> tensor<1x5x4x4xi8>
  func.return %y : tensor<1x5x4x4xi8>
}

// CHECK:      %[[Y:.*]] = "tpu.concat"(%arg0, %arg1) {axis = 1 : i64, do_relu = false, multiplier = [1 : i64, 3 : i64], rshift = [0 : i64, 1 : i64], round_mode = "half_away_from_zero", names = ["y"]} : (tensor<1x2x4x4xi8>, tensor<1x3x4x4xi8>) -> tensor<1x5x4x4xi8>
// CHECK-NEXT: func.return
