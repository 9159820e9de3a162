// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x5xbf16>, %arg1: tensor<1x6xi32>) -> (tensor<2x5xbf16>, tensor<1x6xi32>) {
  %y = "tpu.cumsum"(%arg0) {axis = 1, exclusive = true, reverse = true, names = ["y"]} : (tensor<2x5xbf16>) -> tensor<2x5xbf16>
  %p = "tpu.cumsum"(%arg1) {axis = 1, names = ["positions"]} : (tensor<1x6xi32>) -> tensor<1x6xi32>
  func.return %y, %p : tensor<2x5xbf16>, tensor<1x6xi32>
}

// CHECK:      %[[Y:.*]] = "tpu.cumsum"(%arg0) {axis = 1 : i64, exclusive = true, reverse = true, names = ["y"]} : (tensor<2x5xbf16>) -> tensor<2x5xbf16>
// CHECK-NEXT: %[[P:.*]] = "tpu.cumsum"(%arg1) {axis = 1 : i64, names = ["positions"]} : (tensor<1x6xi32>) -> tensor<1x6xi32>
