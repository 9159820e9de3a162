// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3xf16>) -> tensor<4x6xf16> {
  %y = "tpu.tile"(%arg0) {repeats = [2, 2], names = ["y"]} : (tensor<2x3xf16>) -> tensor<4x6xf16>
  func.return %y : tensor<4x6xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.tile"(%arg0) {repeats = [2 : i64, 2 : i64], names = ["y"]} : (tensor<2x3xf16>) -> tensor<4x6xf16>
// CHECK-NEXT: func.return
