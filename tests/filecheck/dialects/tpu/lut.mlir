// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// An INT8 activation (e.g. sigmoid) as a 256-entry table.

func.func @main(%arg0: tensor<1x8x4x4xi8>) -> tensor<1x8x4x4xi8> {
  %table = "top.weight"() {names = ["table"]} : () -> tensor<256xi8>
  %y = "tpu.lut"(%arg0, %table) {names = ["y"]} : (tensor<1x8x4x4xi8>, tensor<256xi8>) -> tensor<1x8x4x4xi8>
  func.return %y : tensor<1x8x4x4xi8>
}

// CHECK:      %[[TABLE:.*]] = "top.weight"() {names = ["table"]} : () -> tensor<256xi8>
// CHECK-NEXT: %[[Y:.*]] = "tpu.lut"(%arg0, %[[TABLE]]) {names = ["y"]} : (tensor<1x8x4x4xi8>, tensor<256xi8>) -> tensor<1x8x4x4xi8>
// CHECK-NEXT: func.return
