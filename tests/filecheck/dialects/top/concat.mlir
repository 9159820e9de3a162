// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x2x4x4xf32>, %arg1: tensor<1x3x4x4xf32>) -> tensor<1x5x4x4xf32> {
  %a = "top.input"(%arg0) {names = ["a"]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %b = "top.input"(%arg1) {names = ["b"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = "top.concat"(%a, %b) {axis = 1, do_relu = false, names = ["y"]} : (tensor<1x2x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x5x4x4xf32>
  func.return %y : tensor<1x5x4x4xf32>
}

// CHECK:      %[[A:.*]] = "top.input"(%arg0) {names = ["a"]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[B:.*]] = "top.input"(%arg1) {names = ["b"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.concat"(%[[A]], %[[B]]) {axis = 1 : i64, do_relu = false, names = ["y"]} : (tensor<1x2x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x5x4x4xf32>
