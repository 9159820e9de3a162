// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x8x2x3xf32>) -> tensor<1x2x4x6xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x8x2x3xf32>) -> tensor<1x8x2x3xf32>
  %y = "top.depth2space"(%x) {block_size = 2, mode = "CRD", inverse = false, names = ["y"]} : (tensor<1x8x2x3xf32>) -> tensor<1x2x4x6xf32>
  func.return %y : tensor<1x2x4x6xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x8x2x3xf32>) -> tensor<1x8x2x3xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.depth2space"(%[[X]]) {block_size = 2 : i64, mode = "CRD", inverse = false, names = ["y"]} : (tensor<1x8x2x3xf32>) -> tensor<1x2x4x6xf32>
