// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x4xf32>) -> tensor<1x3x8x12xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = "top.upsample"(%x) {scale_h = 2, scale_w = 3, names = ["y"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x12xf32>
  func.return %y : tensor<1x3x8x12xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.upsample"(%[[X]]) {scale_h = 2 : i64, scale_w = 3 : i64, names = ["y"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x12xf32>
