// RUN: python %S/Inputs/top_fold_batchnorm_weights.py %t.npz && tpu-opt -p top-fold-batchnorm --weight-file %t.npz %s | filecheck %s

// conv -> batch_norm: one conv with new filter and bias weights, named as the batch_norm.
func.func @conv_bn(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<4xf32>
  %gamma = "top.weight"() {names = ["gamma4"]} : () -> tensor<4xf32>
  %beta = "top.weight"() {names = ["beta4"]} : () -> tensor<4xf32>
  %mean = "top.weight"() {names = ["mean4"]} : () -> tensor<4xf32>
  %var = "top.weight"() {names = ["var4"]} : () -> tensor<4xf32>
  %conv = "top.conv"(%x, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], names = ["conv"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  %y = "top.batch_norm"(%conv, %gamma, %beta, %mean, %var) {epsilon = 1.0e-3, names = ["y"]} : (tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// CHECK-LABEL: func.func @conv_bn
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[W:.*]] = "top.weight"() {names = ["y_filter"]} : () -> tensor<4x3x3x3xf32>
// CHECK-NEXT:  %[[B:.*]] = "top.weight"() {names = ["y_bias"]} : () -> tensor<4xf32>
// CHECK-NEXT:  %[[Y:.*]] = "top.conv"(%[[X]], %[[W]], %[[B]]) {kernel_shape = [3 : i64, 3 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], names = ["y"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
// CHECK-NEXT:  func.return %[[Y]]

// A deconv without bias gets one; a grouped deconv scales its filter per output channel.
// (Weight names are unique in the module's table, hence the suffixes.)
func.func @deconv_bn(%arg0: tensor<1x4x5x5xf32>) -> tensor<1x6x6x6xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x4x5x5xf32>) -> tensor<1x4x5x5xf32>
  %w = "top.weight"() {names = ["dw"]} : () -> tensor<4x3x2x2xf32>
  %none = "top.none"() : () -> none
  %gamma = "top.weight"() {names = ["gamma6"]} : () -> tensor<6xf32>
  %beta = "top.weight"() {names = ["beta6"]} : () -> tensor<6xf32>
  %mean = "top.weight"() {names = ["mean6"]} : () -> tensor<6xf32>
  %var = "top.weight"() {names = ["var6"]} : () -> tensor<6xf32>
  %d = "top.deconv"(%x, %w, %none) {kernel_shape = [2, 2], group = 2, names = ["d"]} : (tensor<1x4x5x5xf32>, tensor<4x3x2x2xf32>, none) -> tensor<1x6x6x6xf32>
  %y = "top.batch_norm"(%d, %gamma, %beta, %mean, %var) {names = ["y"]} : (tensor<1x6x6x6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<1x6x6x6xf32>
  func.return %y : tensor<1x6x6x6xf32>
}

// CHECK-LABEL: func.func @deconv_bn
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[W:.*]] = "top.weight"() {names = ["y_filter_2"]} : () -> tensor<4x3x2x2xf32>
// CHECK-NEXT:  %[[B:.*]] = "top.weight"() {names = ["y_bias_2"]} : () -> tensor<6xf32>
// CHECK-NEXT:  %[[Y:.*]] = "top.deconv"(%[[X]], %[[W]], %[[B]]) {kernel_shape = [2 : i64, 2 : i64], group = 2 : i64, names = ["y"]}
// CHECK-NEXT:  func.return %[[Y]]

// A 2-d matmul with a constant right operand: channels are its last dim.
func.func @matmul_bn(%arg0: tensor<2x6xf32>) -> tensor<2x4xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x6xf32>) -> tensor<2x6xf32>
  %w = "top.weight"() {names = ["fc"]} : () -> tensor<6x4xf32>
  %none = "top.none"() : () -> none
  %gamma = "top.weight"() {names = ["gamma4"]} : () -> tensor<4xf32>
  %beta = "top.weight"() {names = ["beta4"]} : () -> tensor<4xf32>
  %mean = "top.weight"() {names = ["mean4"]} : () -> tensor<4xf32>
  %var = "top.weight"() {names = ["var4"]} : () -> tensor<4xf32>
  %mm = "top.matmul"(%x, %w, %none) {names = ["mm"]} : (tensor<2x6xf32>, tensor<6x4xf32>, none) -> tensor<2x4xf32>
  %y = "top.batch_norm"(%mm, %gamma, %beta, %mean, %var) {names = ["y"]} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @matmul_bn
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[W:.*]] = "top.weight"() {names = ["y_filter_3"]} : () -> tensor<6x4xf32>
// CHECK-NEXT:  %[[B:.*]] = "top.weight"() {names = ["y_bias_3"]} : () -> tensor<4xf32>
// CHECK-NEXT:  %[[Y:.*]] = "top.matmul"(%[[X]], %[[W]], %[[B]]) {names = ["y"]}
// CHECK-NEXT:  func.return %[[Y]]

// No foldable producer (an input; a conv with another use; a conv with a fused
// ReLU): batch_norm becomes scale.
func.func @to_scale(%arg0: tensor<1x3x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %gamma = "top.weight"() {names = ["gamma3"]} : () -> tensor<3xf32>
  %beta = "top.weight"() {names = ["beta3"]} : () -> tensor<3xf32>
  %mean = "top.weight"() {names = ["mean3"]} : () -> tensor<3xf32>
  %var = "top.weight"() {names = ["var3"]} : () -> tensor<3xf32>
  %y = "top.batch_norm"(%x, %gamma, %beta, %mean, %var) {names = ["y"]} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %none = "top.none"() : () -> none
  %g4 = "top.weight"() {names = ["gamma4"]} : () -> tensor<4xf32>
  %b4 = "top.weight"() {names = ["beta4"]} : () -> tensor<4xf32>
  %m4 = "top.weight"() {names = ["mean4"]} : () -> tensor<4xf32>
  %v4 = "top.weight"() {names = ["var4"]} : () -> tensor<4xf32>
  %conv = "top.conv"(%x, %w, %none) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], names = ["conv"]} : (tensor<1x3x4x4xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x4x4xf32>
  %z = "top.batch_norm"(%conv, %g4, %b4, %m4, %v4) {names = ["z"]} : (tensor<1x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
  %conv_r = "top.conv"(%x, %w, %none) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], do_relu = true, names = ["conv_r"]} : (tensor<1x3x4x4xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x4x4xf32>
  %u = "top.batch_norm"(%conv_r, %g4, %b4, %m4, %v4) {names = ["u"]} : (tensor<1x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
  func.return %y, %conv, %z, %u : tensor<1x3x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>
}

// CHECK-LABEL: func.func @to_scale
// CHECK:       %[[S:.*]] = "top.weight"() {names = ["y_scale"]} : () -> tensor<3xf32>
// CHECK-NEXT:  %[[T:.*]] = "top.weight"() {names = ["y_bias_4"]} : () -> tensor<3xf32>
// CHECK-NEXT:  %[[Y:.*]] = "top.scale"(%{{.*}}, %[[S]], %[[T]]) {names = ["y"]} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
// CHECK:       %[[CONV:.*]] = "top.conv"
// CHECK:       "top.scale"(%[[CONV]], %{{.*}}, %{{.*}}) {names = ["z"]}
// CHECK:       %[[CONV_R:.*]] = "top.conv"({{.*}}) {{{.*}}do_relu = true{{.*}}}
// CHECK:       "top.scale"(%[[CONV_R]], %{{.*}}, %{{.*}}) {names = ["u"]}
// CHECK-NOT:   top.batch_norm
