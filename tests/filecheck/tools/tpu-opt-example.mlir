// The sample model shipped in examples/ parses, verifies and round-trips.
// RUN: tpu-opt %S/../../../examples/resnet_block.top.mlir | tpu-opt | filecheck %s
// Stock xdsl-opt reads the same file through the xdsl.universe entry point.
// RUN: xdsl-opt %S/../../../examples/resnet_block.top.mlir | filecheck %s

// CHECK:      builtin.module attributes {module.name = "resnet_block", module.state = "TOP_F32"
// CHECK:      "top.conv"(%{{.*}}, %{{.*}}, %{{.*}}) {kernel_shape = [3 : i64, 3 : i64], strides = [1 : i64, 1 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], do_relu = true, names = ["stem_relu"]}
// CHECK:      "top.add"
// CHECK-SAME: names = ["block_out"]
// CHECK:      "top.avg_pool"
// CHECK:      "top.matmul"
// CHECK:      "top.softmax"(%{{.*}}) {axis = 1 : i64, names = ["prob"]} : (tensor<1x10xf32>) -> tensor<1x10xf32>
