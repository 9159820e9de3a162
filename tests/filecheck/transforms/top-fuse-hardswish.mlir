// RUN: python %S/Inputs/top_fuse_hardswish_weights.py %t.npz && tpu-opt -p top-fuse-hardswish --weight-file %t.npz %s | filecheck %s

// x * hard_sigmoid(x) with alpha 1/6, beta 0.5 (either order).
func.func @hard_sigmoid(%arg0: tensor<1x3x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %h = "top.hard_sigmoid"(%x) {alpha = 0.16666667, beta = 0.5, names = ["h"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = "top.mul"(%x, %h) {names = ["y"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %h2 = "top.hard_sigmoid"(%y) {alpha = 0.16666666666666666, names = ["h2"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %z = "top.mul"(%h2, %y) {names = ["z"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  func.return %y, %z : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>
}

// CHECK-LABEL: func.func @hard_sigmoid
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[Y:.*]] = "top.hard_swish"(%[[X]]) {names = ["y"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
// CHECK-NEXT:  %[[Z:.*]] = "top.hard_swish"(%[[Y]]) {names = ["z"]}
// CHECK-NEXT:  func.return %[[Y]], %[[Z]]

// (x * clip(x + 3, 0, 6)) / 6, and x * (relu6(3 + x) * (1/6)) with a per-channel splat 3.
func.func @relu6_forms(%arg0: tensor<1x3x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %three = "top.weight"() {names = ["three"]} : () -> tensor<f32>
  %six = "top.weight"() {names = ["six"]} : () -> tensor<f32>
  %sixth = "top.weight"() {names = ["sixth"]} : () -> tensor<f32>
  %three_c = "top.weight"() {names = ["three_c"]} : () -> tensor<1x3x1x1xf32>
  %a = "top.add"(%x, %three) {names = ["a"]} : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %c = "top.clip"(%a) {min = 0.0, max = 6.0, names = ["c"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %m = "top.mul"(%x, %c) {names = ["m"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = "top.div"(%m, %six) {names = ["y"]} : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %a2 = "top.add"(%three_c, %y) {names = ["a2"]} : (tensor<1x3x1x1xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %r2 = "top.relu"(%a2) {relu_limit = 6.0, names = ["r2"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %d2 = "top.mul"(%sixth, %r2) {names = ["d2"]} : (tensor<f32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %z = "top.mul"(%d2, %y) {names = ["z"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  func.return %y, %z : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>
}

// CHECK-LABEL: func.func @relu6_forms
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[Y:.*]] = "top.hard_swish"(%[[X]]) {names = ["y"]}
// CHECK-NEXT:  %[[Z:.*]] = "top.hard_swish"(%[[Y]]) {names = ["z"]}
// CHECK-NEXT:  func.return %[[Y]], %[[Z]]

// Not hard-swish: hard_sigmoid with ONNX's default alpha 0.2; x + 5; clip to 5 (max);
// a relu6 whose input is not x + 3 of the multiplied x.
func.func @not_hard_swish(%arg0: tensor<1x3x4x4xf32>, %arg1: tensor<1x3x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %w = "top.input"(%arg1) {names = ["w"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %three = "top.weight"() {names = ["three"]} : () -> tensor<f32>
  %five = "top.weight"() {names = ["five"]} : () -> tensor<f32>
  %six = "top.weight"() {names = ["six"]} : () -> tensor<f32>
  %h = "top.hard_sigmoid"(%x) {names = ["h"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y0 = "top.mul"(%x, %h) {names = ["y0"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %a1 = "top.add"(%x, %five) {names = ["a1"]} : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %c1 = "top.clip"(%a1) {min = 0.0, max = 6.0, names = ["c1"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %m1 = "top.mul"(%x, %c1) {names = ["m1"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y1 = "top.div"(%m1, %six) {names = ["y1"]} : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %a2 = "top.add"(%x, %three) {names = ["a2"]} : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %c2 = "top.clip"(%a2) {min = 0.0, max = 5.0, names = ["c2"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %m2 = "top.mul"(%x, %c2) {names = ["m2"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y2 = "top.div"(%m2, %six) {names = ["y2"]} : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %a3 = "top.add"(%w, %three) {names = ["a3"]} : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %c3 = "top.clip"(%a3) {min = 0.0, max = 6.0, names = ["c3"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %m3 = "top.mul"(%x, %c3) {names = ["m3"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y3 = "top.div"(%m3, %six) {names = ["y3"]} : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  func.return %y0, %y1, %y2, %y3 : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>
}

// CHECK-LABEL: func.func @not_hard_swish
// CHECK-NOT:   top.hard_swish
// CHECK:       func.return
