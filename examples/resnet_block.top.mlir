// A small TOP model: a ResNet basic block and a classifier head, as the ONNX
// importer writes it (weights live in the weight file, not in the IR).
//   tpu-opt examples/resnet_block.top.mlir
builtin.module attributes {module.name = "resnet_block", module.state = "TOP_F32", module.weight_file = "resnet_block_top_weights.npz", module.chip = "ALL"} {
  func.func @main(%arg0: tensor<1x3x32x32xf32>) -> tensor<1x10xf32> {
    %none = "top.none"() : () -> none
    %x = "top.input"(%arg0) {names = ["image"]} : (tensor<1x3x32x32xf32>) -> tensor<1x3x32x32xf32>
    %w0 = "top.weight"() {names = ["stem.weight"]} : () -> tensor<16x3x3x3xf32>
    %b0 = "top.weight"() {names = ["stem.bias"]} : () -> tensor<16xf32>
    %stem = "top.conv"(%x, %w0, %b0) {kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1], do_relu = true, names = ["stem_relu"]} : (tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<1x16x32x32xf32>
    %w1 = "top.weight"() {names = ["block.conv1.weight"]} : () -> tensor<16x16x3x3xf32>
    %b1 = "top.weight"() {names = ["block.conv1.bias"]} : () -> tensor<16xf32>
    %c1 = "top.conv"(%stem, %w1, %b1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], do_relu = true, names = ["block_relu1"]} : (tensor<1x16x32x32xf32>, tensor<16x16x3x3xf32>, tensor<16xf32>) -> tensor<1x16x32x32xf32>
    %w2 = "top.weight"() {names = ["block.conv2.weight"]} : () -> tensor<16x16x3x3xf32>
    %c2 = "top.conv"(%c1, %w2, %none) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], names = ["block_conv2"]} : (tensor<1x16x32x32xf32>, tensor<16x16x3x3xf32>, none) -> tensor<1x16x32x32xf32>
    %sum = "top.add"(%c2, %stem) {do_relu = true, names = ["block_out"]} : (tensor<1x16x32x32xf32>, tensor<1x16x32x32xf32>) -> tensor<1x16x32x32xf32>
    %pool = "top.avg_pool"(%sum) {kernel_shape = [32, 32], strides = [1, 1], names = ["gap"]} : (tensor<1x16x32x32xf32>) -> tensor<1x16x1x1xf32>
    %flat = "top.reshape"(%pool) {names = ["flatten"]} : (tensor<1x16x1x1xf32>) -> tensor<1x16xf32>
    %wfc = "top.weight"() {names = ["fc.weight"]} : () -> tensor<16x10xf32>
    %bfc = "top.weight"() {names = ["fc.bias"]} : () -> tensor<10xf32>
    %fc = "top.matmul"(%flat, %wfc, %bfc) {names = ["logits"]} : (tensor<1x16xf32>, tensor<16x10xf32>, tensor<10xf32>) -> tensor<1x10xf32>
    %prob = "top.softmax"(%fc) {axis = 1, names = ["prob"]} : (tensor<1x10xf32>) -> tensor<1x10xf32>
    func.return %prob : tensor<1x10xf32>
  }
}
