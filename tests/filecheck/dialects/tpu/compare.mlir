// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// The TPU has no bool tensors: the 0/1 result is i8.

func.func @main(%arg0: tensor<2x3xf16>) -> tensor<2x3xi8> {
  %b = "top.weight"() {names = ["b"]} : () -> tensor<3xf16>
  %y = "tpu.compare"(%arg0, %b) {mode = "lt", names = ["y"]} : (tensor<2x3xf16>, tensor<3xf16>) -> tensor<2x3xi8>
  func.return %y : tensor<2x3xi8>
}

// CHECK:      %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<3xf16>
// CHECK-NEXT: %[[Y:.*]] = "tpu.compare"(%arg0, %[[B]]) {mode = "lt", names = ["y"]} : (tensor<2x3xf16>, tensor<3xf16>) -> tensor<2x3xi8>
// CHECK-NEXT: func.return
