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

// x * 1, 1 * x and x + 0 are x (Paddle's swish: x * sigmoid(1 * x)); x - 0 whose result
// @main returns keeps its name, so it stays; x * ones of a larger shape broadcasts x, so
// it stays too.
func.func @identities(%arg0: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x2x3xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %one = "top.weight"() {names = ["one"]} : () -> tensor<1xf32>
  %zero = "top.weight"() {names = ["zero"]} : () -> tensor<1x3xf32>
  %ones = "top.weight"() {names = ["ones"]} : () -> tensor<2x2x3xf32>
  %bx = "top.mul"(%x, %one) {names = ["bx"]} : (tensor<2x3xf32>, tensor<1xf32>) -> tensor<2x3xf32>
  %s = "top.sigmoid"(%bx) {names = ["s"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %s1 = "top.mul"(%one, %s) {names = ["s1"]} : (tensor<1xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %s0 = "top.add"(%s1, %zero) {names = ["s0"]} : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
  %y = "top.mul"(%x, %s0) {names = ["y"]} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %kept = "top.sub"(%x, %zero) {names = ["kept"]} : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
  %wide = "top.mul"(%x, %ones) {names = ["wide"]} : (tensor<2x3xf32>, tensor<2x2x3xf32>) -> tensor<2x2x3xf32>
  func.return %y, %kept, %wide : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x2x3xf32>
}

// CHECK-LABEL: func.func @identities
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[ZERO:.*]] = "top.weight"() {names = ["zero"]}
// CHECK-NEXT:  %[[ONES:.*]] = "top.weight"() {names = ["ones"]}
// CHECK-NEXT:  %[[S:.*]] = "top.sigmoid"(%[[X]]) {names = ["s"]}
// CHECK-NEXT:  %[[Y:.*]] = "top.mul"(%[[X]], %[[S]]) {names = ["y"]}
// CHECK-NEXT:  %[[KEPT:.*]] = "top.sub"(%[[X]], %[[ZERO]]) {names = ["kept"]}
// CHECK-NEXT:  %[[WIDE:.*]] = "top.mul"(%[[X]], %[[ONES]]) {names = ["wide"]}
// CHECK-NEXT:  func.return %[[Y]], %[[KEPT]], %[[WIDE]]
