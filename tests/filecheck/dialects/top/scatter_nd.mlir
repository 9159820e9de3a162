// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<4x5xf32>, %arg1: tensor<2x5xf32>) -> tensor<4x5xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  %upd = "top.input"(%arg1) {names = ["upd"]} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  %ids = "top.weight"() {names = ["ids"]} : () -> tensor<2x1xi64>
  %y = "top.scatter_nd"(%x, %ids, %upd) {reduction = "add", names = ["y"]} : (tensor<4x5xf32>, tensor<2x1xi64>, tensor<2x5xf32>) -> tensor<4x5xf32>
  func.return %y : tensor<4x5xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<4x5xf32>) -> tensor<4x5xf32>
// CHECK-NEXT: %[[UPD:.*]] = "top.input"(%arg1) {names = ["upd"]} : (tensor<2x5xf32>) -> tensor<2x5xf32>
// CHECK-NEXT: %[[IDS:.*]] = "top.weight"() {names = ["ids"]} : () -> tensor<2x1xi64>
// CHECK-NEXT: %[[Y:.*]] = "top.scatter_nd"(%[[X]], %[[IDS]], %[[UPD]]) {reduction = "add", names = ["y"]} : (tensor<4x5xf32>, tensor<2x1xi64>, tensor<2x5xf32>) -> tensor<4x5xf32>
