// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<3x4xi8>) -> tensor<1x3x4xi8> {
  %y = "tpu.unsqueeze"(%arg0) {axes = [0], names = ["y"]} : (tensor<3x4xi8>) -> tensor<1x3x4xi8>
  func.return %y : tensor<1x3x4xi8>
}

// CHECK:      %[[Y:.*]] = "tpu.unsqueeze"(%arg0) {axes = [0 : i64], names = ["y"]} : (tensor<3x4xi8>) -> tensor<1x3x4xi8>
// CHECK-NEXT: func.return
