// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3x4xf32>) -> tensor<2x3x5xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<5x4xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<5xf32>
  %y = "top.matmul"(%x, %w, %b) {left_transpose = false, right_transpose = true, do_relu = false, relu_limit = -1.0, names = ["y"]} : (tensor<2x3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  func.return %y : tensor<2x3x5xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[W:.*]] = "top.weight"() {names = ["w"]} : () -> tensor<5x4xf32>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<5xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.matmul"(%[[X]], %[[W]], %[[B]]) {left_transpose = false, right_transpose = true, do_relu = false, relu_limit = -1.000000e+00 : f64, names = ["y"]} : (tensor<2x3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
