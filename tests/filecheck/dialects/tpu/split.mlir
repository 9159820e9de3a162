// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x6x4xf16>) -> (tensor<1x2x4xf16>, tensor<1x4x4xf16>) {
  %a, %b = "tpu.split"(%arg0) {axis = 1, split = [2, 4], names = ["a", "b"]} : (tensor<1x6x4xf16>) -> (tensor<1x2x4xf16>, tensor<1x4x4xf16>)
  func.return %a, %b : tensor<1x2x4xf16>, tensor<1x4x4xf16>
}

// CHECK:      %[[A:[^,]*]], %[[B:.*]] = "tpu.split"(%arg0) {axis = 1 : i64, split = [2 : i64, 4 : i64], names = ["a", "b"]} : (tensor<1x6x4xf16>) -> (tensor<1x2x4xf16>, tensor<1x4x4xf16>)
// CHECK-NEXT: func.return
