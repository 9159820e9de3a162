// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xi32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = "top.cast"(%x) {names = ["y"]} : (tensor<2x3xf32>) -> tensor<2x3xi32>
  func.return %y : tensor<2x3xi32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[Y:.*]] = "top.cast"(%[[X]]) {names = ["y"]} : (tensor<2x3xf32>) -> tensor<2x3xi32>
