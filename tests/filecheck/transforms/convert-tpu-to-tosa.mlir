// RUN: python %S/Inputs/convert_tpu_to_tosa_weights.py %t.npz && tpu-opt -p convert-tpu-to-tosa --weight-file %t.npz %s | filecheck %s

// An INT8 TPU module as lower-top-to-tpu{mode=INT8 round_mode=half_up} writes it:
// quantize, 1x1 conv with per-channel requantization, a lookup table, an add of two
// scales, dequantize.
builtin.module attributes {module.name = "int8", module.state = "TPU_LOWERED", module.chip = "bm1684x", module.mode = "INT8"} {
  func.func @main(%arg0: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %xq = "tpu.cast"(%x) {names = ["x_int8"], scale = 3.125000e-02 : f64, round_mode = "half_up"} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xi8, #tpu.uniform<3.125000e-02 : f64, 0 : i64>>
    %w = "top.weight"() {names = ["w"]} : () -> tensor<2x2x1x1xi8>
    %b = "top.weight"() {names = ["b"]} : () -> tensor<2xi32>
    %c = "tpu.conv"(%xq, %w, %b) {kernel_shape = [1, 1], names = ["c"], multiplier = [1082196484, 1082196484], rshift = [36, 38], round_mode = "half_up", quant_mode = "multiplier_shift"} : (tensor<1x2x4x4xi8, #tpu.uniform<3.125000e-02 : f64, 0 : i64>>, tensor<2x2x1x1xi8>, tensor<2xi32>) -> tensor<1x2x4x4xi8, #tpu.uniform<1.562500e-02 : f64, 0 : i64>>
    %t = "top.weight"() {names = ["t"]} : () -> tensor<256xui8>
    %y = "tpu.lut"(%c, %t) {names = ["y"]} : (tensor<1x2x4x4xi8, #tpu.uniform<1.562500e-02 : f64, 0 : i64>>, tensor<256xui8>) -> tensor<1x2x4x4xui8, #tpu.uniform<3.906250e-03 : f64, 0 : i64>>
    %a = "tpu.add"(%c, %y) {names = ["a"], multiplier = [1073741824, 268435456], rshift = [31], round_mode = "half_up", quant_mode = "multiplier_shift"} : (tensor<1x2x4x4xi8, #tpu.uniform<1.562500e-02 : f64, 0 : i64>>, tensor<1x2x4x4xui8, #tpu.uniform<3.906250e-03 : f64, 0 : i64>>) -> tensor<1x2x4x4xi8, #tpu.uniform<3.125000e-02 : f64, 0 : i64>>
    %af = "tpu.cast"(%a) {names = ["a_float32"], scale = 3.125000e-02 : f64} : (tensor<1x2x4x4xi8, #tpu.uniform<3.125000e-02 : f64, 0 : i64>>) -> tensor<1x2x4x4xf32>
    func.return %af : tensor<1x2x4x4xf32>
  }
}

// Quantize as the half_up kernel does in float32: x * (1 / 2^-5), + 0.5, floor, clamp, cast.
// CHECK:      module.state = "TOSA_INT8"{{.*}}module.source_state = "TPU_LOWERED"
// CHECK:      %[[ZP:.*]] = "tosa.const"() <{values = dense<0> : tensor<1xi8>}>
// CHECK:      %[[INV:.*]] = "tosa.const"() <{values = dense<3.200000e+01> : tensor<1x1x1x1xf32>}>
// CHECK-NEXT: %[[V:.*]] = "tosa.mul"(%0, %[[INV]], %[[ZP]])
// CHECK:      %[[UP:.*]] = "tosa.add"(%[[V]], %{{.*}})
// CHECK-NEXT: %[[FL:.*]] = "tosa.floor"(%[[UP]])
// CHECK-NEXT: %[[CL:.*]] = "tosa.clamp"(%[[FL]]) <{min_val = -1.280000e+02 : f32, max_val = 1.270000e+02 : f32}>
// CHECK-NEXT: %[[XQ:.*]] = "tosa.cast"(%[[CL]]) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xi8>
// CHECK-NEXT: %[[NHWC:.*]] = "tosa.transpose"(%[[XQ]]) <{perms = array<i32: 0, 2, 3, 1>}>

// The conv sums i8 x i8 in i32 with the i32 bias (OHWI weights), then one rescale with the
// op's own per-channel multipliers and shifts along the last (channel) axis.
// CHECK-NEXT: %[[W:.*]] = "tosa.const"() <{values = dense<{{\[\[\[\[}}127, -64]]], {{\[\[\[}}127, 64]]]]> : tensor<2x1x1x2xi8>}>
// CHECK-NEXT: %[[B:.*]] = "tosa.const"() <{values = dense<[2032, -4064]> : tensor<2xi32>}>
// CHECK-NEXT: %[[ACC:.*]] = "tosa.conv2d"(%[[NHWC]], %[[W]], %[[B]], %[[ZP]], %[[ZP]]) <{{{.*}}acc_type = i32}> : {{.*}} -> tensor<1x4x4x2xi32>
// CHECK-NEXT: %[[M:.*]] = "tosa.const"() <{values = dense<1082196484> : tensor<2xi32>}>
// CHECK-NEXT: %[[S:.*]] = "tosa.const"() <{values = dense<[36, 38]> : tensor<2xi8>}>
// CHECK-NEXT: %[[ZP32:.*]] = "tosa.const"() <{values = dense<0> : tensor<1xi32>}>
// CHECK-NEXT: %[[C:.*]] = "tosa.rescale"(%[[ACC]], %[[M]], %[[S]], %[[ZP32]], %[[ZP]]) <{scale32 = true, rounding_mode = #tosa.rounding_mode<SINGLE_ROUND>, per_channel = true, {{.*}}}> : {{.*}} -> tensor<1x4x4x2xi8>

// The table: TOSA reads entry code + 128; the TPU table is indexed by the int8 input's byte
// and holds uint8 codes, which TOSA keeps as i8 less 128: entry i is (i + 128) % 256 - 128.
// CHECK-NEXT: %[[T:.*]] = "tosa.const"() <{values = dense<"0x000102{{.*}}7D7E7F808182{{.*}}FDFEFF"> : tensor<256xi8>}>
// CHECK-NEXT: %[[Y:.*]] = "tosa.table"(%[[C]], %[[T]]) : (tensor<1x4x4x2xi8>, tensor<256xi8>) -> tensor<1x4x4x2xi8>

// The add: both inputs rescaled to i32 (zero points 0 and -128 for the uint8 one), times
// their multipliers (2^30 and 2^28 are multiples of 2^16: q = 2^14 and 2^12, no low part),
// summed in i32 and rescaled by 1 / 2^(31 - 16) to i8.
// CHECK:      %[[C32:.*]] = "tosa.rescale"(%[[C]], %{{.*}}, %{{.*}}, %[[ZP]], %[[ZP32]]) <{{.*}}> : {{.*}} -> tensor<1x4x4x2xi32>
// CHECK:      %[[U8ZP:.*]] = "tosa.const"() <{values = dense<-128> : tensor<1xi8>}>
// CHECK-NEXT: %[[Y32:.*]] = "tosa.rescale"(%[[Y]], %{{.*}}, %{{.*}}, %[[U8ZP]], %[[ZP32]]) <{{.*}}> : {{.*}} -> tensor<1x4x4x2xi32>
// CHECK-NEXT: %[[Q0:.*]] = "tosa.const"() <{values = dense<16384> : tensor<1x1x1x1xi32>}>
// CHECK-NEXT: %[[P0:.*]] = "tosa.mul"(%[[C32]], %[[Q0]], %[[ZP]])
// CHECK-NEXT: %[[Q1:.*]] = "tosa.const"() <{values = dense<4096> : tensor<1x1x1x1xi32>}>
// CHECK-NEXT: %[[P1:.*]] = "tosa.mul"(%[[Y32]], %[[Q1]], %[[ZP]])
// CHECK-NEXT: %[[SUM:.*]] = "tosa.add"(%[[P0]], %[[P1]]) : {{.*}} -> tensor<1x4x4x2xi32>
// CHECK-NEXT: %[[ONE:.*]] = "tosa.const"() <{values = dense<1> : tensor<1xi32>}>
// CHECK-NEXT: %[[S15:.*]] = "tosa.const"() <{values = dense<15> : tensor<1xi8>}>
// CHECK-NEXT: %[[A:.*]] = "tosa.rescale"(%[[SUM]], %[[ONE]], %[[S15]], %[[ZP32]], %[[ZP]]) <{{.*}}per_channel = false{{.*}}> : {{.*}} -> tensor<1x4x4x2xi8>

// Dequantize: cast and multiply by the scale; the interface is NCHW again.
// CHECK-NEXT: %[[AF:.*]] = "tosa.cast"(%[[A]]) : (tensor<1x4x4x2xi8>) -> tensor<1x4x4x2xf32>
// CHECK:      "tosa.mul"(%[[AF]],
// CHECK-NEXT: %[[OUT:.*]] = "tosa.transpose"
// CHECK-NEXT: func.return %[[OUT]]
