// RUN: python %S/Inputs/top_constant_fold_weights.py %t.npz && tpu-opt -p top-constant-fold --weight-file %t.npz %s | filecheck %s

// add(a, b) -> weight "s"; then mul(s, s) and reshape of it fold too, which leaves
// "s" unused; a matmul with a none bias folds; an int64 weight cast to f32 folds.
func.func @fold(%arg0: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<6xf32>, tensor<2x4xf32>, tensor<2xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %a = "top.weight"() {names = ["a"]} : () -> tensor<2x3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<3xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<3x4xf32>
  %idx = "top.weight"() {names = ["idx"]} : () -> tensor<2xi64>
  %none = "top.none"() : () -> none
  %s = "top.add"(%a, %b) {names = ["s"]} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %sq = "top.mul"(%s, %s) {names = ["sq"]} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = "top.add"(%x, %sq) {names = ["y"]} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %r = "top.reshape"(%s) {shape = [6], names = ["r"]} : (tensor<2x3xf32>) -> tensor<6xf32>
  %mm = "top.matmul"(%a, %w, %none) {names = ["mm"]} : (tensor<2x3xf32>, tensor<3x4xf32>, none) -> tensor<2x4xf32>
  %f = "top.cast"(%idx) {names = ["f"]} : (tensor<2xi64>) -> tensor<2xf32>
  func.return %y, %r, %mm, %f : tensor<2x3xf32>, tensor<6xf32>, tensor<2x4xf32>, tensor<2xf32>
}

// CHECK-LABEL: func.func @fold
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[SQ:.*]] = "top.weight"() {names = ["sq"]} : () -> tensor<2x3xf32>
// CHECK-NEXT:  %[[Y:.*]] = "top.add"(%[[X]], %[[SQ]]) {names = ["y"]}
// CHECK-NEXT:  %[[R:.*]] = "top.weight"() {names = ["r"]} : () -> tensor<6xf32>
// CHECK-NEXT:  %[[MM:.*]] = "top.weight"() {names = ["mm"]} : () -> tensor<2x4xf32>
// CHECK-NEXT:  %[[F:.*]] = "top.weight"() {names = ["f"]} : () -> tensor<2xf32>
// CHECK-NEXT:  func.return %[[Y]], %[[R]], %[[MM]], %[[F]]
