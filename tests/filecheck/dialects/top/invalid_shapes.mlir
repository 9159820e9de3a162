// RUN: tpu-opt %s --split-input-file --verify-diagnostics | filecheck %s

// The shape rules' messages (tpu_xdsl/dialects/shapes/): each names the op,
// the result, operand or attribute at fault, and the values involved.

// A conv whose declared output ignores the strides: 16x16, k=3, s=2 gives 7x7.
func.func @main(%x: tensor<1x3x16x16xf32>, %w: tensor<4x3x3x3xf32>) {
  %n = "top.none"() : () -> none
  %0 = "top.conv"(%x, %w, %n) {kernel_shape = [3, 3], strides = [2, 2], pads = [0, 0, 0, 0]} : (tensor<1x3x16x16xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x8x8xf32>
  func.return
}

// CHECK:      'top.conv' result 'output' has shape 1x4x8x8, expected 1x4x7x7 from operands input 1x3x16x16, filter 4x3x3x3, bias none and attributes kernel_shape = [3, 3], strides = [2, 2], pads = [0, 0, 0, 0]

// -----

// Input channels must be filter channels * group.
func.func @main(%x: tensor<1x6x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %n = "top.none"() : () -> none
  %0 = "top.conv"(%x, %w, %n) {kernel_shape = [3, 3]} : (tensor<1x6x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x6x6xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.conv' attribute 'group' = 1: operand 'input' 1x6x8x8 has 6 channels, expected 3 (filter channels 3 of operand 'filter' 4x3x3x3 * group 1)

// -----

// Operands that do not broadcast (numpy rules, aligned from the right).
func.func @main(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) {
  %0 = "top.add"(%a, %b) : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.add' operands 'lhs' 2x3 and 'rhs' 4x3 do not broadcast: 2 vs 4 at axis -2

// -----

// A broadcast that is fine, with a declared result of the wrong shape.
func.func @main(%a: tensor<2x1x4xf32>, %b: tensor<3x1xf32>) {
  %0 = "top.mul"(%a, %b) : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x1x4xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.mul' result 'output' has shape 2x1x4, expected 2x3x4 from operands lhs 2x1x4, rhs 3x1

// -----

// Concat inputs may differ only along the axis.
func.func @main(%a: tensor<1x3x8xf32>, %b: tensor<1x5x9xf32>) {
  %0 = "top.concat"(%a, %b) {axis = 1 : i64} : (tensor<1x3x8xf32>, tensor<1x5x9xf32>) -> tensor<1x8x8xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.concat' operand 'inputs[1]' 1x5x9 differs from 'inputs[0]' 1x3x8 in dim 2 (9 vs 8), but attribute 'axis' = 1 is the only dim that may differ

// -----

// A concat result that does not add up along the axis.
func.func @main(%a: tensor<1x3x8xf32>, %b: tensor<1x5x8xf32>) {
  %0 = "top.concat"(%a, %b) {axis = -2 : i64} : (tensor<1x3x8xf32>, tensor<1x5x8xf32>) -> tensor<1x3x16xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.concat' result 'output' has shape 1x3x16, expected 1x8x8 from operands inputs [1x3x8, 1x5x8] and attributes axis = -2

// -----

// A reshape keeps the element count.
func.func @main(%x: tensor<1x3x8x8xf32>) {
  %0 = "top.reshape"(%x) : (tensor<1x3x8x8xf32>) -> tensor<2x3x5xf32>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.reshape' result 'output' has shape 2x3x5 with 30 elements, expected 192 like operand 'input' 1x3x8x8

// -----

// Split sizes add up to the axis size.
func.func @main(%x: tensor<2x10xf32>) {
  %0, %1 = "top.split"(%x) {axis = 1 : i64, split = [3, 6]} : (tensor<2x10xf32>) -> (tensor<2x3xf32>, tensor<2x6xf32>)
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'top.split' attribute 'split' = [3, 6] adds up to 9, expected 10, dim 1 of operand 'input' 2x10
