// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %y = "top.expand"(%x) {names = ["y"]} : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
  func.return %y : tensor<2x3x4xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<3x1xf32>) -> tensor<3x1xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.expand"(%[[X]]) {names = ["y"]} : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
