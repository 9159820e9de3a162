// RUN: tpu-opt %s --split-input-file --verify-diagnostics | filecheck %s

// TPU ops share the TOP shape rules (tpu_xdsl/dialects/shapes/); element
// types (here INT8, F16, BF16) do not matter. Each message names the op, the
// result, operand or attribute at fault, and the values involved.

// A conv whose declared output ignores the padding: 8x8, k=3, p=1 gives 8x8.
func.func @main(%x: tensor<1x3x8x8xi8>, %w: tensor<4x3x3x3xi8>, %b: tensor<4xi32>) {
  %0 = "tpu.conv"(%x, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : (tensor<1x3x8x8xi8>, tensor<4x3x3x3xi8>, tensor<4xi32>) -> tensor<1x4x6x6xi8>
  func.return
}

// CHECK:      'tpu.conv' result 'output' has shape 1x4x6x6, expected 1x4x8x8 from operands input 1x3x8x8, filter 4x3x3x3, bias 4 and attributes kernel_shape = [3, 3], pads = [1, 1, 1, 1]

// -----

// A depthwise conv with a group that does not match the channels.
func.func @main(%x: tensor<1x32x8x8xi8>, %w: tensor<32x1x3x3xi8>) {
  %n = "top.none"() : () -> none
  %0 = "tpu.conv"(%x, %w, %n) {kernel_shape = [3, 3], group = 16 : i64} : (tensor<1x32x8x8xi8>, tensor<32x1x3x3xi8>, none) -> tensor<1x32x6x6xi8>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'tpu.conv' attribute 'group' = 16: operand 'input' 1x32x8x8 has 32 channels, expected 16 (filter channels 1 of operand 'filter' 32x1x3x3 * group 16)

// -----

// Operands that do not broadcast (numpy rules, aligned from the right).
func.func @main(%a: tensor<1x3x8xi8>, %b: tensor<3x4xi8>) {
  %0 = "tpu.add"(%a, %b) : (tensor<1x3x8xi8>, tensor<3x4xi8>) -> tensor<1x3x8xi8>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'tpu.add' operands 'lhs' 1x3x8 and 'rhs' 3x4 do not broadcast: 8 vs 4 at axis -1

// -----

// Concat inputs may differ only along the axis.
func.func @main(%a: tensor<1x16x8x8xf16>, %b: tensor<1x16x4x8xf16>) {
  %0 = "tpu.concat"(%a, %b) {axis = 1 : i64} : (tensor<1x16x8x8xf16>, tensor<1x16x4x8xf16>) -> tensor<1x32x8x8xf16>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'tpu.concat' operand 'inputs[1]' 1x16x4x8 differs from 'inputs[0]' 1x16x8x8 in dim 2 (4 vs 8), but attribute 'axis' = 1 is the only dim that may differ

// -----

// A reshape keeps the element count.
func.func @main(%x: tensor<1x16x8x8xbf16>) {
  %0 = "tpu.reshape"(%x) : (tensor<1x16x8x8xbf16>) -> tensor<1x16x60xbf16>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'tpu.reshape' result 'output' has shape 1x16x60 with 960 elements, expected 1024 like operand 'input' 1x16x8x8

// -----

// A quantize cast keeps the shape.
func.func @main(%x: tensor<1x3x8x8xf32>) {
  %0 = "tpu.cast"(%x) {scale = 0.5 : f64} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x4xi8>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'tpu.cast' result 'output' has shape 1x3x8x4, expected 1x3x8x8 from operands input 1x3x8x8

// -----

// A look-up table has one entry per 8-bit value.
func.func @main(%x: tensor<1x3xi8>, %t: tensor<128xi8>) {
  %0 = "tpu.lut"(%x, %t) : (tensor<1x3xi8>, tensor<128xi8>) -> tensor<1x3xi8>
  func.return
}

// CHECK:      {{^//}} -----
// CHECK-NEXT: 'tpu.lut' operand 'table' 128 has 128 elements, expected 256 (one per 8-bit value)
