// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// A 3x3 stride-2 stem's taps folded into channels over the zero-padded input (3 x 9 = 27
// channels), and the kernel rows only (3 x 3 = 9 channels, whole rows).

func.func @main(%arg0: tensor<1x3x8x8xi8>) -> (tensor<1x27x4x4xi8>, tensor<1x9x4x8xi8>) {
  %y = "tpu.fold_taps"(%arg0) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], names = ["y"]} : (tensor<1x3x8x8xi8>) -> tensor<1x27x4x4xi8>
  %z = "tpu.fold_taps"(%arg0) {kernel_shape = [3, 1], strides = [2, 1], pads = [1, 0, 1, 0], names = ["z"]} : (tensor<1x3x8x8xi8>) -> tensor<1x9x4x8xi8>
  func.return %y, %z : tensor<1x27x4x4xi8>, tensor<1x9x4x8xi8>
}

// CHECK:      %[[Y:.*]] = "tpu.fold_taps"(%arg0) {kernel_shape = [3 : i64, 3 : i64], strides = [2 : i64, 2 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], names = ["y"]} : (tensor<1x3x8x8xi8>) -> tensor<1x27x4x4xi8>
// CHECK-NEXT: %[[Z:.*]] = "tpu.fold_taps"(%arg0) {kernel_shape = [3 : i64, 1 : i64], strides = [2 : i64, 1 : i64], pads = [1 : i64, 0 : i64, 1 : i64, 0 : i64], names = ["z"]} : (tensor<1x3x8x8xi8>) -> tensor<1x9x4x8xi8>
// CHECK-NEXT: func.return
