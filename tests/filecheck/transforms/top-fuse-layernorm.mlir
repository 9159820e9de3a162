// RUN: python %S/Inputs/top_fuse_layernorm_weights.py %t.npz && tpu-opt -p top-fuse-layernorm --weight-file %t.npz %s | filecheck %s

// ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul gamma, Add beta over
// the last axis: one layer_norm with scale and bias, named as the final add.
func.func @with_affine(%arg0: tensor<2x5x8xf32>) -> tensor<2x5x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %two = "top.weight"() {names = ["two"]} : () -> tensor<f32>
  %eps = "top.weight"() {names = ["eps"]} : () -> tensor<f32>
  %gamma = "top.weight"() {names = ["gamma"]} : () -> tensor<8xf32>
  %beta = "top.weight"() {names = ["beta"]} : () -> tensor<8xf32>
  %m = "top.reduce"(%x) {mode = "mean", axes = [-1], keepdims = true, names = ["m"]} : (tensor<2x5x8xf32>) -> tensor<2x5x1xf32>
  %d = "top.sub"(%x, %m) {names = ["d"]} : (tensor<2x5x8xf32>, tensor<2x5x1xf32>) -> tensor<2x5x8xf32>
  %p = "top.pow"(%d, %two) {names = ["p"]} : (tensor<2x5x8xf32>, tensor<f32>) -> tensor<2x5x8xf32>
  %v = "top.reduce"(%p) {mode = "mean", axes = [2], keepdims = true, names = ["v"]} : (tensor<2x5x8xf32>) -> tensor<2x5x1xf32>
  %e = "top.add"(%v, %eps) {names = ["e"]} : (tensor<2x5x1xf32>, tensor<f32>) -> tensor<2x5x1xf32>
  %s = "top.sqrt"(%e) {names = ["s"]} : (tensor<2x5x1xf32>) -> tensor<2x5x1xf32>
  %n = "top.div"(%d, %s) {names = ["n"]} : (tensor<2x5x8xf32>, tensor<2x5x1xf32>) -> tensor<2x5x8xf32>
  %g = "top.mul"(%n, %gamma) {names = ["g"]} : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %y = "top.add"(%beta, %g) {names = ["y"]} : (tensor<8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  func.return %y : tensor<2x5x8xf32>
}

// CHECK-LABEL: func.func @with_affine
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[G:.*]] = "top.weight"() {names = ["g_scale"]} : () -> tensor<8xf32>
// CHECK-NEXT:  %[[B:.*]] = "top.weight"() {names = ["y_bias"]} : () -> tensor<8xf32>
// CHECK-NEXT:  %[[Y:.*]] = "top.layer_norm"(%[[X]], %[[G]], %[[B]]) {axis = 2 : i64, epsilon = 1.000000e-05 : f64, names = ["y"]} : (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
// CHECK-NEXT:  func.return %[[Y]]

