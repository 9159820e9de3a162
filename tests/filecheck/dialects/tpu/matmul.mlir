// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// An asymmetric UINT8 matmul (zero points) and a BF16 one with a transposed
// right operand and no bias.

func.func @main(%arg0: tensor<2x8x16xui8>, %arg1: tensor<2x8x16xbf16>) -> (tensor<2x8x32xui8>, tensor<2x8x32xbf16>) {
  %w = "top.weight"() {names = ["w"]} : () -> tensor<16x32xi8>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<32xi32>
  %wt = "top.weight"() {names = ["wt"]} : () -> tensor<32x16xbf16>
  %none = "top.none"() : () -> none
  %y = "tpu.matmul"(%arg0, %w, %b) {left_transpose = false, right_transpose = false, multiplier = [1518], rshift = [16], round_mode = "half_away_from_zero", input_zero_points = [128, 0], output_zero_point = 128, quant_mode = "multiplier_shift", names = ["y"]} : (tensor<2x8x16xui8>, tensor<16x32xi8>, tensor<32xi32>) -> tensor<2x8x32xui8>
  %z = "tpu.matmul"(%arg1, %wt, %none) {right_transpose = true, do_relu = true, relu_limit = -1.0, names = ["z"]} : (tensor<2x8x16xbf16>, tensor<32x16xbf16>, none) -> tensor<2x8x32xbf16>
  func.return %y, %z : tensor<2x8x32xui8>, tensor<2x8x32xbf16>
}

// CHECK:      %[[W:.*]] = "top.weight"() {names = ["w"]} : () -> tensor<16x32xi8>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<32xi32>
// CHECK-NEXT: %[[WT:.*]] = "top.weight"() {names = ["wt"]} : () -> tensor<32x16xbf16>
// CHECK-NEXT: %[[NONE:.*]] = "top.none"() : () -> none
// CHECK-NEXT: %[[Y:.*]] = "tpu.matmul"(%arg0, %[[W]], %[[B]]) {left_transpose = false, right_transpose = false, multiplier = [1518 : i64], rshift = [16 : i64], round_mode = "half_away_from_zero", input_zero_points = [128 : i64, 0 : i64], output_zero_point = 128 : i64, quant_mode = "multiplier_shift", names = ["y"]} : (tensor<2x8x16xui8>, tensor<16x32xi8>, tensor<32xi32>) -> tensor<2x8x32xui8>
// CHECK-NEXT: %[[Z:.*]] = "tpu.matmul"(%arg1, %[[WT]], %[[NONE]]) {right_transpose = true, do_relu = true, relu_limit = -1.000000e+00 : f64, names = ["z"]} : (tensor<2x8x16xbf16>, tensor<32x16xbf16>, none) -> tensor<2x8x32xbf16>
// CHECK-NEXT: func.return
