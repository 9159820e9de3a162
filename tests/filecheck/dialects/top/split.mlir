// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x6x4xf32>) -> tensor<1x4x4xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x6x4xf32>) -> tensor<1x6x4xf32>
  %a, %b = "top.split"(%x) {axis = 1, split = [2, 4], names = ["a", "b"]} : (tensor<1x6x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x4x4xf32>)
  func.return %b : tensor<1x4x4xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x6x4xf32>) -> tensor<1x6x4xf32>
// CHECK-NEXT: %[[A:[^,]*]], %[[B:.*]] = "top.split"(%[[X]]) {axis = 1 : i64, split = [2 : i64, 4 : i64], names = ["a", "b"]} : (tensor<1x6x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x4x4xf32>)
