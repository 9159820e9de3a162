// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x4xi8>) -> tensor<1x3x6x6xi8> {
  %y = "tpu.pad"(%arg0) {pads = [0, 0, 1, 1, 0, 0, 1, 1], mode = "constant", value = 0.0, names = ["y"]} : (tensor<1x3x4x4xi8>) -> tensor<1x3x6x6xi8>
  func.return %y : tensor<1x3x6x6xi8>
}

// CHECK:      %[[Y:.*]] = "tpu.pad"(%arg0) {pads = [0 : i64, 0 : i64, 1 : i64, 1 : i64, 0 : i64, 0 : i64, 1 : i64, 1 : i64], mode = "constant", value = 0.000000e+00 : f64, names = ["y"]} : (tensor<1x3x4x4xi8>) -> tensor<1x3x6x6xi8>
// CHECK-NEXT: func.return
