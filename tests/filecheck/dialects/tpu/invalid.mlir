// RUN: tpu-opt %s --split-input-file --verify-diagnostics | filecheck %s

// TPU tensors have no f64 elements.
func.func @main(%arg0: tensor<1x4xf64>) -> tensor<1x4xf64> {
  %0 = "tpu.relu"(%arg0) : (tensor<1x4xf64>) -> tensor<1x4xf64>
  func.return %0 : tensor<1x4xf64>
}

// CHECK: 'tpu.relu' operand 'input' has invalid value tensor<1x4xf64>: expected a tensor of f32 or f16 or bf16 or i8 or ui8 or i16 or i32

// -----

// Also not in results nor in a tensor-or-none operand.
func.func @main(%arg0: tensor<1x3x8x8xf16>, %arg1: tensor<4x3x3x3xf16>, %arg2: tensor<4xf64>) -> tensor<1x4x6x6xf16> {
  %0 = "tpu.conv"(%arg0, %arg1, %arg2) {kernel_shape = [3, 3]} : (tensor<1x3x8x8xf16>, tensor<4x3x3x3xf16>, tensor<4xf64>) -> tensor<1x4x6x6xf16>
  func.return %0 : tensor<1x4x6x6xf16>
}

// CHECK: 'tpu.conv' operand 'bias' has invalid value tensor<4xf64>: expected a tensor of f32 or f16 or bf16 or i8 or ui8 or i16 or i32 or none

// -----

// Nor i64, nor signed si8 (signless i8 is the signed int8).
func.func @main(%arg0: tensor<1x4xi64>) -> tensor<1x4xsi8> {
  %0 = "tpu.cast"(%arg0) : (tensor<1x4xi64>) -> tensor<1x4xsi8>
  func.return %0 : tensor<1x4xsi8>
}

// CHECK: 'tpu.cast' operand 'input' has invalid value tensor<1x4xi64>: expected a tensor of f32 or f16 or bf16 or i8 or ui8 or i16 or i32

// -----

func.func @main(%arg0: tensor<1x4xi8>) -> tensor<1x4xsi8> {
  %0 = "tpu.cast"(%arg0) : (tensor<1x4xi8>) -> tensor<1x4xsi8>
  func.return %0 : tensor<1x4xsi8>
}

// CHECK: 'tpu.cast' result 'output' has invalid value tensor<1x4xsi8>: expected a tensor of f32 or f16 or bf16 or i8 or ui8 or i16 or i32

// -----

// requant takes i32 or i8 and gives i8 or ui8.
func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x4xi8> {
  %0 = "tpu.requant"(%arg0) {multiplier = [3], rshift = [2]} : (tensor<1x4xf32>) -> tensor<1x4xi8>
  func.return %0 : tensor<1x4xi8>
}

// CHECK: 'tpu.requant' operand 'input' has invalid value tensor<1x4xf32>: expected a tensor of i32 or i8

// -----

func.func @main(%arg0: tensor<1x4xi32>) -> tensor<1x4xi32> {
  %0 = "tpu.requant"(%arg0) {multiplier = [3], rshift = [2]} : (tensor<1x4xi32>) -> tensor<1x4xi32>
  func.return %0 : tensor<1x4xi32>
}

// CHECK: 'tpu.requant' result 'output' has invalid value tensor<1x4xi32>: expected a tensor of i8 or ui8

// -----

// lut looks up i8 or ui8 values.
func.func @main(%arg0: tensor<1x4xf16>, %arg1: tensor<256xf16>) -> tensor<1x4xf16> {
  %0 = "tpu.lut"(%arg0, %arg1) : (tensor<1x4xf16>, tensor<256xf16>) -> tensor<1x4xf16>
  func.return %0 : tensor<1x4xf16>
}

// CHECK: 'tpu.lut' operand 'input' has invalid value tensor<1x4xf16>: expected a tensor of i8 or ui8

// -----

// multiplier is an array, even per tensor.
func.func @main(%arg0: tensor<1x4xi32>) -> tensor<1x4xi8> {
  %0 = "tpu.requant"(%arg0) {multiplier = 3, rshift = [2]} : (tensor<1x4xi32>) -> tensor<1x4xi8>
  func.return %0 : tensor<1x4xi8>
}

// CHECK: 'tpu.requant' attribute 'multiplier' has invalid value 3 : i64: expected an array whose elements are each an integer

// -----

func.func @main(%arg0: tensor<1x4xi8>, %arg1: tensor<1x4xi8>) -> tensor<1x4xi8> {
  %0 = "tpu.add"(%arg0, %arg1) {multiplier = [1, 2], rshift = [1.0, 1.0]} : (tensor<1x4xi8>, tensor<1x4xi8>) -> tensor<1x4xi8>
  func.return %0 : tensor<1x4xi8>
}

