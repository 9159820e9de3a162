// RUN: tpu-opt -p top-fuse-silu %s | filecheck %s

// x * sigmoid(x), in both operand orders -> silu, named as the mul.
func.func @silu(%arg0: tensor<1x3x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %s = "top.sigmoid"(%x) {names = ["s"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = "top.mul"(%x, %s) {names = ["y"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %t = "top.sigmoid"(%y) {names = ["t"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %z = "top.mul"(%t, %y) {names = ["z"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  func.return %y, %z : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>
}

// CHECK-LABEL: func.func @silu
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[Y:.*]] = "top.silu"(%[[X]]) {names = ["y"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
// CHECK-NEXT:  %[[Z:.*]] = "top.silu"(%[[Y]]) {names = ["z"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
// CHECK-NEXT:  func.return %[[Y]], %[[Z]]

// The sigmoid stays while something else uses it.
func.func @sigmoid_used(%arg0: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %s = "top.sigmoid"(%x) {names = ["s"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = "top.mul"(%s, %x) {names = ["y"]} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %y, %s : tensor<2x3xf32>, tensor<2x3xf32>
}

// CHECK-LABEL: func.func @sigmoid_used
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[S:.*]] = "top.sigmoid"(%[[X]]) {names = ["s"]}
// CHECK-NEXT:  %[[Y:.*]] = "top.silu"(%[[X]]) {names = ["y"]}
// CHECK-NEXT:  func.return %[[Y]], %[[S]]

// Not SiLU: the sigmoid of another value; a mul with a fused ReLU.
func.func @not_silu(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %w = "top.input"(%arg1) {names = ["w"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %s = "top.sigmoid"(%w) {names = ["s"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = "top.mul"(%x, %s) {names = ["y"]} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %sx = "top.sigmoid"(%x) {names = ["sx"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %r = "top.mul"(%x, %sx) {do_relu = true, names = ["r"]} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %y, %r : tensor<2x3xf32>, tensor<2x3xf32>
}

// CHECK-LABEL: func.func @not_silu
// CHECK:       "top.sigmoid"
// CHECK-NEXT:  "top.mul"({{.*}}) {names = ["y"]}
// CHECK-NEXT:  "top.sigmoid"
// CHECK-NEXT:  "top.mul"({{.*}}) {do_relu = true, names = ["r"]}
// CHECK-NEXT:  func.return
