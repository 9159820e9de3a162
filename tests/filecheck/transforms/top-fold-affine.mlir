// RUN: python %S/Inputs/top_fold_affine_weights.py %t.npz && tpu-opt -p top-fold-affine --weight-file %t.npz %s | filecheck %s

// conv -> mul by a scalar -> add a scalar (Paddle's learnable affine block): one conv with
// new filter and bias weights, named as the add.
func.func @conv_scale_shift(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<4xf32>
  %a = "top.weight"() {names = ["a"]} : () -> tensor<1xf32>
  %d = "top.weight"() {names = ["d"]} : () -> tensor<1xf32>
  %conv = "top.conv"(%x, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], names = ["conv"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  %m = "top.mul"(%a, %conv) {names = ["m"]} : (tensor<1xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %y = "top.add"(%m, %d) {names = ["y"]} : (tensor<1x4x8x8xf32>, tensor<1xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// CHECK-LABEL: func.func @conv_scale_shift
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[W:.*]] = "top.weight"() {names = ["y_filter"]} : () -> tensor<4x3x3x3xf32>
// CHECK-NEXT:  %[[B:.*]] = "top.weight"() {names = ["y_bias"]} : () -> tensor<4xf32>
// CHECK-NEXT:  %[[Y:.*]] = "top.conv"(%[[X]], %[[W]], %[[B]]) {kernel_shape = [3 : i64, 3 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], names = ["y"]}
// CHECK-NEXT:  func.return %[[Y]]

// A conv without bias, then an Add of one value per channel that carries a fused ReLU: the
// conv gets the bias and the ReLU.
func.func @conv_bias_relu(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %none = "top.none"() : () -> none
  %c = "top.weight"() {names = ["bias4"]} : () -> tensor<1x4x1x1xf32>
  %conv = "top.conv"(%x, %w, %none) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], names = ["conv"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x8x8xf32>
  %y = "top.add"(%conv, %c) {do_relu = true, names = ["y"]} : (tensor<1x4x8x8xf32>, tensor<1x4x1x1xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// CHECK-LABEL: func.func @conv_bias_relu
// CHECK:       %[[Y:.*]] = "top.conv"(%{{.*}}, %{{.*}}, %{{.*}}) {kernel_shape = [3 : i64, 3 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], names = ["y"], do_relu = true}
// CHECK-SAME:  (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
// CHECK-NEXT:  func.return %[[Y]]

// A Linear on a 3-d input as exporters write it, MatMul then Add: the matmul takes the bias.
func.func @matmul_bias(%arg0: tensor<1x5x6xf32>) -> tensor<1x5x4xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x5x6xf32>) -> tensor<1x5x6xf32>
  %w = "top.weight"() {names = ["fc"]} : () -> tensor<6x4xf32>
  %none = "top.none"() : () -> none
  %c = "top.weight"() {names = ["row4"]} : () -> tensor<4xf32>
  %mm = "top.matmul"(%x, %w, %none) {names = ["mm"]} : (tensor<1x5x6xf32>, tensor<6x4xf32>, none) -> tensor<1x5x4xf32>
  %y = "top.add"(%mm, %c) {names = ["y"]} : (tensor<1x5x4xf32>, tensor<4xf32>) -> tensor<1x5x4xf32>
  func.return %y : tensor<1x5x4xf32>
}

// CHECK-LABEL: func.func @matmul_bias
// CHECK:       %[[Y:.*]] = "top.matmul"(%{{.*}}, %{{.*}}, %{{.*}}) {names = ["y"]} : (tensor<1x5x6xf32>, tensor<6x4xf32>, tensor<4xf32>) -> tensor<1x5x4xf32>
// CHECK-NEXT:  func.return %[[Y]]

// After an activation, x * a + b folds into the 1x1 conv that reads it: the conv reads the
// activation and keeps its name.
func.func @into_pointwise(%arg0: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %w = "top.weight"() {names = ["pw"]} : () -> tensor<4x4x1x1xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<4xf32>
  %a = "top.weight"() {names = ["a"]} : () -> tensor<1xf32>
  %d = "top.weight"() {names = ["d"]} : () -> tensor<1xf32>
  %h = "top.hard_swish"(%x) {names = ["h"]} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %m = "top.mul"(%h, %a) {names = ["m"]} : (tensor<1x4x8x8xf32>, tensor<1xf32>) -> tensor<1x4x8x8xf32>
  %s = "top.add"(%m, %d) {names = ["s"]} : (tensor<1x4x8x8xf32>, tensor<1xf32>) -> tensor<1x4x8x8xf32>
  %y = "top.conv"(%s, %w, %b) {kernel_shape = [1, 1], names = ["y"]} : (tensor<1x4x8x8xf32>, tensor<4x4x1x1xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// CHECK-LABEL: func.func @into_pointwise
// CHECK:       %[[H:.*]] = "top.hard_swish"
// CHECK-NEXT:  %[[W:.*]] = "top.weight"() {names = ["y_filter{{.*}}"]} : () -> tensor<4x4x1x1xf32>
// CHECK-NEXT:  %[[B:.*]] = "top.weight"() {names = ["y_bias{{.*}}"]} : () -> tensor<4xf32>
// CHECK-NEXT:  %[[Y:.*]] = "top.conv"(%[[H]], %[[W]], %[[B]]) {kernel_shape = [1 : i64, 1 : i64], names = ["y"]}
// CHECK-NEXT:  func.return %[[Y]]

// A padded conv zero-pads x * a + b: the shift stays (padding with b is not padding with 0);
// the scale then folds, since a * 0 = 0.
func.func @into_padded(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<4xf32>
  %a = "top.weight"() {names = ["a"]} : () -> tensor<1xf32>
  %d = "top.weight"() {names = ["d"]} : () -> tensor<1xf32>
  %h = "top.hard_swish"(%x) {names = ["h"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %s = "top.add"(%h, %d) {names = ["s"]} : (tensor<1x3x8x8xf32>, tensor<1xf32>) -> tensor<1x3x8x8xf32>
  %m = "top.mul"(%s, %a) {names = ["m"]} : (tensor<1x3x8x8xf32>, tensor<1xf32>) -> tensor<1x3x8x8xf32>
  %y = "top.conv"(%m, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], names = ["y"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// CHECK-LABEL: func.func @into_padded
// CHECK:       %[[S:.*]] = "top.add"(%{{.*}}, %{{.*}}) {names = ["s"]}
// CHECK:       %[[Y:.*]] = "top.conv"(%[[S]], %{{.*}}, %{{.*}}) {kernel_shape = [3 : i64, 3 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], names = ["y"]}
// CHECK-NEXT:  func.return %[[Y]]

// Left alone: a conv result something else reads too, and a constant that varies along H
// and W (not one value per channel).
func.func @not_affine(%arg0: tensor<1x3x8x8xf32>) -> (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<4xf32>
  %d = "top.weight"() {names = ["d"]} : () -> tensor<1xf32>
  %map = "top.weight"() {names = ["map"]} : () -> tensor<1x1x8x8xf32>
  %conv = "top.conv"(%x, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], names = ["conv"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  %y1 = "top.add"(%conv, %d) {names = ["y1"]} : (tensor<1x4x8x8xf32>, tensor<1xf32>) -> tensor<1x4x8x8xf32>
  %conv2 = "top.conv"(%x, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], names = ["conv2"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  %y2 = "top.mul"(%conv2, %map) {names = ["y2"]} : (tensor<1x4x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x4x8x8xf32>
  %z = "top.add"(%y1, %conv) {names = ["z"]} : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  func.return %z, %y2 : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>
}

// CHECK-LABEL: func.func @not_affine
// CHECK:       %[[C:.*]] = "top.conv"({{.*}}) {{.*}} names = ["conv"]
// CHECK-NEXT:  %[[Y1:.*]] = "top.add"(%[[C]], %{{.*}}) {names = ["y1"]}
// CHECK:       "top.mul"(%{{.*}}, %{{.*}}) {names = ["y2"]}
