// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x4xf16>, %arg1: tensor<1x2x5x2xf16>) -> tensor<1x3x2x5xf16> {
  %y = "tpu.grid_sample"(%arg0, %arg1) {mode = "cubic", padding_mode = "border", names = ["y"]} : (tensor<1x3x4x4xf16>, tensor<1x2x5x2xf16>) -> tensor<1x3x2x5xf16>
  func.return %y : tensor<1x3x2x5xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.grid_sample"(%arg0, %arg1) {mode = "cubic", padding_mode = "border", names = ["y"]} : (tensor<1x3x4x4xf16>, tensor<1x2x5x2xf16>) -> tensor<1x3x2x5xf16>
// CHECK-NEXT: func.return
