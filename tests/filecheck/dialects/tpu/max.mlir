// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// INT8 max: both inputs requantized to the output scale.

func.func @main(%arg0: tensor<2x3xi8>, %arg1: tensor<2x3xi8>) -> tensor<2x3xi8> {
  %y = "tpu.max"(%arg0, %arg1) {multiplier = [1, 3], rshift = [0, 2], round_mode = "half_away_from_zero", names = ["y"]} : (tensor<2x3xi8>, tensor<2x3xi8>) -> tensor<2x3xi8>
  func.return %y : tensor<2x3xi8>
}

// CHECK:      %[[Y:.*]] = "tpu.max"(%arg0, %arg1) {multiplier = [1 : i64, 3 : i64], rshift = [0 : i64, 2 : i64], round_mode = "half_away_from_zero", names = ["y"]} : (tensor<2x3xi8>, tensor<2x3xi8>) -> tensor<2x3xi8>
// CHECK-NEXT: func.return
