// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x3x3x3xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %y = "top.avg_pool"(%x) {kernel_shape = [3, 3], strides = [3, 3], pads = [0, 0, 1, 1], ceil_mode = false, count_include_pad = true, do_relu = false, relu_limit = -1.0, names = ["y"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x3x3xf32>
  func.return %y : tensor<1x3x3x3xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.avg_pool"(%[[X]]) {kernel_shape = [3 : i64, 3 : i64], strides = [3 : i64, 3 : i64], pads = [0 : i64, 0 : i64, 1 : i64, 1 : i64], ceil_mode = false, count_include_pad = true, do_relu = false, relu_limit = -1.000000e+00 : f64, names = ["y"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x3x3xf32>
