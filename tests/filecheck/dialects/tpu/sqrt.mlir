// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x16xf16>) -> tensor<1x16xf16> {
  %y = "tpu.sqrt"(%arg0) {names = ["y"]} : (tensor<1x16xf16>) -> tensor<1x16xf16>
  func.return %y : tensor<1x16xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.sqrt"(%arg0) {names = ["y"]} : (tensor<1x16xf16>) -> tensor<1x16xf16>
// CHECK-NEXT: func.return
