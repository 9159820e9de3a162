// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x4xi8>) -> tensor<1x3x8x8xi8> {
  %y = "tpu.upsample"(%arg0) {scale_h = 2, scale_w = 2, names = ["y"]} : (tensor<1x3x4x4xi8>) -> tensor<1x3x8x8xi8>
  func.return %y : tensor<1x3x8x8xi8>
}

// CHECK:      %[[Y:.*]] = "tpu.upsample"(%arg0) {scale_h = 2 : i64, scale_w = 2 : i64, names = ["y"]} : (tensor<1x3x4x4xi8>) -> tensor<1x3x8x8xi8>
// CHECK-NEXT: func.return
