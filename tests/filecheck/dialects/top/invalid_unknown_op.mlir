// RUN: tpu-opt %s --parsing-diagnostics | filecheck %s

// An op the TOP dialect does not define is a parse error naming the op.
func.func @main(%x: tensor<1x3x8x8xf32>) {
  %0 = "top.not_an_op"(%x) : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  func.return
}

// CHECK:      invalid_unknown_op.mlir:5:23
// CHECK-NEXT:   %0 = "top.not_an_op"(%x) : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
// CHECK-NEXT:                       ^
// CHECK-NEXT:                       Operation top.not_an_op is not registered
