// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x4xf16>) -> tensor<1x3x4x4xf16> {
  %scale = "top.weight"() {names = ["scale"]} : () -> tensor<3xf16>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<3xf16>
  %y = "tpu.instance_norm"(%arg0, %scale, %b) {epsilon = 1.0e-05, names = ["y"]} : (tensor<1x3x4x4xf16>, tensor<3xf16>, tensor<3xf16>) -> tensor<1x3x4x4xf16>
  func.return %y : tensor<1x3x4x4xf16>
}

// CHECK:      %[[SCALE:.*]] = "top.weight"() {names = ["scale"]} : () -> tensor<3xf16>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<3xf16>
// CHECK-NEXT: %[[Y:.*]] = "tpu.instance_norm"(%arg0, %[[SCALE]], %[[B]]) {epsilon = 1.000000e-05 : f64, names = ["y"]} : (tensor<1x3x4x4xf16>, tensor<3xf16>, tensor<3xf16>) -> tensor<1x3x4x4xf16>
// CHECK-NEXT: func.return