// No gamma/beta; the variance as d * d; Sqrt + Reciprocal + Mul; eps 1e-6 as a
// 1-element tensor; normalized over the two trailing axes.
func.func @reciprocal(%arg0: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %eps = "top.weight"() {names = ["eps6"]} : () -> tensor<1xf32>
  %m = "top.reduce"(%x) {mode = "mean", axes = [1, 2], keepdims = true, names = ["m"]} : (tensor<2x4x8xf32>) -> tensor<2x1x1xf32>
  %d = "top.sub"(%x, %m) {names = ["d"]} : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
  %p = "top.mul"(%d, %d) {names = ["p"]} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %v = "top.reduce"(%p) {mode = "mean", axes = [-1, -2], names = ["v"]} : (tensor<2x4x8xf32>) -> tensor<2x1x1xf32>
  %e = "top.add"(%eps, %v) {names = ["e"]} : (tensor<1xf32>, tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %s = "top.sqrt"(%e) {names = ["s"]} : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %r = "top.reciprocal"(%s) {names = ["r"]} : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %y = "top.mul"(%r, %d) {names = ["y"]} : (tensor<2x1x1xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  func.return %y : tensor<2x4x8xf32>
}

// CHECK-LABEL: func.func @reciprocal
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[NONE:.*]] = "top.none"() : () -> none
// CHECK-NEXT:  %[[Y:.*]] = "top.layer_norm"(%[[X]], %[[NONE]], %[[NONE]]) {axis = 1 : i64, epsilon = 1.000000e-06 : f64, names = ["y"]}
// CHECK-NEXT:  func.return %[[Y]]

// gamma of shape 1x4x8 over the two trailing axes becomes a 4x8 scale.
func.func @gamma_reshaped(%arg0: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %eps = "top.weight"() {names = ["eps"]} : () -> tensor<f32>
  %gamma = "top.weight"() {names = ["gamma_hw"]} : () -> tensor<1x4x8xf32>
  %m = "top.reduce"(%x) {mode = "mean", axes = [1, 2], keepdims = true, names = ["m"]} : (tensor<2x4x8xf32>) -> tensor<2x1x1xf32>
  %d = "top.sub"(%x, %m) {names = ["d"]} : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
  %p = "top.mul"(%d, %d) {names = ["p"]} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %v = "top.reduce"(%p) {mode = "mean", axes = [1, 2], names = ["v"]} : (tensor<2x4x8xf32>) -> tensor<2x1x1xf32>
  %e = "top.add"(%v, %eps) {names = ["e"]} : (tensor<2x1x1xf32>, tensor<f32>) -> tensor<2x1x1xf32>
  %s = "top.rsqrt"(%e) {names = ["s"]} : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %n = "top.mul"(%d, %s) {names = ["n"]} : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
  %y = "top.mul"(%gamma, %n) {names = ["y"]} : (tensor<1x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  func.return %y : tensor<2x4x8xf32>
}

// CHECK-LABEL: func.func @gamma_reshaped
// CHECK:       %[[G:.*]] = "top.weight"() {names = ["y_scale"]} : () -> tensor<4x8xf32>
// CHECK-NEXT:  %[[Y:.*]] = "top.layer_norm"(%{{.*}}, %[[G]], %{{.*}}) {axis = 1 : i64, epsilon = {{.*}}, names = ["y"]} : (tensor<2x4x8xf32>, tensor<4x8xf32>, none) -> tensor<2x4x8xf32>
// CHECK-NEXT:  func.return %[[Y]]

// Not layer norm: reducing a leading axis; without keepdims; a multiplier varying
// along a non-normalized axis stays a mul.
func.func @not_layer_norm(%arg0: tensor<5x8xf32>) -> (tensor<5x8xf32>, tensor<5x8xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<5x8xf32>) -> tensor<5x8xf32>
  %eps = "top.weight"() {names = ["eps"]} : () -> tensor<f32>
  %rows = "top.weight"() {names = ["per_row"]} : () -> tensor<5x1xf32>
  %m = "top.reduce"(%x) {mode = "mean", axes = [0], keepdims = true, names = ["m"]} : (tensor<5x8xf32>) -> tensor<1x8xf32>
  %d = "top.sub"(%x, %m) {names = ["d"]} : (tensor<5x8xf32>, tensor<1x8xf32>) -> tensor<5x8xf32>
  %p = "top.mul"(%d, %d) {names = ["p"]} : (tensor<5x8xf32>, tensor<5x8xf32>) -> tensor<5x8xf32>
  %v = "top.reduce"(%p) {mode = "mean", axes = [0], keepdims = true, names = ["v"]} : (tensor<5x8xf32>) -> tensor<1x8xf32>
  %e = "top.add"(%v, %eps) {names = ["e"]} : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %s = "top.sqrt"(%e) {names = ["s"]} : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %y = "top.div"(%d, %s) {names = ["y"]} : (tensor<5x8xf32>, tensor<1x8xf32>) -> tensor<5x8xf32>
  %m2 = "top.reduce"(%x) {mode = "mean", axes = [1], keepdims = true, names = ["m2"]} : (tensor<5x8xf32>) -> tensor<5x1xf32>
  %d2 = "top.sub"(%x, %m2) {names = ["d2"]} : (tensor<5x8xf32>, tensor<5x1xf32>) -> tensor<5x8xf32>
  %p2 = "top.mul"(%d2, %d2) {names = ["p2"]} : (tensor<5x8xf32>, tensor<5x8xf32>) -> tensor<5x8xf32>
  %v2 = "top.reduce"(%p2) {mode = "mean", axes = [1], keepdims = true, names = ["v2"]} : (tensor<5x8xf32>) -> tensor<5x1xf32>
  %e2 = "top.add"(%v2, %eps) {names = ["e2"]} : (tensor<5x1xf32>, tensor<f32>) -> tensor<5x1xf32>
  %s2 = "top.sqrt"(%e2) {names = ["s2"]} : (tensor<5x1xf32>) -> tensor<5x1xf32>
  %n2 = "top.div"(%d2, %s2) {names = ["n2"]} : (tensor<5x8xf32>, tensor<5x1xf32>) -> tensor<5x8xf32>
  %z = "top.mul"(%n2, %rows) {names = ["z"]} : (tensor<5x8xf32>, tensor<5x1xf32>) -> tensor<5x8xf32>
  func.return %y, %z : tensor<5x8xf32>, tensor<5x8xf32>
}

// CHECK-LABEL: func.func @not_layer_norm
// CHECK:       %[[Y:.*]] = "top.div"({{.*}}) {names = ["y"]}
// CHECK:       %[[N:.*]] = "top.layer_norm"(%{{.*}}, %{{.*}}, %{{.*}}) {axis = 1 : i64, epsilon = {{.*}}, names = ["n2"]}
// CHECK-NEXT:  %[[Z:.*]] = "top.mul"(%[[N]], %{{.*}}) {names = ["z"]}
// CHECK-NEXT:  func.return %[[Y]], %[[Z]]
