// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<5xf16>) -> tensor<5xf16> {
  %y = "tpu.ceil"(%arg0) {names = ["y"]} : (tensor<5xf16>) -> tensor<5xf16>
  func.return %y : tensor<5xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.ceil"(%arg0) {names = ["y"]} : (tensor<5xf16>) -> tensor<5xf16>
// CHECK-NEXT: func.return
