// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// INT8 max_pool (no requant: same scale in and out) and an F16 one with
// ceil_mode: ceil((8 - 3) / 2) + 1 = 4.

func.func @main(%arg0: tensor<1x8x8x8xi8>, %arg1: tensor<1x4x8x8xf16>) -> (tensor<1x8x4x4xi8>, tensor<1x4x4x4xf16>) {
  %y = "tpu.max_pool"(%arg0) {kernel_shape = [2, 2], strides = [2, 2], pads = [0, 0, 0, 0], dilations = [1, 1], ceil_mode = false, do_relu = true, names = ["y"]} : (tensor<1x8x8x8xi8>) -> tensor<1x8x4x4xi8>
  %z = "tpu.max_pool"(%arg1) {kernel_shape = [3, 3], strides = [2, 2], ceil_mode = true, names = ["z"]} : (tensor<1x4x8x8xf16>) -> tensor<1x4x4x4xf16>
  func.return %y, %z : tensor<1x8x4x4xi8>, tensor<1x4x4x4xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.max_pool"(%arg0) {kernel_shape = [2 : i64, 2 : i64], strides = [2 : i64, 2 : i64], pads = [0 : i64, 0 : i64, 0 : i64, 0 : i64], dilations = [1 : i64, 1 : i64], ceil_mode = false, do_relu = true, names = ["y"]} : (tensor<1x8x8x8xi8>) -> tensor<1x8x4x4xi8>
// CHECK-NEXT: %[[Z:.*]] = "tpu.max_pool"(%arg1) {kernel_shape = [3 : i64, 3 : i64], strides = [2 : i64, 2 : i64], ceil_mode = true, names = ["z"]} : (tensor<1x4x8x8xf16>) -> tensor<1x4x4x4xf16>
// CHECK-NEXT: func.return
