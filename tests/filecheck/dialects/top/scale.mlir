// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %scale = "top.weight"() {names = ["scale"]} : () -> tensor<3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<3xf32>
  %y = "top.scale"(%x, %scale, %b) {do_relu = true, relu_limit = -1.0, names = ["y"]} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  func.return %y : tensor<1x3x4x4xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
// CHECK-NEXT: %[[SCALE:.*]] = "top.weight"() {names = ["scale"]} : () -> tensor<3xf32>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<3xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.scale"(%[[X]], %[[SCALE]], %[[B]]) {do_relu = true, relu_limit = -1.000000e+00 : f64, names = ["y"]} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
