// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// INT8 transposed conv, per-tensor requant: (4 - 1) * 2 - 2 + 3 + 1 = 8.

func.func @main(%arg0: tensor<1x4x4x4xi8>) -> tensor<1x2x8x8xi8> {
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x2x3x3xi8>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<2xi32>
  %y = "tpu.deconv"(%arg0, %w, %b) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1], output_padding = [1, 1], group = 1, multiplier = [25000], rshift = [20], round_mode = "half_away_from_zero", quant_mode = "multiplier_shift", names = ["y"]} : (tensor<1x4x4x4xi8>, tensor<4x2x3x3xi8>, tensor<2xi32>) -> tensor<1x2x8x8xi8>
  func.return %y : tensor<1x2x8x8xi8>
}

// CHECK:      %[[W:.*]] = "top.weight"() {names = ["w"]} : () -> tensor<4x2x3x3xi8>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<2xi32>
// CHECK-NEXT: %[[Y:.*]] = "tpu.deconv"(%arg0, %[[W]], %[[B]]) {kernel_shape = [3 : i64, 3 : i64], strides = [2 : i64, 2 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], dilations = [1 : i64, 1 : i64], output_padding = [1 : i64, 1 : i64], group = 1 : i64, multiplier = [25000 : i64], rshift = [20 : i64], round_mode = "half_away_from_zero", quant_mode = "multiplier_shift", names = ["y"]} : (tensor<1x4x4x4xi8>, tensor<4x2x3x3xi8>, tensor<2xi32>) -> tensor<1x2x8x8xi8>
// CHECK-NEXT: func.return
