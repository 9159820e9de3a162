// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32>
  %scale = "top.weight"() {names = ["scale"]} : () -> tensor<6xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<6xf32>
  %y = "top.group_norm"(%x, %scale, %b) {num_groups = 3, epsilon = 1.0e-5, names = ["y"]} : (tensor<1x6x4x4xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<1x6x4x4xf32>
  func.return %y : tensor<1x6x4x4xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32>
// CHECK-NEXT: %[[SCALE:.*]] = "top.weight"() {names = ["scale"]} : () -> tensor<6xf32>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<6xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.group_norm"(%[[X]], %[[SCALE]], %[[B]]) {num_groups = 3 : i64, epsilon = 1.000000e-05 : f64, names = ["y"]} : (tensor<1x6x4x4xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<1x6x4x4xf32>
