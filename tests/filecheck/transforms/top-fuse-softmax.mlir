// RUN: tpu-opt -p top-fuse-softmax %s | filecheck %s

// Softmax as tf2onnx writes JAX's: the max over the axis without keepdims, reshaped and
// broadcast back, subtracted; the exponentials over their sum, reshaped and broadcast the
// same way -> softmax over axis 1, named as the division; the rest goes.
func.func @jax(%arg0: tensor<2x5xf32>) -> tensor<2x5xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  %m = "top.reduce"(%x) {mode = "max", axes = [1 : i64], keepdims = false, names = ["m"]} : (tensor<2x5xf32>) -> tensor<2xf32>
  %mr = "top.reshape"(%m) {shape = [2 : i64, 1 : i64], names = ["mr"]} : (tensor<2xf32>) -> tensor<2x1xf32>
  %mb = "top.expand"(%mr) {names = ["mb"]} : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %d = "top.sub"(%x, %mb) {names = ["d"]} : (tensor<2x5xf32>, tensor<2x1xf32>) -> tensor<2x5xf32>
  %e = "top.exp"(%d) {names = ["e"]} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  %s = "top.reduce"(%e) {mode = "sum", axes = [1 : i64], keepdims = false, names = ["s"]} : (tensor<2x5xf32>) -> tensor<2xf32>
  %sr = "top.reshape"(%s) {shape = [2 : i64, 1 : i64], names = ["sr"]} : (tensor<2xf32>) -> tensor<2x1xf32>
  %sb = "top.expand"(%sr) {names = ["sb"]} : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %y = "top.div"(%e, %sb) {names = ["y"]} : (tensor<2x5xf32>, tensor<2x1xf32>) -> tensor<2x5xf32>
  func.return %y : tensor<2x5xf32>
}

// CHECK-LABEL: func.func @jax
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[Y:.*]] = "top.softmax"(%[[X]]) {axis = 1 : i64, names = ["y"]} : (tensor<2x5xf32>) -> tensor<2x5xf32>
// CHECK-NEXT:  func.return %[[Y]]

// exp(x) / sum(exp(x)) with keepdims and no shift, over axis 0; the exponentials stay while
// something else reads them.
func.func @plain(%arg0: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %e = "top.exp"(%x) {names = ["e"]} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %s = "top.reduce"(%e) {mode = "sum", axes = [0 : i64], keepdims = true, names = ["s"]} : (tensor<3x4xf32>) -> tensor<1x4xf32>
  %y = "top.div"(%e, %s) {names = ["y"]} : (tensor<3x4xf32>, tensor<1x4xf32>) -> tensor<3x4xf32>
  func.return %y, %e : tensor<3x4xf32>, tensor<3x4xf32>
}

// CHECK-LABEL: func.func @plain
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[E:.*]] = "top.exp"(%[[X]])
// CHECK-NEXT:  %[[Y:.*]] = "top.softmax"(%[[X]]) {axis = 0 : i64, names = ["y"]}
// CHECK-NEXT:  func.return %[[Y]], %[[E]]

// Not a softmax: the sum is of other exponentials, or over two axes.
func.func @not_softmax(%arg0: tensor<3x4xf32>, %arg1: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %z = "top.input"(%arg1) {names = ["z"]} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %e = "top.exp"(%x) {names = ["e"]} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %f = "top.exp"(%z) {names = ["f"]} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %s = "top.reduce"(%f) {mode = "sum", axes = [1 : i64], keepdims = true, names = ["s"]} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %y = "top.div"(%e, %s) {names = ["y"]} : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  %t = "top.reduce"(%e) {mode = "sum", axes = [0 : i64, 1 : i64], keepdims = true, names = ["t"]} : (tensor<3x4xf32>) -> tensor<1x1xf32>
  %w = "top.div"(%e, %t) {names = ["w"]} : (tensor<3x4xf32>, tensor<1x1xf32>) -> tensor<3x4xf32>
  func.return %y, %w : tensor<3x4xf32>, tensor<3x4xf32>
}

// CHECK-LABEL: func.func @not_softmax
// CHECK-NOT:   top.softmax
// CHECK:       func.return

// The max over axis 1 without its dims kept broadcasts along axis 0 here (x[i, j] - m[j]):
// not constant along the rows, so the softmax is of the difference, which stays.
func.func @shift_along_the_other_axis(%arg0: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %m = "top.reduce"(%x) {mode = "max", axes = [1 : i64], keepdims = false, names = ["m"]} : (tensor<3x3xf32>) -> tensor<3xf32>
  %d = "top.sub"(%x, %m) {names = ["d"]} : (tensor<3x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
  %e = "top.exp"(%d) {names = ["e"]} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %s = "top.reduce"(%e) {mode = "sum", axes = [1 : i64], keepdims = true, names = ["s"]} : (tensor<3x3xf32>) -> tensor<3x1xf32>
  %y = "top.div"(%e, %s) {names = ["y"]} : (tensor<3x3xf32>, tensor<3x1xf32>) -> tensor<3x3xf32>
  func.return %y : tensor<3x3xf32>
}

// CHECK-LABEL: func.func @shift_along_the_other_axis
// CHECK:       %[[D:.*]] = "top.sub"
// CHECK-NEXT:  %[[Y:.*]] = "top.softmax"(%[[D]]) {axis = 1 : i64, names = ["y"]}
// CHECK-NEXT:  func.return %[[Y]]
