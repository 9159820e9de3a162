// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x8x8xf32>, %arg1: tensor<2x5xi64>) -> tensor<1x3x8x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %ids = "top.input"(%arg1) {names = ["ids"]} : (tensor<2x5xi64>) -> tensor<2x5xi64>
  func.return %x : tensor<1x3x8x8xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
// CHECK-NEXT: %[[IDS:.*]] = "top.input"(%arg1) {names = ["ids"]} : (tensor<2x5xi64>) -> tensor<2x5xi64>
