// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x3x4x4xf32>, %arg1: tensor<1x2x5x2xf32>) -> tensor<1x3x2x5xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %g = "top.input"(%arg1) {names = ["grid"]} : (tensor<1x2x5x2xf32>) -> tensor<1x2x5x2xf32>
  %y = "top.grid_sample"(%x, %g) {mode = "linear", padding_mode = "zeros", align_corners = 1 : i64, names = ["y"]} : (tensor<1x3x4x4xf32>, tensor<1x2x5x2xf32>) -> tensor<1x3x2x5xf32>
  func.return %y : tensor<1x3x2x5xf32>
}

// CHECK:      %[[Y:.*]] = "top.grid_sample"(%{{.*}}, %{{.*}}) {mode = "linear", padding_mode = "zeros", align_corners = 1 : i64, names = ["y"]} : (tensor<1x3x4x4xf32>, tensor<1x2x5x2xf32>) -> tensor<1x3x2x5xf32>
// CHECK-NEXT: func.return %[[Y]]
