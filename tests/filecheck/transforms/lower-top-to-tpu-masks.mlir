// RUN: tpu-opt -p "lower-top-to-tpu{mode=F32}" %s | filecheck %s
// RUN: tpu-opt -p "lower-top-to-tpu{mode=BF16}" %s | filecheck %s --check-prefix=BF16

builtin.module attributes {module.name = "masks", module.state = "TOP_F32"} {
  func.func @main(%arg0: tensor<1x4x8xf32>, %arg1: tensor<1x4x8xf32>) -> (tensor<1x4x8xf32>, tensor<1x8xi64>) {
    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
    %y = "top.input"(%arg1) {names = ["y"]} : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
    %m = "top.compare"(%x, %y) {mode = "gt", names = ["m"]} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xi1>
    %w = "top.where"(%m, %x, %y) {names = ["w"]} : (tensor<1x4x8xi1>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
    %a = "top.arg"(%w) {mode = "max", axis = 1 : i64, keepdims = false, names = ["a"]} : (tensor<1x4x8xf32>) -> tensor<1x8xi64>
    func.return %w, %a : tensor<1x4x8xf32>, tensor<1x8xi64>
  }
}

// TPU ops hold no bool and no int64: a mask is int8 0 and 1, indices are int32 (also
// the function's result); the data around them takes the mode.
// CHECK:      func.func @main(%arg0: tensor<1x4x8xf32>, %arg1: tensor<1x4x8xf32>) -> (tensor<1x4x8xf32>, tensor<1x8xi32>)
// CHECK:      %[[M:.*]] = "tpu.compare"(%x, %y) {mode = "gt", names = ["m"]} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xi8>
// CHECK-NEXT: %[[W:.*]] = "tpu.where"(%[[M]], %x, %y) {names = ["w"]} : (tensor<1x4x8xi8>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
// CHECK-NEXT: %[[A:.*]] = "tpu.arg"(%[[W]]) {{.*}} : (tensor<1x4x8xf32>) -> tensor<1x8xi32>
// CHECK-NEXT: func.return %[[W]], %[[A]] : tensor<1x4x8xf32>, tensor<1x8xi32>

// BF16:      "tpu.compare"({{.*}}) {mode = "gt", names = ["m"]} : (tensor<1x4x8xbf16>, tensor<1x4x8xbf16>) -> tensor<1x4x8xi8>
// BF16:      "tpu.arg"({{.*}}) {{.*}} : (tensor<1x4x8xbf16>) -> tensor<1x8xi32>
