// tpu-opt reports invalid input in one line naming op, field and value, exits
// with code 2 and prints no Python traceback (--debug: the traceback, and the same code).
// RUN: not tpu-opt %s 2>&1 | filecheck %s
// RUN: sh -c 'tpu-opt %s 2>/dev/null; test $? -eq 2'
// RUN: not tpu-opt %s --debug 2>&1 | filecheck %s --check-prefix=DEBUG
// RUN: sh -c 'tpu-opt %s --debug 2>/dev/null; test $? -eq 2'

func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %0 = "top.input"(%arg0) : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %1 = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %2 = "top.none"() : () -> none
  %3 = "top.conv"(%0, %1, %2) {kernel_shape = [3, 3], strides = "x", pads = [1, 1, 1, 1]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x8x8xf32>
  func.return %3 : tensor<1x4x8x8xf32>
}

// CHECK-NOT: Traceback
// CHECK:     tpu-opt: error: 'top.conv' attribute 'strides' has invalid value "x": expected an array whose elements are each an integer
// CHECK-NOT: Traceback

// DEBUG: Traceback
