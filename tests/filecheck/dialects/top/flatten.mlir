// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3x4x5xf32>) -> tensor<6x20xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %y = "top.flatten"(%x) {axis = 2, names = ["y"]} : (tensor<2x3x4x5xf32>) -> tensor<6x20xf32>
  func.return %y : tensor<6x20xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.flatten"(%[[X]]) {axis = 2 : i64, names = ["y"]} : (tensor<2x3x4x5xf32>) -> tensor<6x20xf32>
