// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3xf32>) -> tensor<4x9xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = "top.tile"(%x) {repeats = [2, 3], names = ["y"]} : (tensor<2x3xf32>) -> tensor<4x9xf32>
  func.return %y : tensor<4x9xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.tile"(%[[X]]) {repeats = [2 : i64, 3 : i64], names = ["y"]} : (tensor<2x3xf32>) -> tensor<4x9xf32>
