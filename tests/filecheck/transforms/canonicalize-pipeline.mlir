// RUN: tpu-opt -p top-fuse-relu,top-dce %s | filecheck %s

// Passes compose: conv + relu fuse, then the weight nothing reads goes.
func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %dead = "top.weight"() {names = ["dead"]} : () -> tensor<4xf32>
  %none = "top.none"() : () -> none
  %conv = "top.conv"(%x, %w, %none) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], names = ["conv"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x8x8xf32>
  %y = "top.relu"(%conv) {names = ["y"]} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// CHECK:       %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[W:.*]] = "top.weight"() {names = ["w"]}
// CHECK-NEXT:  %[[NONE:.*]] = "top.none"
// CHECK-NEXT:  %[[Y:.*]] = "top.conv"(%[[X]], %[[W]], %[[NONE]]) {{{.*}}names = ["y"], do_relu = true{{.*}}}
// CHECK-NEXT:  func.return %[[Y]]
