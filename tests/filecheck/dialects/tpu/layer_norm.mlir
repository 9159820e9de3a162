// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x4x8xf16>) -> tensor<2x4x8xf16> {
  %scale = "top.weight"() {names = ["scale"]} : () -> tensor<8xf16>
  %none = "top.none"() : () -> none
  %y = "tpu.layer_norm"(%arg0, %scale, %none) {axis = -1, epsilon = 1.0e-05, names = ["y"]} : (tensor<2x4x8xf16>, tensor<8xf16>, none) -> tensor<2x4x8xf16>
  func.return %y : tensor<2x4x8xf16>
}

// CHECK:      %[[SCALE:.*]] = "top.weight"() {names = ["scale"]} : () -> tensor<8xf16>
// CHECK-NEXT: %[[NONE:.*]] = "top.none"() : () -> none
// CHECK-NEXT: %[[Y:.*]] = "tpu.layer_norm"(%arg0, %[[SCALE]], %[[NONE]]) {axis = -1 : i64, epsilon = 1.000000e-05 : f64, names = ["y"]} : (tensor<2x4x8xf16>, tensor<8xf16>, none) -> tensor<2x4x8xf16>
// CHECK-NEXT: func.return
