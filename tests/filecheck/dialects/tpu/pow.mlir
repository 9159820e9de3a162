// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %e = "top.weight"() {names = ["e"]} : () -> tensor<1xf32>
  %y = "tpu.pow"(%arg0, %e) {names = ["y"]} : (tensor<2x3xf32>, tensor<1xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}

// CHECK:      %[[E:.*]] = "top.weight"() {names = ["e"]} : () -> tensor<1xf32>
// CHECK-NEXT: %[[Y:.*]] = "tpu.pow"(%arg0, %[[E]]) {names = ["y"]} : (tensor<2x3xf32>, tensor<1xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: func.return
