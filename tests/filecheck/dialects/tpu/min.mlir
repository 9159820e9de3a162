// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %b = "top.weight"() {names = ["b"]} : () -> tensor<3xbf16>
  %y = "tpu.min"(%arg0, %b) {names = ["y"]} : (tensor<2x3xbf16>, tensor<3xbf16>) -> tensor<2x3xbf16>
  func.return %y : tensor<2x3xbf16>
}

// CHECK:      %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<3xbf16>
// CHECK-NEXT: %[[Y:.*]] = "tpu.min"(%arg0, %[[B]]) {names = ["y"]} : (tensor<2x3xbf16>, tensor<3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: func.return
