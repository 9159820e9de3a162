// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x4xbf16>) -> tensor<1x3x4x4xbf16> {
  %y = "tpu.sigmoid"(%arg0) {names = ["y"]} : (tensor<1x3x4x4xbf16>) -> tensor<1x3x4x4xbf16>
  func.return %y : tensor<1x3x4x4xbf16>
}

// CHECK:      %[[Y:.*]] = "tpu.sigmoid"(%arg0) {names = ["y"]} : (tensor<1x3x4x4xbf16>) -> tensor<1x3x4x4xbf16>
// CHECK-NEXT: func.return
