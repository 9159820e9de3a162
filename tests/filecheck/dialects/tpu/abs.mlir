// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x8xi8>) -> tensor<1x8xi8> {
  %y = "tpu.abs"(%arg0) {names = ["y"]} : (tensor<1x8xi8>) -> tensor<1x8xi8>
  func.return %y : tensor<1x8xi8>
}

// CHECK:      %[[Y:.*]] = "tpu.abs"(%arg0) {names = ["y"]} : (tensor<1x8xi8>) -> tensor<1x8xi8>
// CHECK-NEXT: func.return
