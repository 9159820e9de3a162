// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3xi8>, %arg1: tensor<2x3xf16>) -> tensor<2x3xf16> {
  %b = "top.weight"() {names = ["b"]} : () -> tensor<3xf16>
  %y = "tpu.where"(%arg0, %arg1, %b) {names = ["y"]} : (tensor<2x3xi8>, tensor<2x3xf16>, tensor<3xf16>) -> tensor<2x3xf16>
  func.return %y : tensor<2x3xf16>
}

// CHECK:      %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<3xf16>
// CHECK-NEXT: %[[Y:.*]] = "tpu.where"(%arg0, %arg1, %[[B]]) {names = ["y"]} : (tensor<2x3xi8>, tensor<2x3xf16>, tensor<3xf16>) -> tensor<2x3xf16>
// CHECK-NEXT: func.return
