// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x5xf32>, %arg1: tensor<1x6xi64>) -> (tensor<2x5xf32>, tensor<1x6xi64>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  %m = "top.input"(%arg1) {names = ["mask"]} : (tensor<1x6xi64>) -> tensor<1x6xi64>
  %y = "top.cumsum"(%x) {axis = 1, exclusive = true, reverse = false, names = ["y"]} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  %p = "top.cumsum"(%m) {axis = 1, names = ["positions"]} : (tensor<1x6xi64>) -> tensor<1x6xi64>
  func.return %y, %p : tensor<2x5xf32>, tensor<1x6xi64>
}

// CHECK:      %[[Y:.*]] = "top.cumsum"(%x) {axis = 1 : i64, exclusive = true, reverse = false, names = ["y"]} : (tensor<2x5xf32>) -> tensor<2x5xf32>
// CHECK-NEXT: %[[P:.*]] = "top.cumsum"(%m) {axis = 1 : i64, names = ["positions"]} : (tensor<1x6xi64>) -> tensor<1x6xi64>
