// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x2x3x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %y = "top.slice"(%x) {starts = [0, 1], ends = [2, 7], axes = [1, 2], steps = [1, 2], names = ["y"]} : (tensor<1x3x8x8xf32>) -> tensor<1x2x3x8xf32>
  func.return %y : tensor<1x2x3x8xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.slice"(%[[X]]) {starts = [0 : i64, 1 : i64], ends = [2 : i64, 7 : i64], axes = [1 : i64, 2 : i64], steps = [1 : i64, 2 : i64], names = ["y"]} : (tensor<1x3x8x8xf32>) -> tensor<1x2x3x8xf32>
