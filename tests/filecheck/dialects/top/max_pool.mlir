// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %y = "top.max_pool"(%x) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1], ceil_mode = false, do_relu = true, relu_limit = 6.0, names = ["y"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32>
  func.return %y : tensor<1x3x4x4xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.max_pool"(%[[X]]) {kernel_shape = [3 : i64, 3 : i64], strides = [2 : i64, 2 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], dilations = [1 : i64, 1 : i64], ceil_mode = false, do_relu = true, relu_limit = 6.000000e+00 : f64, names = ["y"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32>
