// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x8xf16>) -> tensor<2x8xf16> {
  %y = "tpu.elu"(%arg0) {alpha = 1.0, names = ["y"]} : (tensor<2x8xf16>) -> tensor<2x8xf16>
  func.return %y : tensor<2x8xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.elu"(%arg0) {alpha = 1.000000e+00 : f64, names = ["y"]} : (tensor<2x8xf16>) -> tensor<2x8xf16>
// CHECK-NEXT: func.return
