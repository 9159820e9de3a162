// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x16xbf16>) -> tensor<1x16xbf16> {
  %y = "tpu.rsqrt"(%arg0) {names = ["y"]} : (tensor<1x16xbf16>) -> tensor<1x16xbf16>
  func.return %y : tensor<1x16xbf16>
}

// CHECK:      %[[Y:.*]] = "tpu.rsqrt"(%arg0) {names = ["y"]} : (tensor<1x16xbf16>) -> tensor<1x16xbf16>
// CHECK-NEXT: func.return
