// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<6xi8>) -> tensor<6xi8> {
  %y = "tpu.sign"(%arg0) {names = ["y"]} : (tensor<6xi8>) -> tensor<6xi8>
  func.return %y : tensor<6xi8>
}

// CHECK:      %[[Y:.*]] = "tpu.sign"(%arg0) {names = ["y"]} : (tensor<6xi8>) -> tensor<6xi8>
// CHECK-NEXT: func.return
