// RUN: python %S/Inputs/lower_channels_last_weights.py %t.npz && tpu-opt -p "lower-top-to-tpu{mode=INT8}" --weight-file %t.npz --weight-output %t.out.npz %s | filecheck %s

// Per-channel activation scales of features-last tensors [N, L, C]: ranges along
// the last axis (the types name axis 2) give one scale per feature; the matmul
// requantizes per output column, the table and the add work along axis 2
// (`channel_axis`), and a permute carries the scales to where it moves the axis.
// Every number is a power of two.
builtin.module attributes {module.name = "channels_last", module.state = "TOP_CALIBRATED"} {
  func.func @main(%arg0: tensor<1x2x2xf32>) -> (tensor<1x2x2xf32, #top.channel_calibrated<2.0 : f64, -2.0 : f64, 2.0 : f64, "a_ranges", 2 : i64>>, tensor<1x2x2xf32, #top.calibrated<1.0 : f64, -1.0 : f64, 1.0 : f64>>) {
    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x2x2xf32>) -> tensor<1x2x2xf32, #top.calibrated<1.0 : f64, -1.0 : f64, 1.0 : f64>>
    %w = "top.weight"() {names = ["w"]} : () -> tensor<2x2xf32>
    %none = "top.none"() : () -> none
    %m = "top.matmul"(%x, %w, %none) {names = ["m"]} : (tensor<1x2x2xf32, #top.calibrated<1.0 : f64, -1.0 : f64, 1.0 : f64>>, tensor<2x2xf32>, none) -> tensor<1x2x2xf32, #top.channel_calibrated<1.0 : f64, -1.0 : f64, 1.0 : f64, "m_ranges", 2 : i64>>
    %s = "top.sigmoid"(%m) {names = ["s"]} : (tensor<1x2x2xf32, #top.channel_calibrated<1.0 : f64, -1.0 : f64, 1.0 : f64, "m_ranges", 2 : i64>>) -> tensor<1x2x2xf32, #top.channel_calibrated<1.0 : f64, 0.0 : f64, 1.0 : f64, "s_ranges", 2 : i64>>
    %a = "top.add"(%m, %s) {names = ["a"]} : (tensor<1x2x2xf32, #top.channel_calibrated<1.0 : f64, -1.0 : f64, 1.0 : f64, "m_ranges", 2 : i64>>, tensor<1x2x2xf32, #top.channel_calibrated<1.0 : f64, 0.0 : f64, 1.0 : f64, "s_ranges", 2 : i64>>) -> tensor<1x2x2xf32, #top.channel_calibrated<2.0 : f64, -2.0 : f64, 2.0 : f64, "a_ranges", 2 : i64>>
    %p = "top.permute"(%m) {order = [0, 2, 1], names = ["p"]} : (tensor<1x2x2xf32, #top.channel_calibrated<1.0 : f64, -1.0 : f64, 1.0 : f64, "m_ranges", 2 : i64>>) -> tensor<1x2x2xf32, #top.calibrated<1.0 : f64, -1.0 : f64, 1.0 : f64>>
    func.return %a, %p : tensor<1x2x2xf32, #top.channel_calibrated<2.0 : f64, -2.0 : f64, 2.0 : f64, "a_ranges", 2 : i64>>, tensor<1x2x2xf32, #top.calibrated<1.0 : f64, -1.0 : f64, 1.0 : f64>>
  }
}

// The input (a float value) is quantized per tensor: 2^-7.
// CHECK:      module.quantization = "symmetric, per-channel activations"
// CHECK:      %[[XQ:.*]] = "tpu.cast"(%x) {names = ["x_int8"], scale = 7.812500e-03 : f64}

// m: feature ranges [-1, 1] and [-0.25, 0.25] give S = [2^-7, 2^-9] along axis 2.
// The input scale folded into the weight, w' = [[2^-7, 0], [0, 2^-9]], quantizes
// per output column to [[127, 0], [0, 127]]; rescale (2^-7 / 127) / 2^-7 =
// (2^-9 / 127) / 2^-9 = 1/127: multiplier round(2^37 / 127), shift 37.
// CHECK:      %[[M:.*]] = "tpu.matmul"(%[[XQ]], %{{.*}}, %{{.*}}) {names = ["m"], multiplier = [1082196484 : i64, 1082196484 : i64], rshift = [37 : i64, 37 : i64], {{.*}}} : ({{.*}}) -> tensor<1x2x2xi8, #tpu.channel_uniform<"m_scales", 2 : i64>>

// The sigmoid has a table per feature, indexed along axis 2: uint8, S = [2^-8, 2^-9].
// CHECK-NEXT: %[[T:.*]] = "top.weight"() {names = ["s_lut"]} : () -> tensor<2x256xui8>
// CHECK-NEXT: %[[S:.*]] = "tpu.lut"(%[[M]], %[[T]]) {names = ["s"], channel_axis = 2 : i64} : ({{.*}}) -> tensor<1x2x2xui8, #tpu.channel_uniform<"s_scales", 2 : i64>>

// a: S = [2^-6, 2^-8]. Rescale m by [2^-7 / 2^-6, 2^-9 / 2^-8] = [0.5, 0.5] and s by
// [2^-8 / 2^-6, 2^-9 / 2^-8] = [0.25, 0.5] over one shift 31: [2^30, 2^30] then [2^29, 2^30].
// CHECK-NEXT: %[[A:.*]] = "tpu.add"(%[[M]], %[[S]]) {names = ["a_int8"], multiplier = [1073741824 : i64, 1073741824 : i64, 536870912 : i64, 1073741824 : i64], rshift = [31 : i64], round_mode = "half_away_from_zero", quant_mode = "multiplier_shift", channel_axis = 2 : i64} : ({{.*}}) -> tensor<1x2x2xi8, #tpu.channel_uniform<"a_scales", 2 : i64>>

// The permute moves the features from axis 2 to axis 1: the codes keep m's scales, now along axis 1.
// CHECK-NEXT: %[[P:.*]] = "tpu.permute"(%[[M]]) {order = [0 : i64, 2 : i64, 1 : i64], names = ["p_int8"]} : ({{.*}}) -> tensor<1x2x2xi8, #tpu.channel_uniform<"m_scales", 1 : i64>>

// The outputs' casts back to f32 read the scales along each one's axis.
// CHECK:      "tpu.cast"(%[[A]], %{{.*}}) {names = ["a"], channel_axis = 2 : i64} : ({{.*}}) -> tensor<1x2x2xf32>
// CHECK:      "tpu.cast"(%[[P]], %{{.*}}) {names = ["p"]} : ({{.*}}) -> tensor<1x2x2xf32>
