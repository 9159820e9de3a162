// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x5xf32>) -> tensor<1x4x5x3xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x5xf32>) -> tensor<1x3x4x5xf32>
  %y = "top.permute"(%x) {order = [0, 2, 3, 1], names = ["y"]} : (tensor<1x3x4x5xf32>) -> tensor<1x4x5x3xf32>
  func.return %y : tensor<1x4x5x3xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x5xf32>) -> tensor<1x3x4x5xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.permute"(%[[X]]) {order = [0 : i64, 2 : i64, 3 : i64, 1 : i64], names = ["y"]} : (tensor<1x3x4x5xf32>) -> tensor<1x4x5x3xf32>
