// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x6x4x4xbf16>) -> tensor<1x6x4x4xbf16> {
  %scale = "top.weight"() {names = ["scale"]} : () -> tensor<6xbf16>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<6xbf16>
  %y = "tpu.group_norm"(%arg0, %scale, %b) {num_groups = 3, epsilon = 1.0e-05, names = ["y"]} : (tensor<1x6x4x4xbf16>, tensor<6xbf16>, tensor<6xbf16>) -> tensor<1x6x4x4xbf16>
  func.return %y : tensor<1x6x4x4xbf16>
}

// CHECK:      %[[SCALE:.*]] = "top.weight"() {names = ["scale"]} : () -> tensor<6xbf16>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<6xbf16>
// CHECK-NEXT: %[[Y:.*]] = "tpu.group_norm"(%arg0, %[[SCALE]], %[[B]]) {num_groups = 3 : i64, epsilon = 1.000000e-05 : f64, names = ["y"]} : (tensor<1x6x4x4xbf16>, tensor<6xbf16>, tensor<6xbf16>) -> tensor<1x6x4x4xbf16>
// CHECK-NEXT: func.return
