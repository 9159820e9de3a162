// RUN: tpu-opt -p top-fuse-relu %s | filecheck %s

// conv -> relu: the conv gets do_relu and the relu's tensor name.
func.func @conv_relu(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %none = "top.none"() : () -> none
  %conv = "top.conv"(%x, %w, %none) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], names = ["conv"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x8x8xf32>
  %y = "top.relu"(%conv) {names = ["y"]} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// CHECK-LABEL: func.func @conv_relu
// CHECK:       %[[CONV:.*]] = "top.conv"(%{{.*}}, %{{.*}}, %{{.*}}) {kernel_shape = [3 : i64, 3 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], names = ["y"], do_relu = true, relu_limit = -1.000000e+00 : f64}
// CHECK-NOT:   top.relu
// CHECK:       func.return %[[CONV]]

// Clip(0, 6) after a matmul is a ReLU6: relu_limit 6.
func.func @matmul_clip(%arg0: tensor<2x4xf32>) -> tensor<2x5xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x5xf32>
  %none = "top.none"() : () -> none
  %mm = "top.matmul"(%x, %w, %none) {names = ["mm"]} : (tensor<2x4xf32>, tensor<4x5xf32>, none) -> tensor<2x5xf32>
  %y = "top.clip"(%mm) {min = 0.0, max = 6.0, names = ["y"]} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  func.return %y : tensor<2x5xf32>
}

// CHECK-LABEL: func.func @matmul_clip
// CHECK:       %[[MM:.*]] = "top.matmul"(%{{.*}}, %{{.*}}, %{{.*}}) {names = ["y"], do_relu = true, relu_limit = 6.000000e+00 : f64}
// CHECK-NOT:   top.clip
// CHECK:       func.return %[[MM]]

// relu(limit 6) after add, sub, mul and scale; relu (no limit) after concat.
func.func @elementwise(%arg0: tensor<1x3x4x4xf32>, %arg1: tensor<1x3x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x6x4x4xf32>) {
  %a = "top.input"(%arg0) {names = ["a"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %b = "top.input"(%arg1) {names = ["b"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %s = "top.weight"() {names = ["s"]} : () -> tensor<3xf32>
  %add = "top.add"(%a, %b) {names = ["add"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %add_r = "top.relu"(%add) {relu_limit = 6.0, names = ["add_r"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %sub = "top.sub"(%a, %b) {names = ["sub"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %sub_r = "top.relu"(%sub) {names = ["sub_r"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %mul = "top.mul"(%a, %b) {names = ["mul"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %mul_r = "top.clip"(%mul) {min = 0.0, names = ["mul_r"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %sc = "top.scale"(%a, %s, %s) {names = ["sc"]} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  %sc_r = "top.relu"(%sc) {names = ["sc_r"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %cat = "top.concat"(%a, %b) {axis = 1, names = ["cat"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x6x4x4xf32>
  %cat_r = "top.relu"(%cat) {names = ["cat_r"]} : (tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32>
  func.return %add_r, %sub_r, %mul_r, %sc_r, %cat_r : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x6x4x4xf32>
}

// CHECK-LABEL: func.func @elementwise
// CHECK:       %[[ADD:.*]] = "top.add"(%{{.*}}, %{{.*}}) {names = ["add_r"], do_relu = true, relu_limit = 6.000000e+00 : f64}
// CHECK-NEXT:  %[[SUB:.*]] = "top.sub"(%{{.*}}, %{{.*}}) {names = ["sub_r"], do_relu = true, relu_limit = -1.000000e+00 : f64}
// CHECK-NEXT:  %[[MUL:.*]] = "top.mul"(%{{.*}}, %{{.*}}) {names = ["mul_r"], do_relu = true, relu_limit = -1.000000e+00 : f64}
// CHECK-NEXT:  %[[SC:.*]] = "top.scale"(%{{.*}}, %{{.*}}, %{{.*}}) {names = ["sc_r"], do_relu = true, relu_limit = -1.000000e+00 : f64}
// CHECK-NEXT:  %[[CAT:.*]] = "top.concat"(%{{.*}}, %{{.*}}) {axis = 1 : i64, names = ["cat_r"], do_relu = true}
// CHECK-NEXT:  func.return %[[ADD]], %[[SUB]], %[[MUL]], %[[SC]], %[[CAT]]

// Left alone: a producer with another use, a Clip not starting at 0, a ReLU6
// after concat (no relu_limit there), a ReLU after an op without do_relu.
func.func @not_fused(%arg0: tensor<1x3x4x4xf32>, %arg1: tensor<1x3x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x6x4x4xf32>, tensor<1x3x4x4xf32>) {
  %a = "top.input"(%arg0) {names = ["a"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %b = "top.input"(%arg1) {names = ["b"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %add = "top.add"(%a, %b) {names = ["add"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %add_r = "top.relu"(%add) {names = ["add_r"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %mul = "top.mul"(%a, %b) {names = ["mul"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %mul_c = "top.clip"(%mul) {min = -1.0, max = 6.0, names = ["mul_c"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %cat = "top.concat"(%a, %b) {axis = 1, names = ["cat"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x6x4x4xf32>
  %cat_r = "top.relu"(%cat) {relu_limit = 6.0, names = ["cat_r"]} : (tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32>
  %div = "top.div"(%a, %b) {names = ["div"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %div_r = "top.relu"(%div) {names = ["div_r"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  func.return %add, %add_r, %mul_c, %cat_r, %div_r : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x6x4x4xf32>, tensor<1x3x4x4xf32>
}

// CHECK-LABEL: func.func @not_fused
// CHECK:       "top.add"(%{{.*}}, %{{.*}}) {names = ["add"]}
// CHECK-NEXT:  "top.relu"
// CHECK-NEXT:  "top.mul"(%{{.*}}, %{{.*}}) {names = ["mul"]}
// CHECK-NEXT:  "top.clip"
// CHECK-NEXT:  "top.concat"(%{{.*}}, %{{.*}}) {axis = 1 : i64, names = ["cat"]}
// CHECK-NEXT:  "top.relu"
// CHECK-NEXT:  "top.div"
// CHECK-NEXT:  "top.relu"

// A ReLU after a conv that already has a ReLU6 keeps the limit.
func.func @relu_twice(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %none = "top.none"() : () -> none
  %conv = "top.conv"(%x, %w, %none) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], do_relu = true, relu_limit = 6.0, names = ["conv"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x8x8xf32>
  %y = "top.relu"(%conv) {names = ["y"]} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// CHECK-LABEL: func.func @relu_twice
// CHECK:       "top.conv"(%{{.*}}, %{{.*}}, %{{.*}}) {kernel_shape = [3 : i64, 3 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], do_relu = true, relu_limit = 6.000000e+00 : f64, names = ["y"]}
// CHECK-NOT:   top.relu
