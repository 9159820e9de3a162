// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x4xf32>, %arg1: tensor<1x3x1x1xf32>) -> tensor<1x3x4x4xf32> {
  %a = "top.input"(%arg0) {names = ["a"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %b = "top.input"(%arg1) {names = ["b"]} : (tensor<1x3x1x1xf32>) -> tensor<1x3x1x1xf32>
  %y = "top.sub"(%a, %b) {do_relu = true, relu_limit = 6.0, names = ["y"]} : (tensor<1x3x4x4xf32>, tensor<1x3x1x1xf32>) -> tensor<1x3x4x4xf32>
  func.return %y : tensor<1x3x4x4xf32>
}

// CHECK:      %[[A:.*]] = "top.input"(%arg0) {names = ["a"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
// CHECK-NEXT: %[[B:.*]] = "top.input"(%arg1) {names = ["b"]} : (tensor<1x3x1x1xf32>) -> tensor<1x3x1x1xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.sub"(%[[A]], %[[B]]) {do_relu = true, relu_limit = 6.000000e+00 : f64, names = ["y"]} : (tensor<1x3x4x4xf32>, tensor<1x3x1x1xf32>) -> tensor<1x3x4x4xf32>