// CHECK: 'tpu.add' attribute 'rshift' has invalid value [1.000000e+00 : f64, 1.000000e+00 : f64]: expected an array whose elements are each an integer

// -----

// requant's multiplier and rshift are required.
func.func @main(%arg0: tensor<1x4xi32>) -> tensor<1x4xi8> {
  %0 = "tpu.requant"(%arg0) {rshift = [2]} : (tensor<1x4xi32>) -> tensor<1x4xi8>
  func.return %0 : tensor<1x4xi8>
}

// CHECK: attribute 'multiplier' expected in operation 'tpu.requant'

// -----

// ginfo is a #tpu.lg_info.
func.func @main(%arg0: tensor<1x4xf16>) -> tensor<1x4xf16> {
  %0 = "tpu.relu"(%arg0) {ginfo = [0, 16]} : (tensor<1x4xf16>) -> tensor<1x4xf16>
  func.return %0 : tensor<1x4xf16>
}

// CHECK: 'tpu.relu' attribute 'ginfo' has invalid value [0 : i64, 16 : i64]: expected a tpu.lg_info

// -----

// A yield outside a group.
func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x4xf32> {
  "tpu.yield"(%arg0) : (tensor<1x4xf32>) -> ()
}

// CHECK: 'tpu.yield' expects parent op 'tpu.group', not 'func.func'

// -----

// A yield that is not last.
func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %0 = "tpu.group"() ({
    "tpu.yield"(%arg0) : (tensor<1x4xf32>) -> ()
    %1 = "tpu.relu"(%arg0) : (tensor<1x4xf32>) -> tensor<1x4xf32>
  }) {n_slices = 1, h_slices = 1} : () -> tensor<1x4xf32>
  func.return %0 : tensor<1x4xf32>
}

// CHECK: 'tpu.yield' must be the last operation in its parent block

// -----

// A group body that does not end in a terminator.
func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %0 = "tpu.group"() ({
    %1 = "tpu.relu"(%arg0) : (tensor<1x4xf32>) -> tensor<1x4xf32>
  }) {n_slices = 1, h_slices = 1} : () -> tensor<1x4xf32>
  func.return %0 : tensor<1x4xf32>
}

// CHECK: Operation tpu.relu terminates block in single-block region but is not a terminator

// -----

// A group body ending in another terminator.
func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %0 = "tpu.group"() ({
    %1 = "tpu.relu"(%arg0) : (tensor<1x4xf32>) -> tensor<1x4xf32>
    "test.termop"(%1) : (tensor<1x4xf32>) -> ()
  }) {n_slices = 1, h_slices = 1} : () -> tensor<1x4xf32>
  func.return %0 : tensor<1x4xf32>
}

// CHECK: 'tpu.group' body must end in 'tpu.yield', found 'test.termop'

// -----

// Fewer yielded values than group results.
func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %0, %1 = "tpu.group"() ({
    %2 = "tpu.relu"(%arg0) : (tensor<1x4xf32>) -> tensor<1x4xf32>
    "tpu.yield"(%2) : (tensor<1x4xf32>) -> ()
  }) {n_slices = 1, h_slices = 1} : () -> (tensor<1x4xf32>, tensor<1x4xf32>)
  func.return %0 : tensor<1x4xf32>
}

// CHECK: 'tpu.group' has 2 results but its 'tpu.yield' yields 1 value

// -----

// A yielded type differing from the group's result type.
func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x4xf16> {
  %0 = "tpu.group"() ({
    %1 = "tpu.relu"(%arg0) : (tensor<1x4xf32>) -> tensor<1x4xf32>
    "tpu.yield"(%1) : (tensor<1x4xf32>) -> ()
  }) {n_slices = 1, h_slices = 1} : () -> tensor<1x4xf16>
  func.return %0 : tensor<1x4xf16>
}

// CHECK: 'tpu.group' result 0 has type tensor<1x4xf16> but its 'tpu.yield' yields tensor<1x4xf32>

// -----

// A group takes no operands.
func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %0 = "tpu.group"(%arg0) ({
    "tpu.yield"(%arg0) : (tensor<1x4xf32>) -> ()
  }) {n_slices = 1, h_slices = 1} : (tensor<1x4xf32>) -> tensor<1x4xf32>
  func.return %0 : tensor<1x4xf32>
}

// CHECK: Expected 0 operands, but got 1

// -----

// tpu.load needs its ginfo.
func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %0 = "tpu.group"() ({
    %1 = "tpu.load"(%arg0) : (tensor<1x4xf32>) -> tensor<1x4xf32>
    "tpu.yield"(%1) : (tensor<1x4xf32>) -> ()
  }) {n_slices = 1, h_slices = 1} : () -> tensor<1x4xf32>
  func.return %0 : tensor<1x4xf32>
}

// CHECK: attribute 'ginfo' expected in operation 'tpu.load'
