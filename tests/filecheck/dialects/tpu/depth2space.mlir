// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// DepthToSpace in F16 and SpaceToDepth (inverse) in INT8.

func.func @main(%arg0: tensor<1x8x2x2xf16>, %arg1: tensor<1x2x4x4xi8>) -> (tensor<1x2x4x4xf16>, tensor<1x8x2x2xi8>) {
  %y = "tpu.depth2space"(%arg0) {block_size = 2, mode = "DCR", inverse = false, names = ["y"]} : (tensor<1x8x2x2xf16>) -> tensor<1x2x4x4xf16>
  %z = "tpu.depth2space"(%arg1) {block_size = 2, mode = "CRD", inverse = true, names = ["z"]} : (tensor<1x2x4x4xi8>) -> tensor<1x8x2x2xi8>
  func.return %y, %z : tensor<1x2x4x4xf16>, tensor<1x8x2x2xi8>
}

// CHECK:      %[[Y:.*]] = "tpu.depth2space"(%arg0) {block_size = 2 : i64, mode = "DCR", inverse = false, names = ["y"]} : (tensor<1x8x2x2xf16>) -> tensor<1x2x4x4xf16>
// CHECK-NEXT: %[[Z:.*]] = "tpu.depth2space"(%arg1) {block_size = 2 : i64, mode = "CRD", inverse = true, names = ["z"]} : (tensor<1x2x4x4xi8>) -> tensor<1x8x2x2xi8>
// CHECK-NEXT: func.return
