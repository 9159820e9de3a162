// RUN: tpu-opt %s --split-input-file --verify-diagnostics | filecheck %s

// The IRDL verifier's messages: each names the op, the field and the offending
// value. Result shapes are the true ONNX shapes, so only the IRDL constraint
// under test can fail.

// An attribute of the wrong kind.
func.func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %n: none) {
  %0 = "top.conv"(%x, %w, %n) {kernel_shape = [3, 3], strides = "x"} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x6x6xf32>
  func.return
}

// CHECK:      'top.conv' attribute 'strides' has invalid value "x": expected an array whose elements are each an integer

// -----

// A float in an integer array.
func.func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %n: none) {
  %0 = "top.conv"(%x, %w, %n) {kernel_shape = [3, 3], pads = [1, 1, 0.5, 1]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x7x8xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.conv' attribute 'pads' has invalid value [1 : i64, 1 : i64, 5.000000e-01 : f64, 1 : i64]: expected an array whose elements are each an integer

// -----

// An integer where a float is required.
func.func @main(%x: tensor<1x3x8x8xf32>) {
  %0 = "top.relu"(%x) {relu_limit = 6} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.relu' attribute 'relu_limit' has invalid value 6 : i64: expected a float

// -----

// A bool must be i1.
func.func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %n: none) {
  %0 = "top.conv"(%x, %w, %n) {kernel_shape = [3, 3], do_relu = 1} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x6x6xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.conv' attribute 'do_relu' has invalid value 1 : i64: expected a bool (true or false)

// -----

// A string attribute given an integer.
func.func @main(%x: tensor<2x3xf32>) {
  %0 = "top.reduce"(%x) {mode = 1, axes = [1]} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.reduce' attribute 'mode' has invalid value 1 : i64: expected a string

// -----

// names is an array of strings.
func.func @main(%x: tensor<1x3x8x8xf32>) {
  %0 = "top.relu"(%x) {names = "y"} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.relu' attribute 'names' has invalid value "y": expected an array whose elements are each a string

// -----

// A missing required attribute.
func.func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %n: none) {
  %0 = "top.conv"(%x, %w, %n) {strides = [1, 1]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x6x6xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: attribute 'kernel_shape' expected in operation 'top.conv'

// -----

// A weight without its name (the weight-file key).
func.func @main() {
  %0 = "top.weight"() : () -> tensor<4xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: attribute 'names' expected in operation 'top.weight'

// -----

// A wrong operand count: an absent bias is a top.none operand, not a missing one.
func.func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %0 = "top.conv"(%x, %w) {kernel_shape = [3, 3]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.conv': Expected 3 operands, but got 2

// -----

// An f16 tensor where TOP requires f32.
func.func @main(%x: tensor<1x3x8x8xf16>, %w: tensor<4x3x3x3xf32>, %n: none) {
  %0 = "top.conv"(%x, %w, %n) {kernel_shape = [3, 3]} : (tensor<1x3x8x8xf16>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x6x6xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.conv' operand 'input' has invalid value tensor<1x3x8x8xf16>: expected a tensor of f32

// -----

// A tensor-or-none operand given an integer tensor.
func.func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xi32>) {
  %0 = "top.conv"(%x, %w, %b) {kernel_shape = [3, 3]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xi32>) -> tensor<1x4x6x6xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.conv' operand 'bias' has invalid value tensor<4xi32>: expected a tensor of f32 or none

// -----

// A result that is not a tensor.
func.func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %n: none) {
  %0 = "top.conv"(%x, %w, %n) {kernel_shape = [3, 3]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> memref<1x4x6x6xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.conv' result 'output' has invalid value memref<1x4x6x6xf32>: expected a tensor of f32

// -----

// A variadic result with a non-f32 tensor.
func.func @main(%x: tensor<1x6x4xf32>) {
  %0, %1 = "top.split"(%x) {axis = 1, split = [2, 4]} : (tensor<1x6x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x4x4xi32>)
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.split' result 'outputs' has invalid value tensor<1x4x4xi32>: i32 differs from f32, which another field already bound to the same IRDL constraint (they must be equal)
