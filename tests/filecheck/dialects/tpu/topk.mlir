// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x10xf16>) -> (tensor<2x3xf16>, tensor<2x3xi32>) {
  %v, %i = "tpu.topk"(%arg0) {k = 3, axis = -1, largest = true, sorted = true, names = ["v", "i"]} : (tensor<2x10xf16>) -> (tensor<2x3xf16>, tensor<2x3xi32>)
  func.return %v, %i : tensor<2x3xf16>, tensor<2x3xi32>
}

// CHECK:      %[[V:[^,]*]], %[[I:.*]] = "tpu.topk"(%arg0) {k = 3 : i64, axis = -1 : i64, largest = true, sorted = true, names = ["v", "i"]} : (tensor<2x10xf16>) -> (tensor<2x3xf16>, tensor<2x3xi32>)
// CHECK-NEXT: func.return
