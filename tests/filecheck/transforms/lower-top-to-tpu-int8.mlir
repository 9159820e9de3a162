// RUN: python %S/Inputs/lower_int8_weights.py %t.npz && tpu-opt -p "lower-top-to-tpu{mode=INT8}" --weight-file %t.npz --weight-output %t.out.npz %s | filecheck %s
// RUN: python %S/Inputs/lower_int8_weights.py %t.npz && tpu-opt -p "lower-top-to-tpu{mode=INT8 asymmetric=true}" --weight-file %t.npz --weight-output %t.asym.npz %s | filecheck %s --check-prefix=ASYM
// RUN: python %S/Inputs/lower_int8_weights.py %t.npz && tpu-opt -p 'lower-top-to-tpu{mode=INT8 qtable="%S/Inputs/lower_int8_qtable"}' --weight-file %t.npz --weight-output %t.mix.npz %s | filecheck %s --check-prefix=MIXED
// RUN: python %S/Inputs/lower_int8_weights.py %t.npz && not tpu-opt -p "lower-top-to-tpu{mode=INT8}" --weight-file %t.npz %S/Inputs/uncalibrated.mlir 2>&1 | filecheck %s --check-prefix=NOCAL

// INT8 lowering of a calibrated module (as import-calibration leaves it).
// Thresholds are powers of two, so activation scales are too (S = T / 128,
// T / 256 for a tensor that is never negative): x, a, p, cat 2^-5; c, g, r 2^-6;
// mm 2^-7; the sigmoid output y is uint8 with 2^-8.
builtin.module attributes {module.name = "int8", module.state = "TOP_CALIBRATED"} {
  func.func @main(%arg0: tensor<1x2x4x4xf32>) -> (tensor<1x3xf32, #top.calibrated<1.0 : f64, -1.0 : f64, 1.0 : f64>>, tensor<1x4x4x4xf32, #top.calibrated<1.0 : f64, 0.0 : f64, 1.0 : f64>>) {
    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32, #top.calibrated<4.0 : f64, -4.0 : f64, 3.9 : f64>>
    %w = "top.weight"() {names = ["w"]} : () -> tensor<2x2x1x1xf32>
    %b = "top.weight"() {names = ["b"]} : () -> tensor<2xf32>
    %wm = "top.weight"() {names = ["wm"]} : () -> tensor<2x3xf32>
    %none = "top.none"() : () -> none
    %c = "top.conv"(%x, %w, %b) {kernel_shape = [1, 1], names = ["c"]} : (tensor<1x2x4x4xf32, #top.calibrated<4.0 : f64, -4.0 : f64, 3.9 : f64>>, tensor<2x2x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32, #top.calibrated<2.0 : f64, -1.0 : f64, 2.5 : f64>>
    %y = "top.sigmoid"(%c) {names = ["y"]} : (tensor<1x2x4x4xf32, #top.calibrated<2.0 : f64, -1.0 : f64, 2.5 : f64>>) -> tensor<1x2x4x4xf32, #top.calibrated<1.0 : f64, 0.0 : f64, 1.0 : f64>>
    %a = "top.add"(%c, %y) {names = ["a"]} : (tensor<1x2x4x4xf32, #top.calibrated<2.0 : f64, -1.0 : f64, 2.5 : f64>>, tensor<1x2x4x4xf32, #top.calibrated<1.0 : f64, 0.0 : f64, 1.0 : f64>>) -> tensor<1x2x4x4xf32, #top.calibrated<4.0 : f64, -1.0 : f64, 3.5 : f64>>
    %p = "top.max_pool"(%a) {kernel_shape = [2, 2], strides = [2, 2], names = ["p"]} : (tensor<1x2x4x4xf32, #top.calibrated<4.0 : f64, -1.0 : f64, 3.5 : f64>>) -> tensor<1x2x2x2xf32, #top.calibrated<4.0 : f64, -1.0 : f64, 3.5 : f64>>
    %g = "top.avg_pool"(%p) {kernel_shape = [2, 2], names = ["g"]} : (tensor<1x2x2x2xf32, #top.calibrated<4.0 : f64, -1.0 : f64, 3.5 : f64>>) -> tensor<1x2x1x1xf32, #top.calibrated<2.0 : f64, -1.0 : f64, 1.5 : f64>>
    %r = "top.reshape"(%g) {names = ["r"]} : (tensor<1x2x1x1xf32, #top.calibrated<2.0 : f64, -1.0 : f64, 1.5 : f64>>) -> tensor<1x2xf32, #top.calibrated<2.0 : f64, -1.0 : f64, 1.5 : f64>>
    %mm = "top.matmul"(%r, %wm, %none) {names = ["mm"]} : (tensor<1x2xf32, #top.calibrated<2.0 : f64, -1.0 : f64, 1.5 : f64>>, tensor<2x3xf32>, none) -> tensor<1x3xf32, #top.calibrated<1.0 : f64, -1.0 : f64, 1.0 : f64>>
    %cat = "top.concat"(%c, %a) {axis = 1, names = ["cat"]} : (tensor<1x2x4x4xf32, #top.calibrated<2.0 : f64, -1.0 : f64, 2.5 : f64>>, tensor<1x2x4x4xf32, #top.calibrated<4.0 : f64, -1.0 : f64, 3.5 : f64>>) -> tensor<1x4x4x4xf32, #top.calibrated<4.0 : f64, -1.0 : f64, 3.5 : f64>>
    %sm = "top.softmax"(%cat) {axis = 1, names = ["sm"]} : (tensor<1x4x4x4xf32, #top.calibrated<4.0 : f64, -1.0 : f64, 3.5 : f64>>) -> tensor<1x4x4x4xf32, #top.calibrated<1.0 : f64, 0.0 : f64, 1.0 : f64>>
    func.return %mm, %sm : tensor<1x3xf32, #top.calibrated<1.0 : f64, -1.0 : f64, 1.0 : f64>>, tensor<1x4x4x4xf32, #top.calibrated<1.0 : f64, 0.0 : f64, 1.0 : f64>>
  }
}

// Conv: filter per output channel, w0 = [1, -0.5] with scale 1/127 -> [127, -64]
// (half away from zero), w1 = [0.25, 0.125] with 0.25/127 -> [127, 64]; bias in
// units of 2^-5 * scale_w: [0.5 * 127 * 2^5, -0.25 * 127 * 2^7] = [2032, -4064].
// Rescale 2^-5 * scale_w / 2^-6 = [2/127, 0.5/127]: multiplier round(2^37 / 127)
// = 1082196484 with right shifts 36 and 38.
// CHECK:      module.state = "TPU_LOWERED", module.chip = "bm1684x", module.mode = "INT8"
// CHECK:      %[[X:.*]] = "top.input"(%arg0) {{.*}} -> tensor<1x2x4x4xf32, #top.calibrated
// CHECK-NEXT: %[[XQ:.*]] = "tpu.cast"(%[[X]]) {names = ["x_int8"], scale = 3.125000e-02 : f64} : ({{.*}}) -> tensor<1x2x4x4xi8, #tpu.uniform<3.125000e-02 : f64, 0 : i64>>
// CHECK-DAG:  %[[W:.*]] = "top.weight"() {names = ["c_filter_int8"]} : () -> tensor<2x2x1x1xi8>
// CHECK-DAG:  %[[B:.*]] = "top.weight"() {names = ["c_bias_int32"]} : () -> tensor<2xi32>
// CHECK:      %[[C:.*]] = "tpu.conv"(%[[XQ]], %[[W]], %[[B]]) {kernel_shape = [1 : i64, 1 : i64], names = ["c"], multiplier = [1082196484 : i64, 1082196484 : i64], rshift = [36 : i64, 38 : i64], round_mode = "half_away_from_zero", quant_mode = "multiplier_shift"} : ({{.*}}) -> tensor<1x2x4x4xi8, #tpu.uniform<1.562500e-02 : f64, 0 : i64>>

// Sigmoid: a 256-entry table of uint8 codes.
// CHECK:      %[[T:.*]] = "top.weight"() {names = ["y_lut"]} : () -> tensor<256xui8>
// CHECK-NEXT: %[[Y:.*]] = "tpu.lut"(%[[C]], %[[T]]) {names = ["y"]} : ({{.*}}) -> tensor<1x2x4x4xui8, #tpu.uniform<3.906250e-03 : f64, 0 : i64>>

// Add: inputs rescaled to 2^-5 over one shift: 2^-6 / 2^-5 = 0.5 = 2^30 / 2^31 and
// 2^-8 / 2^-5 = 2^28 / 2^31.
// CHECK-NEXT: %[[A:.*]] = "tpu.add"(%[[C]], %[[Y]]) {names = ["a"], multiplier = [1073741824 : i64, 268435456 : i64], rshift = [31 : i64], round_mode = "half_away_from_zero", quant_mode = "multiplier_shift"} : ({{.*}}) -> tensor<1x2x4x4xi8, #tpu.uniform<3.125000e-02 : f64, 0 : i64>>

// Max pool keeps its input's scale; average pool multiplies the sum of 4 by
// 2^-5 / (2^-6 * 4) = 0.5; reshape keeps the scale.
// CHECK-NEXT: %[[P:.*]] = "tpu.max_pool"(%[[A]]) {kernel_shape = [2 : i64, 2 : i64], strides = [2 : i64, 2 : i64], names = ["p"]} : ({{.*}}) -> tensor<1x2x2x2xi8, #tpu.uniform<3.125000e-02 : f64, 0 : i64>>
// CHECK-NEXT: %[[G:.*]] = "tpu.avg_pool"(%[[P]]) {kernel_shape = [2 : i64, 2 : i64], names = ["g"], multiplier = [1073741824 : i64], rshift = [31 : i64], round_mode = "half_away_from_zero", quant_mode = "multiplier_shift"} : ({{.*}}) -> tensor<1x2x1x1xi8, #tpu.uniform<1.562500e-02 : f64, 0 : i64>>
// CHECK-NEXT: %[[R:.*]] = "tpu.reshape"(%[[G]]) {names = ["r"]} : ({{.*}}) -> tensor<1x2xi8, #tpu.uniform<1.562500e-02 : f64, 0 : i64>>

// MatMul: per output column, maxima [1, 0.25, 0.5]; rescale 2^-6 * max / 127 / 2^-7
// = [2/127, 0.5/127, 1/127].
// CHECK-NEXT: %[[WM:.*]] = "top.weight"() {names = ["mm_filter_int8"]} : () -> tensor<2x3xi8>
// CHECK-NEXT: %[[MM:.*]] = "tpu.matmul"(%[[R]], %[[WM]], %{{.*}}) {names = ["mm_int8"], multiplier = [1082196484 : i64, 1082196484 : i64, 1082196484 : i64], rshift = [36 : i64, 38 : i64, 37 : i64], round_mode = "half_away_from_zero", quant_mode = "multiplier_shift"} : ({{.*}}) -> tensor<1x3xi8, #tpu.uniform<7.812500e-03 : f64, 0 : i64>>

// Concat: each input to 2^-5: c by 0.5 = 2^30 / 2^31, a by 1 = 2^30 / 2^30.
// CHECK-NEXT: %[[CAT:.*]] = "tpu.concat"(%[[C]], %[[A]]) {axis = 1 : i64, names = ["cat"], multiplier = [1073741824 : i64, 1073741824 : i64], rshift = [31 : i64, 30 : i64], round_mode = "half_away_from_zero", quant_mode = "multiplier_shift"} : ({{.*}}) -> tensor<1x4x4x4xi8, #tpu.uniform<3.125000e-02 : f64, 0 : i64>>

// Softmax has no INT8 kernel: it runs in F32 between casts (keeping its calibrated
// range), and the INT8 output is dequantized by a cast that takes its name (the
// INT8 matmul's value is mm_int8).
// CHECK-NEXT: %[[CATF:.*]] = "tpu.cast"(%[[CAT]]) {names = ["cat_float32"], scale = 3.125000e-02 : f64} : ({{.*}}) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: %[[SM:.*]] = "tpu.softmax"(%[[CATF]]) {axis = 1 : i64, names = ["sm"]} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32, #top.calibrated
// CHECK-NEXT: %[[MMF:.*]] = "tpu.cast"(%[[MM]]) {names = ["mm"], scale = 7.812500e-03 : f64} : ({{.*}}) -> tensor<1x3xf32>
// CHECK-NEXT: func.return %[[MMF]], %[[SM]]

// Asymmetric: uint8 with zero points; x covers [-4, 3.9]: scale 7.9/255, zero point
// round(4 / (7.9/255)) = 129.
// ASYM:      "tpu.cast"(%{{.*}}) {names = ["x_uint8"], scale = {{.*}} : f64, zero_point = 129 : i64} : ({{.*}}) -> tensor<1x2x4x4xui8, #tpu.uniform<{{.*}} : f64, 129 : i64>>
// ASYM:      "tpu.conv"({{.*}}input_zero_points = [129 : i64], output_zero_point = {{[0-9]+}} : i64{{.*}} -> tensor<1x2x4x4xui8, #tpu.uniform<{{.*}}>>

// Mixed precision: the quantize table runs c in F16, the sigmoid quantizes c's result.
// MIXED:      %[[XH:.*]] = "tpu.cast"(%{{.*}}) {names = ["x_float16"]} : ({{.*}}) -> tensor<1x2x4x4xf16, #top.calibrated
// MIXED:      %[[C:.*]] = "tpu.conv"(%[[XH]], %{{.*}}, %{{.*}}) {kernel_shape = [1 : i64, 1 : i64], names = ["c"]} : ({{.*}}) -> tensor<1x2x4x4xf16, #top.calibrated
// MIXED-NEXT: %[[CQ:.*]] = "tpu.cast"(%[[C]]) {names = ["c_int8"], scale = 1.562500e-02 : f64} : ({{.*}}) -> tensor<1x2x4x4xi8
// MIXED:      "tpu.lut"(%[[CQ]], %{{.*}})

// NOCAL: tpu-opt: error: INT8 needs calibrated tensor ranges and the module has none
