// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x4xf32>) -> tensor<1x3x6x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = "top.pad"(%x) {pads = [0, 0, 1, 2, 0, 0, 1, 2], mode = "constant", value = 0.5, names = ["y"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x6x8xf32>
  func.return %y : tensor<1x3x6x8xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.pad"(%[[X]]) {pads = [0 : i64, 0 : i64, 1 : i64, 2 : i64, 0 : i64, 0 : i64, 1 : i64, 2 : i64], mode = "constant", value = 5.000000e-01 : f64, names = ["y"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x6x8xf32>
