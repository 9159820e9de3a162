// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x10xf32>) -> tensor<2x3xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x10xf32>) -> tensor<2x10xf32>
  %v, %i = "top.topk"(%x) {k = 3, axis = -1, largest = false, sorted = true, names = ["v", "i"]} : (tensor<2x10xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>)
  func.return %v : tensor<2x3xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<2x10xf32>) -> tensor<2x10xf32>
// CHECK-NEXT: %[[V:[^,]*]], %[[I:.*]] = "top.topk"(%[[X]]) {k = 3 : i64, axis = -1 : i64, largest = false, sorted = true, names = ["v", "i"]} : (tensor<2x10xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>)
