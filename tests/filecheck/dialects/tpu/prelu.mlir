// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// INT8 prelu: the i8 slope is scaled by 2^-rshift.

func.func @main(%arg0: tensor<1x4x2x2xi8>) -> tensor<1x4x2x2xi8> {
  %slope = "top.weight"() {names = ["slope"]} : () -> tensor<1x4x1x1xi8>
  %y = "tpu.prelu"(%arg0, %slope) {rshift = [7], names = ["y"]} : (tensor<1x4x2x2xi8>, tensor<1x4x1x1xi8>) -> tensor<1x4x2x2xi8>
  func.return %y : tensor<1x4x2x2xi8>
}

// CHECK:      %[[SLOPE:.*]] = "top.weight"() {names = ["slope"]} : () -> tensor<1x4x1x1xi8>
// CHECK-NEXT: %[[Y:.*]] = "tpu.prelu"(%arg0, %[[SLOPE]]) {rshift = [7 : i64], names = ["y"]} : (tensor<1x4x2x2xi8>, tensor<1x4x1x1xi8>) -> tensor<1x4x2x2xi8>
// CHECK-NEXT: func.return
