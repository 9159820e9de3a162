// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<4x4xf16>, %arg1: tensor<2x4xf16>) -> tensor<4x4xf16> {
  %ids = "top.weight"() {names = ["ids"]} : () -> tensor<2x1xi32>
  %y = "tpu.scatter_nd"(%arg0, %ids, %arg1) {reduction = "none", names = ["y"]} : (tensor<4x4xf16>, tensor<2x1xi32>, tensor<2x4xf16>) -> tensor<4x4xf16>
  func.return %y : tensor<4x4xf16>
}

// CHECK:      %[[IDS:.*]] = "top.weight"() {names = ["ids"]} : () -> tensor<2x1xi32>
// CHECK-NEXT: %[[Y:.*]] = "tpu.scatter_nd"(%arg0, %[[IDS]], %arg1) {reduction = "none", names = ["y"]} : (tensor<4x4xf16>, tensor<2x1xi32>, tensor<2x4xf16>) -> tensor<4x4xf16>
// CHECK-NEXT: func.return
