// RUN: python %S/Inputs/top_fold_reduce_mean_weights.py %t.npz && tpu-opt -p top-fold-reduce-mean --weight-file %t.npz %s | filecheck %s

// magika's layer norm (jax2tf): the sum of 512 squares times 1/512 is their mean,
// named as the mul; a sum divided by the count likewise.
func.func @scaled_sums(%arg0: tensor<1x512x4xf32>) -> (tensor<1x4xf32>, tensor<1x1x4xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x512x4xf32>) -> tensor<1x512x4xf32>
  %inv = "top.weight"() {names = ["inv512"]} : () -> tensor<f32>
  %n = "top.weight"() {names = ["n512"]} : () -> tensor<1xf32>
  %sq = "top.mul"(%x, %x) {names = ["square"]} : (tensor<1x512x4xf32>, tensor<1x512x4xf32>) -> tensor<1x512x4xf32>
  %s = "top.reduce"(%sq) {mode = "sum", axes = [1], keepdims = false, names = ["sum_sq"]} : (tensor<1x512x4xf32>) -> tensor<1x4xf32>
  %m = "top.mul"(%inv, %s) {names = ["mean_sq"]} : (tensor<f32>, tensor<1x4xf32>) -> tensor<1x4xf32>
  %s2 = "top.reduce"(%x) {mode = "sum", axes = [1], keepdims = true, names = ["sum"]} : (tensor<1x512x4xf32>) -> tensor<1x1x4xf32>
  %d = "top.div"(%s2, %n) {names = ["mean"]} : (tensor<1x1x4xf32>, tensor<1xf32>) -> tensor<1x1x4xf32>
  func.return %m, %d : tensor<1x4xf32>, tensor<1x1x4xf32>
}

// CHECK-LABEL: func.func @scaled_sums
// CHECK:       %[[SQ:.*]] = "top.mul"(%{{.*}}, %{{.*}}) {names = ["square"]}
// CHECK-NEXT:  %[[M:.*]] = "top.reduce"(%[[SQ]]) {mode = "mean", axes = [1 : i64], keepdims = false, names = ["mean_sq"]} : (tensor<1x512x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:  %[[D:.*]] = "top.reduce"(%{{.*}}) {mode = "mean", axes = [1 : i64], keepdims = true, names = ["mean"]} : (tensor<1x512x4xf32>) -> tensor<1x1x4xf32>
// CHECK-NEXT:  func.return %[[M]], %[[D]]

// A scale that is not 1/count, a sum with another user, and 512 / sum stay.
func.func @kept(%arg0: tensor<1x512xf32>) -> (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x512xf32>) -> tensor<1x512xf32>
  %half = "top.weight"() {names = ["half"]} : () -> tensor<f32>
  %inv = "top.weight"() {names = ["inv512"]} : () -> tensor<f32>
  %n = "top.weight"() {names = ["n512"]} : () -> tensor<1xf32>
  %s = "top.reduce"(%x) {mode = "sum", axes = [1], keepdims = false, names = ["s"]} : (tensor<1x512xf32>) -> tensor<1xf32>
  %a = "top.mul"(%s, %half) {names = ["a"]} : (tensor<1xf32>, tensor<f32>) -> tensor<1xf32>
  %t = "top.reduce"(%x) {mode = "sum", axes = [1], keepdims = false, names = ["t"]} : (tensor<1x512xf32>) -> tensor<1xf32>
  %b = "top.mul"(%t, %inv) {names = ["b"]} : (tensor<1xf32>, tensor<f32>) -> tensor<1xf32>
  %c = "top.add"(%t, %b) {names = ["c"]} : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  %u = "top.reduce"(%x) {mode = "sum", axes = [1], keepdims = false, names = ["u"]} : (tensor<1x512xf32>) -> tensor<1xf32>
  %r = "top.div"(%n, %u) {names = ["r"]} : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  func.return %a, %c, %r : tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
}

// CHECK-LABEL: func.func @kept
// CHECK-NOT:   mode = "mean"
// CHECK:       func.return
