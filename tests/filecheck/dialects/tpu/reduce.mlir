// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// INT8 mean over 16 elements as >> 4, and an F16 sum without keepdims.

func.func @main(%arg0: tensor<1x8x4x4xi8>, %arg1: tensor<2x3x4xf16>) -> (tensor<1x8x1x1xi8>, tensor<2x4xf16>) {
  %y = "tpu.reduce"(%arg0) {mode = "mean", axes = [2, 3], keepdims = true, multiplier = [1], rshift = [4], round_mode = "half_away_from_zero", names = ["y"]} : (tensor<1x8x4x4xi8>) -> tensor<1x8x1x1xi8>
  %z = "tpu.reduce"(%arg1) {mode = "sum", axes = [1], keepdims = false, names = ["z"]} : (tensor<2x3x4xf16>) -> tensor<2x4xf16>
  func.return %y, %z : tensor<1x8x1x1xi8>, tensor<2x4xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.reduce"(%arg0) {mode = "mean", axes = [2 : i64, 3 : i64], keepdims = true, multiplier = [1 : i64], rshift = [4 : i64], round_mode = "half_away_from_zero", names = ["y"]} : (tensor<1x8x4x4xi8>) -> tensor<1x8x1x1xi8>
// CHECK-NEXT: %[[Z:.*]] = "tpu.reduce"(%arg1) {mode = "sum", axes = [1 : i64], keepdims = false, names = ["z"]} : (tensor<2x3x4xf16>) -> tensor<2x4xf16>
// CHECK-NEXT: func.return
