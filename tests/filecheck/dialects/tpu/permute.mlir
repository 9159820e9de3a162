// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x5xf16>) -> tensor<1x4x5x3xf16> {
  %y = "tpu.permute"(%arg0) {order = [0, 2, 3, 1], names = ["y"]} : (tensor<1x3x4x5xf16>) -> tensor<1x4x5x3xf16>
  func.return %y : tensor<1x4x5x3xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.permute"(%arg0) {order = [0 : i64, 2 : i64, 3 : i64, 1 : i64], names = ["y"]} : (tensor<1x3x4x5xf16>) -> tensor<1x4x5x3xf16>
// CHECK-NEXT: func.return
