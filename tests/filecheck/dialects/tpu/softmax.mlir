// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x5xbf16>) -> tensor<2x5xbf16> {
  %y = "tpu.softmax"(%arg0) {axis = 1, names = ["y"]} : (tensor<2x5xbf16>) -> tensor<2x5xbf16>
  func.return %y : tensor<2x5xbf16>
}

// CHECK:      %[[Y:.*]] = "tpu.softmax"(%arg0) {axis = 1 : i64, names = ["y"]} : (tensor<2x5xbf16>) -> tensor<2x5xbf16>
// CHECK-NEXT: func.return
