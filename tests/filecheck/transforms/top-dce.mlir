// RUN: tpu-opt -p top-dce %s | filecheck %s

// Unused ops go, chains of them too, and weights and none they alone used;
// unused inputs stay.
func.func @dce(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %unused = "top.input"(%arg1) {names = ["unused"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<3x4xf32>
  %none = "top.none"() : () -> none
  %mm = "top.matmul"(%x, %w, %none) {names = ["mm"]} : (tensor<2x3xf32>, tensor<3x4xf32>, none) -> tensor<2x4xf32>
  %r = "top.relu"(%mm) {names = ["r"]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %s = "top.sigmoid"(%x) {names = ["s"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = "top.tanh"(%s) {names = ["t"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %s : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @dce
// CHECK-NEXT:  %[[X:.*]] = "top.input"(%arg0) {names = ["x"]}
// CHECK-NEXT:  %{{.*}} = "top.input"(%arg1) {names = ["unused"]}
// CHECK-NEXT:  %[[S:.*]] = "top.sigmoid"(%[[X]]) {names = ["s"]}
// CHECK-NEXT:  func.return %[[S]]
// CHECK-NEXT:  }
