// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x8x4x4xi8>) -> tensor<1x128xi8> {
  %y = "tpu.reshape"(%arg0) {shape = [1, 128], names = ["y"]} : (tensor<1x8x4x4xi8>) -> tensor<1x128xi8>
  func.return %y : tensor<1x128xi8>
}

// CHECK:      %[[Y:.*]] = "tpu.reshape"(%arg0) {shape = [1 : i64, 128 : i64], names = ["y"]} : (tensor<1x8x4x4xi8>) -> tensor<1x128xi8>
// CHECK-NEXT: func.return
