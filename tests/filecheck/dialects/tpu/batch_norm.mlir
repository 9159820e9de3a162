// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %scale = "top.weight"() {names = ["scale"]} : () -> tensor<3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<3xf32>
  %mean = "top.weight"() {names = ["mean"]} : () -> tensor<3xf32>
  %var = "top.weight"() {names = ["var"]} : () -> tensor<3xf32>
  %y = "tpu.batch_norm"(%arg0, %scale, %b, %mean, %var) {epsilon = 0.001, names = ["y"]} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  func.return %y : tensor<1x3x4x4xf32>
}

// CHECK:      %[[SCALE:.*]] = "top.weight"() {names = ["scale"]} : () -> tensor<3xf32>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<3xf32>
// CHECK-NEXT: %[[MEAN:.*]] = "top.weight"() {names = ["mean"]} : () -> tensor<3xf32>
// CHECK-NEXT: %[[VAR:.*]] = "top.weight"() {names = ["var"]} : () -> tensor<3xf32>
// CHECK-NEXT: %[[Y:.*]] = "tpu.batch_norm"(%arg0, %[[SCALE]], %[[B]], %[[MEAN]], %[[VAR]]) {epsilon = 1.000000e-03 : f64, names = ["y"]} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
// CHECK-NEXT: func.return
