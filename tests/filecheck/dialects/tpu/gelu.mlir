// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x16xf16>) -> tensor<2x16xf16> {
  %y = "tpu.gelu"(%arg0) {approximate = "tanh", names = ["y"]} : (tensor<2x16xf16>) -> tensor<2x16xf16>
  func.return %y : tensor<2x16xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.gelu"(%arg0) {approximate = "tanh", names = ["y"]} : (tensor<2x16xf16>) -> tensor<2x16xf16>
// CHECK-NEXT: func.return
