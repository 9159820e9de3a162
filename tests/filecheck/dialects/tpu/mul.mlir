// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// INT8 mul: one multiplier and rshift for the product.

func.func @main(%arg0: tensor<1x4x2x2xi8>, %arg1: tensor<1x4x1x1xi8>) -> tensor<1x4x2x2xi8> {
  %y = "tpu.mul"(%arg0, %arg1) {do_relu = true, relu_limit = 6.0, multiplier = [181], rshift = [15], round_mode = "half_to_even", names = ["y"]} : (tensor<1x4x2x2xi8>, tensor<1x4x1x1xi8>) -> tensor<1x4x2x2xi8>
  func.return %y : tensor<1x4x2x2xi8>
}

// CHECK:      %[[Y:.*]] = "tpu.mul"(%arg0, %arg1) {do_relu = true, relu_limit = 6.000000e+00 : f64, multiplier = [181 : i64], rshift = [15 : i64], round_mode = "half_to_even", names = ["y"]} : (tensor<1x4x2x2xi8>, tensor<1x4x1x1xi8>) -> tensor<1x4x2x2xi8>
// CHECK-NEXT: func.return
