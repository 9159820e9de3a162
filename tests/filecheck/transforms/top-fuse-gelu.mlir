// RUN: python %S/Inputs/top_fuse_gelu_weights.py %t.npz && tpu-opt -p top-fuse-gelu --weight-file %t.npz %s | filecheck %s

// (x * (1 + erf(x / 1.4142135))) * 0.5, as PyTorch exports nn.GELU.
func.func @half_last(%arg0: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %sqrt2 = "top.weight"() {names = ["sqrt2"]} : () -> tensor<f32>
  %one = "top.weight"() {names = ["one"]} : () -> tensor<f32>
  %half = "top.weight"() {names = ["half"]} : () -> tensor<f32>
  %t = "top.div"(%x, %sqrt2) {names = ["t"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = "top.erf"(%t) {names = ["e"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = "top.add"(%e, %one) {names = ["a"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m = "top.mul"(%x, %a) {names = ["m"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = "top.mul"(%m, %half) {names = ["y"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// CHECK-LABEL: func.func @half_last
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[Y:.*]] = "top.gelu"(%[[X]]) {approximate = "none", names = ["y"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:  func.return %[[Y]]

// (x * 0.5) * (1 + erf(x * 0.70710678)), and x * ((1 + erf(x / sqrt 2)) / 2).
func.func @half_first(%arg0: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %inv = "top.weight"() {names = ["inv_sqrt2"]} : () -> tensor<f32>
  %sqrt2 = "top.weight"() {names = ["sqrt2"]} : () -> tensor<f32>
  %one = "top.weight"() {names = ["one"]} : () -> tensor<f32>
  %two = "top.weight"() {names = ["two"]} : () -> tensor<f32>
  %half = "top.weight"() {names = ["half"]} : () -> tensor<f32>
  %h = "top.mul"(%half, %x) {names = ["h"]} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %t = "top.mul"(%x, %inv) {names = ["t"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = "top.erf"(%t) {names = ["e"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = "top.add"(%one, %e) {names = ["a"]} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = "top.mul"(%a, %h) {names = ["y"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %t2 = "top.div"(%y, %sqrt2) {names = ["t2"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e2 = "top.erf"(%t2) {names = ["e2"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a2 = "top.add"(%e2, %one) {names = ["a2"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %q2 = "top.div"(%a2, %two) {names = ["q2"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %z = "top.mul"(%y, %q2) {names = ["z"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return %y, %z : tensor<2x8xf32>, tensor<2x8xf32>
}

// CHECK-LABEL: func.func @half_first
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[Y:.*]] = "top.gelu"(%[[X]]) {approximate = "none", names = ["y"]}
// CHECK-NEXT:  %[[Z:.*]] = "top.gelu"(%[[Y]]) {approximate = "none", names = ["z"]}
// CHECK-NEXT:  func.return %[[Y]], %[[Z]]

// The tanh approximation, the cube as pow(x, 3) and as x * (x * x).
func.func @tanh(%arg0: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %three = "top.weight"() {names = ["three"]} : () -> tensor<f32>
  %c = "top.weight"() {names = ["c"]} : () -> tensor<f32>
  %k = "top.weight"() {names = ["k"]} : () -> tensor<f32>
  %one = "top.weight"() {names = ["one"]} : () -> tensor<f32>
  %half = "top.weight"() {names = ["half"]} : () -> tensor<f32>
  %x3 = "top.pow"(%x, %three) {names = ["x3"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %cx3 = "top.mul"(%c, %x3) {names = ["cx3"]} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %s = "top.add"(%x, %cx3) {names = ["s"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %ks = "top.mul"(%s, %k) {names = ["ks"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %th = "top.tanh"(%ks) {names = ["th"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = "top.add"(%th, %one) {names = ["a"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %h = "top.mul"(%x, %half) {names = ["h"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %y = "top.mul"(%h, %a) {names = ["y"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %yy = "top.mul"(%y, %y) {names = ["yy"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y3 = "top.mul"(%y, %yy) {names = ["y3"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %cy3 = "top.mul"(%y3, %c) {names = ["cy3"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %s2 = "top.add"(%cy3, %y) {names = ["s2"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %ks2 = "top.mul"(%k, %s2) {names = ["ks2"]} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %th2 = "top.tanh"(%ks2) {names = ["th2"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a2 = "top.add"(%one, %th2) {names = ["a2"]} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %m2 = "top.mul"(%a2, %y) {names = ["m2"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %z = "top.mul"(%half, %m2) {names = ["z"]} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return %y, %z : tensor<2x8xf32>, tensor<2x8xf32>
}

// CHECK-LABEL: func.func @tanh
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[Y:.*]] = "top.gelu"(%[[X]]) {approximate = "tanh", names = ["y"]}
// CHECK-NEXT:  %[[Z:.*]] = "top.gelu"(%[[Y]]) {approximate = "tanh", names = ["z"]}
// CHECK-NEXT:  func.return %[[Y]], %[[Z]]

// The tanh approximation as tf2onnx writes JAX's: the cubic term x * (x * (0.044715 * x)).
// With x * (0.044715 * x), a square, it is not GELU.
func.func @tanh_jax(%arg0: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %c = "top.weight"() {names = ["c"]} : () -> tensor<f32>
  %k = "top.weight"() {names = ["k"]} : () -> tensor<f32>
  %one = "top.weight"() {names = ["one"]} : () -> tensor<f32>
  %half = "top.weight"() {names = ["half"]} : () -> tensor<f32>
  %cx = "top.mul"(%c, %x) {names = ["cx"]} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %cx2 = "top.mul"(%x, %cx) {names = ["cx2"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %cx3 = "top.mul"(%x, %cx2) {names = ["cx3"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %s = "top.add"(%x, %cx3) {names = ["s"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %ks = "top.mul"(%k, %s) {names = ["ks"]} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %th = "top.tanh"(%ks) {names = ["th"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = "top.add"(%one, %th) {names = ["a"]} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %h = "top.mul"(%half, %a) {names = ["h"]} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = "top.mul"(%x, %h) {names = ["y"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %s2 = "top.add"(%x, %cx2) {names = ["s2"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %ks2 = "top.mul"(%k, %s2) {names = ["ks2"]} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %th2 = "top.tanh"(%ks2) {names = ["th2"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a2 = "top.add"(%one, %th2) {names = ["a2"]} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %h2 = "top.mul"(%half, %a2) {names = ["h2"]} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %z = "top.mul"(%x, %h2) {names = ["z"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return %y, %z : tensor<2x8xf32>, tensor<2x8xf32>
}

// CHECK-LABEL: func.func @tanh_jax
// CHECK:       %[[X:.*]] = "top.input"
// CHECK:       %[[Y:.*]] = "top.gelu"(%[[X]]) {approximate = "tanh", names = ["y"]}
// CHECK:       "top.tanh"
// CHECK:       %[[Z:.*]] = "top.mul"(%[[X]], %{{.*}}) {names = ["z"]}
// CHECK-NEXT:  func.return %[[Y]], %[[Z]]

// Not GELU: erf(x / 2); the erf of another value; 1 + erf times 0.5 without x.
func.func @not_gelu(%arg0: tensor<2x8xf32>, %arg1: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %w = "top.input"(%arg1) {names = ["w"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %sqrt2 = "top.weight"() {names = ["sqrt2"]} : () -> tensor<f32>
  %two = "top.weight"() {names = ["two"]} : () -> tensor<f32>
  %one = "top.weight"() {names = ["one"]} : () -> tensor<f32>
  %half = "top.weight"() {names = ["half"]} : () -> tensor<f32>
  %t = "top.div"(%x, %two) {names = ["t"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = "top.erf"(%t) {names = ["e"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = "top.add"(%e, %one) {names = ["a"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m = "top.mul"(%x, %a) {names = ["m"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y0 = "top.mul"(%m, %half) {names = ["y0"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %t1 = "top.div"(%w, %sqrt2) {names = ["t1"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e1 = "top.erf"(%t1) {names = ["e1"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a1 = "top.add"(%e1, %one) {names = ["a1"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m1 = "top.mul"(%x, %a1) {names = ["m1"]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y1 = "top.mul"(%m1, %half) {names = ["y1"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %y2 = "top.mul"(%a1, %half) {names = ["y2"]} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  func.return %y0, %y1, %y2 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT:   top.gelu
// CHECK:       func.return
