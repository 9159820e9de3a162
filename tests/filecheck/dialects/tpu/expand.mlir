// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<3x1xi8>) -> tensor<2x3x4xi8> {
  %y = "tpu.expand"(%arg0) {names = ["y"]} : (tensor<3x1xi8>) -> tensor<2x3x4xi8>
  func.return %y : tensor<2x3x4xi8>
}

// CHECK:      %[[Y:.*]] = "tpu.expand"(%arg0) {names = ["y"]} : (tensor<3x1xi8>) -> tensor<2x3x4xi8>
// CHECK-NEXT: func.return
