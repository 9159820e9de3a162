// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<8xbf16>) -> tensor<8xbf16> {
  %y = "tpu.cos"(%arg0) {names = ["y"]} : (tensor<8xbf16>) -> tensor<8xbf16>
  func.return %y : tensor<8xbf16>
}

// CHECK:      %[[Y:.*]] = "tpu.cos"(%arg0) {names = ["y"]} : (tensor<8xbf16>) -> tensor<8xbf16>
// CHECK-NEXT: func.return
