// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<5xbf16>) -> tensor<5xbf16> {
  %y = "tpu.floor"(%arg0) {names = ["y"]} : (tensor<5xbf16>) -> tensor<5xbf16>
  func.return %y : tensor<5xbf16>
}

// CHECK:      %[[Y:.*]] = "tpu.floor"(%arg0) {names = ["y"]} : (tensor<5xbf16>) -> tensor<5xbf16>
// CHECK-NEXT: func.return
