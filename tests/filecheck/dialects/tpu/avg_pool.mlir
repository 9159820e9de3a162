// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// INT8 avg_pool: 1/9 as 7282 >> 16; and an F16 global average pool.

func.func @main(%arg0: tensor<1x8x8x8xi8>, %arg1: tensor<1x16x7x7xf16>) -> (tensor<1x8x8x8xi8>, tensor<1x16x1x1xf16>) {
  %y = "tpu.avg_pool"(%arg0) {kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1], count_include_pad = true, multiplier = [7282], rshift = [16], round_mode = "half_away_from_zero", names = ["y"]} : (tensor<1x8x8x8xi8>) -> tensor<1x8x8x8xi8>
  %gap = "tpu.avg_pool"(%arg1) {kernel_shape = [7, 7], names = ["gap"]} : (tensor<1x16x7x7xf16>) -> tensor<1x16x1x1xf16>
  func.return %y, %gap : tensor<1x8x8x8xi8>, tensor<1x16x1x1xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.avg_pool"(%arg0) {kernel_shape = [3 : i64, 3 : i64], strides = [1 : i64, 1 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], count_include_pad = true, multiplier = [7282 : i64], rshift = [16 : i64], round_mode = "half_away_from_zero", names = ["y"]} : (tensor<1x8x8x8xi8>) -> tensor<1x8x8x8xi8>
// CHECK-NEXT: %[[GAP:.*]] = "tpu.avg_pool"(%arg1) {kernel_shape = [7 : i64, 7 : i64], names = ["gap"]} : (tensor<1x16x7x7xf16>) -> tensor<1x16x1x1xf16>
// CHECK-NEXT: func.return
