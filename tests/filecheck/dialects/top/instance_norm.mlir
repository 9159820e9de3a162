// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %scale = "top.weight"() {names = ["scale"]} : () -> tensor<3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<3xf32>
  %y = "top.instance_norm"(%x, %scale, %b) {epsilon = 1.0e-5, names = ["y"]} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  func.return %y : tensor<1x3x4x4xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
// CHECK-NEXT: %[[SCALE:.*]] = "top.weight"() {names = ["scale"]} : () -> tensor<3xf32>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<3xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.instance_norm"(%[[X]], %[[SCALE]], %[[B]]) {epsilon = 1.000000e-05 : f64, names = ["y"]} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
