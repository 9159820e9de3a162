// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3x4x5xf16>) -> tensor<6x20xf16> {
  %y = "tpu.flatten"(%arg0) {axis = 2, names = ["y"]} : (tensor<2x3x4x5xf16>) -> tensor<6x20xf16>
  func.return %y : tensor<6x20xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.flatten"(%arg0) {axis = 2 : i64, names = ["y"]} : (tensor<2x3x4x5xf16>) -> tensor<6x20xf16>
// CHECK-NEXT: func.return
