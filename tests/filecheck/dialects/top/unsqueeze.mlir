// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<3x4xf32>) -> tensor<1x3x4x1xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %y = "top.unsqueeze"(%x) {axes = [0, 3], names = ["y"]} : (tensor<3x4xf32>) -> tensor<1x3x4x1xf32>
  func.return %y : tensor<1x3x4x1xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.unsqueeze"(%[[X]]) {axes = [0 : i64, 3 : i64], names = ["y"]} : (tensor<3x4xf32>) -> tensor<1x3x4x1xf32>
