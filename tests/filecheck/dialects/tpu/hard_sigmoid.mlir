// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x8xbf16>) -> tensor<1x8xbf16> {
  %y = "tpu.hard_sigmoid"(%arg0) {alpha = 0.2, beta = 0.5, names = ["y"]} : (tensor<1x8xbf16>) -> tensor<1x8xbf16>
  func.return %y : tensor<1x8xbf16>
}

// CHECK:      %[[Y:.*]] = "tpu.hard_sigmoid"(%arg0) {alpha = 2.000000e-01 : f64, beta = 5.000000e-01 : f64, names = ["y"]} : (tensor<1x8xbf16>) -> tensor<1x8xbf16>
// CHECK-NEXT: func.return
