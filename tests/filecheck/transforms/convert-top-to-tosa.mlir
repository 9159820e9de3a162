// RUN: python %S/Inputs/convert_top_to_tosa_weights.py %t.npz && tpu-opt -p convert-top-to-tosa --weight-file %t.npz %s | filecheck %s

// conv (3x3/2, pad 1 on 16: TOSA's divisibility rule trims the bottom/right pad to 0) ->
// ReLU6 -> depthwise conv -> global average pool -> flatten -> matmul. Channels-last from the
// first conv to the pool: one transpose at the input, none between the convs, one before the
// flatten, which works in NCHW order.
builtin.module attributes {module.name = "chain", module.state = "TOP_F32"} {
  func.func @main(%arg0: tensor<1x3x16x16xf32>) -> tensor<1x4xf32> {
    %none = "top.none"() : () -> none
    %x = "top.input"(%arg0) {names = ["image"]} : (tensor<1x3x16x16xf32>) -> tensor<1x3x16x16xf32>
    %w0 = "top.weight"() {names = ["w0"]} : () -> tensor<8x3x3x3xf32>
    %b0 = "top.weight"() {names = ["b0"]} : () -> tensor<8xf32>
    %c0 = "top.conv"(%x, %w0, %b0) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], do_relu = true, relu_limit = 6.0 : f64, names = ["c0"]} : (tensor<1x3x16x16xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<1x8x8x8xf32>
    %w1 = "top.weight"() {names = ["w1"]} : () -> tensor<8x1x3x3xf32>
    %c1 = "top.conv"(%c0, %w1, %none) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], group = 8, names = ["c1"]} : (tensor<1x8x8x8xf32>, tensor<8x1x3x3xf32>, none) -> tensor<1x8x8x8xf32>
    %p = "top.avg_pool"(%c1) {kernel_shape = [8, 8], strides = [1, 1], names = ["gap"]} : (tensor<1x8x8x8xf32>) -> tensor<1x8x1x1xf32>
    %f = "top.reshape"(%p) {names = ["flat"]} : (tensor<1x8x1x1xf32>) -> tensor<1x8xf32>
    %wfc = "top.weight"() {names = ["wfc"]} : () -> tensor<8x4xf32>
    %y = "top.matmul"(%f, %wfc, %none) {names = ["logits"]} : (tensor<1x8xf32>, tensor<8x4xf32>, none) -> tensor<1x4xf32>
    func.return %y : tensor<1x4xf32>
  }
}

// CHECK:      builtin.module attributes {module.name = "chain", module.state = "TOSA_F32", module.source_state = "TOP_F32"} {
// CHECK-NEXT:   func.func @main(%{{.*}}: tensor<1x3x16x16xf32> {tpu.name = "image"}) -> (tensor<1x4xf32> {tpu.name = "logits"}) {
// CHECK:          %[[IN:.*]] = "tosa.transpose"(%{{.*}}) <{perms = array<i32: 0, 2, 3, 1>}> : (tensor<1x3x16x16xf32>) -> tensor<1x16x16x3xf32>
// CHECK:          %[[C0:.*]] = "tosa.conv2d"(%[[IN]], %{{.*}}) <{pad = array<i64: 1, 0, 1, 0>, stride = array<i64: 2, 2>, dilation = array<i64: 1, 1>, acc_type = f32}> : (tensor<1x16x16x3xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x8xf32>
// CHECK-NEXT:     %[[R:.*]] = "tosa.clamp"(%[[C0]]) <{min_val = 0.000000e+00 : f32, max_val = 6.000000e+00 : f32}>
// CHECK-NOT:      "tosa.transpose"
// CHECK:          %[[C1:.*]] = "tosa.depthwise_conv2d"(%[[R]], %{{.*}}) <{pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>, acc_type = f32}> : (tensor<1x8x8x8xf32>, tensor<3x3x8x1xf32>, tensor<8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x8xf32>
// CHECK-NEXT:     %[[P:.*]] = "tosa.avg_pool2d"(%[[C1]], %{{.*}}, %{{.*}}) <{kernel = array<i64: 8, 8>, stride = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, acc_type = f32}> : (tensor<1x8x8x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x1x1x8xf32>
// CHECK-NEXT:     %[[T:.*]] = "tosa.transpose"(%[[P]]) <{perms = array<i32: 0, 3, 1, 2>}> : (tensor<1x1x1x8xf32>) -> tensor<1x8x1x1xf32>
// CHECK:          "tosa.reshape"(%[[T]], %{{.*}}) : (tensor<1x8x1x1xf32>, !tosa.shape<2>) -> tensor<1x8xf32>
// CHECK:          "tosa.matmul"({{.*}}) : (tensor<1x1x8xf32>, tensor<1x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x1x4xf32>
// CHECK:          func.return %{{.*}} : tensor<1x4xf32>
