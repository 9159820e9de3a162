// RUN: python %S/Inputs/lower_channels_weights.py %t.npz && tpu-opt -p "lower-top-to-tpu{mode=INT8}" --weight-file %t.npz --weight-output %t.out.npz %s | filecheck %s
// RUN: python %S/Inputs/lower_channels_weights.py %t.npz && tpu-opt -p "lower-top-to-tpu{mode=INT8 per_tensor_activations=true}" --weight-file %t.npz --weight-output %t.pt.npz %s | filecheck %s --check-prefix=TENSOR

// Per-channel activation scales (the default for symmetric INT8): tensors with
// per-channel ranges (weight entries [2, C]: min row, max row) get one scale
// per channel of the axis the type names, S_c = T_c / 128 (T_c / 256 when never
// negative), kept in the weight file; consumers fold them in. Every number is a power of two.
builtin.module attributes {module.name = "channels", module.state = "TOP_CALIBRATED"} {
  func.func @main(%arg0: tensor<1x2x2x2xf32>) -> (tensor<1x1x2x2xf32, #top.calibrated<1.0 : f64, -1.0 : f64, 1.0 : f64>>, tensor<1x2x2x2xf32, #top.calibrated<0.5 : f64, 0.0 : f64, 0.5 : f64>>) {
    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32, #top.calibrated<4.0 : f64, -4.0 : f64, 3.9 : f64>>
    %w = "top.weight"() {names = ["w"]} : () -> tensor<2x2x1x1xf32>
    %wd = "top.weight"() {names = ["wd"]} : () -> tensor<1x2x1x1xf32>
    %none = "top.none"() : () -> none
    %c = "top.conv"(%x, %w, %none) {kernel_shape = [1, 1], names = ["c"]} : (tensor<1x2x2x2xf32, #top.calibrated<4.0 : f64, -4.0 : f64, 3.9 : f64>>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x2x2xf32, #top.channel_calibrated<2.0 : f64, -2.0 : f64, 1.0 : f64, "c_ranges", 1 : i64>>
    %y = "top.sigmoid"(%c) {names = ["y"]} : (tensor<1x2x2x2xf32, #top.channel_calibrated<2.0 : f64, -2.0 : f64, 1.0 : f64, "c_ranges", 1 : i64>>) -> tensor<1x2x2x2xf32, #top.channel_calibrated<0.5 : f64, 0.0 : f64, 0.5 : f64, "y_ranges", 1 : i64>>
    %d = "top.conv"(%y, %wd, %none) {kernel_shape = [1, 1], names = ["d"]} : (tensor<1x2x2x2xf32, #top.channel_calibrated<0.5 : f64, 0.0 : f64, 0.5 : f64, "y_ranges", 1 : i64>>, tensor<1x2x1x1xf32>, none) -> tensor<1x1x2x2xf32, #top.calibrated<1.0 : f64, -1.0 : f64, 1.0 : f64>>
    %p = "top.permute"(%y) {order = [0, 2, 1, 3], names = ["p"]} : (tensor<1x2x2x2xf32, #top.channel_calibrated<0.5 : f64, 0.0 : f64, 0.5 : f64, "y_ranges", 1 : i64>>) -> tensor<1x2x2x2xf32, #top.calibrated<0.5 : f64, 0.0 : f64, 0.5 : f64>>
    func.return %d, %p : tensor<1x1x2x2xf32, #top.calibrated<1.0 : f64, -1.0 : f64, 1.0 : f64>>, tensor<1x2x2x2xf32, #top.calibrated<0.5 : f64, 0.0 : f64, 0.5 : f64>>
  }
}

// The input (a float value) is quantized per tensor: 2^-5.
// CHECK:      module.quantization = "symmetric, per-channel activations"
// CHECK:      %[[XQ:.*]] = "tpu.cast"(%x) {names = ["x_int8"], scale = 3.125000e-02 : f64}

// c: ranges [-2, 1] and [-0.5, 0.25] give S = [2^-6, 2^-8] in int8. The filter
// times the input scale, w' = [[2^-5, 0], [0, 2^-6]], quantizes per output
// channel to [[127, 0], [0, 127]]; rescale (2^-5 / 127) / 2^-6 = 2/127 and
// (2^-6 / 127) / 2^-8 = 4/127: multiplier round(2^37 / 127), shifts 36 and 35.
// CHECK:      %[[C:.*]] = "tpu.conv"(%[[XQ]], %{{.*}}, %{{.*}}) {kernel_shape = [1 : i64, 1 : i64], names = ["c"], multiplier = [1082196484 : i64, 1082196484 : i64], rshift = [36 : i64, 35 : i64], round_mode = "half_away_from_zero", quant_mode = "multiplier_shift"} : ({{.*}}) -> tensor<1x2x2x2xi8, #tpu.channel_uniform<"c_scales", 1 : i64>>

// The sigmoid has a table per channel: [2, 256] uint8 codes (S = [2^-9, 2^-10]).
// CHECK-NEXT: %[[T:.*]] = "top.weight"() {names = ["y_lut"]} : () -> tensor<2x256xui8>
// CHECK-NEXT: %[[Y:.*]] = "tpu.lut"(%[[C]], %[[T]]) {names = ["y"]} : ({{.*}}) -> tensor<1x2x2x2xui8, #tpu.channel_uniform<"y_scales", 1 : i64>>

// The permute moves the channel axis to axis 2 (neither 1 nor the last, where
// channels could keep their scales), so it reads y per tensor: a requant by
// S_c / 2^-9 = [1, 0.5] per channel (2^30 / 2^30, 2^30 / 2^31).
// CHECK-NEXT: %[[YT:.*]] = "tpu.requant"(%[[Y]]) {names = ["y_per_tensor"], multiplier = [1073741824 : i64, 1073741824 : i64], rshift = [30 : i64, 31 : i64], axis = 1 : i64, round_mode = "half_away_from_zero"} : ({{.*}}) -> tensor<1x2x2x2xui8, #tpu.uniform<0.001953125 : f64, 0 : i64>>

// d folds y's scales: w' = [2^-9, 2^-10] -> [127, 64]; rescale (2^-9 / 127) / 2^-7 =
// 0.25/127: shift 39. d and p are outputs: their INT8 values are d_int8 and p_uint8,
// the f32 casts d and p.
// CHECK:      %[[D:.*]] = "tpu.conv"(%[[Y]], %{{.*}}, %{{.*}}) {kernel_shape = [1 : i64, 1 : i64], names = ["d_int8"], multiplier = [1082196484 : i64], rshift = [39 : i64], round_mode = "half_away_from_zero", quant_mode = "multiplier_shift"} : ({{.*}}) -> tensor<1x1x2x2xi8, #tpu.uniform<7.812500e-03 : f64, 0 : i64>>
// CHECK-NEXT: %[[P:.*]] = "tpu.permute"(%[[YT]]) {order = [0 : i64, 2 : i64, 1 : i64, 3 : i64], names = ["p_uint8"]} : ({{.*}}) -> tensor<1x2x2x2xui8, #tpu.uniform<0.001953125 : f64, 0 : i64>>

// TENSOR:     module.quantization = "symmetric"
// TENSOR-NOT: channel_uniform
// TENSOR:     "tpu.conv"({{.*}}names = ["c"]{{.*}} -> tensor<1x2x2x2xi8, #tpu.uniform<1.562500e-02 : f64, 0 : i64>>
// TENSOR-NOT: channel_uniform
