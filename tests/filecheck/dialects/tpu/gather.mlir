// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<10x4xf16>) -> tensor<2x3x4xf16> {
  %ids = "top.weight"() {names = ["ids"]} : () -> tensor<2x3xi32>
  %y = "tpu.gather"(%arg0, %ids) {axis = 0, names = ["y"]} : (tensor<10x4xf16>, tensor<2x3xi32>) -> tensor<2x3x4xf16>
  func.return %y : tensor<2x3x4xf16>
}

// CHECK:      %[[IDS:.*]] = "top.weight"() {names = ["ids"]} : () -> tensor<2x3xi32>
// CHECK-NEXT: %[[Y:.*]] = "tpu.gather"(%arg0, %[[IDS]]) {axis = 0 : i64, names = ["y"]} : (tensor<10x4xf16>, tensor<2x3xi32>) -> tensor<2x3x4xf16>
// CHECK-NEXT: func.return
