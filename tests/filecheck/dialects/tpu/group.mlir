// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// A layer group running an INT8 conv in two slices of the height: each slice
// loads 9 input rows (8 output rows and the 3x3 halo), computes 8 output rows
// in local memory and stores them.

func.func @main(%arg0: tensor<1x3x16x16xi8>) -> tensor<1x4x16x16xi8> {
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xi8>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<4xi32>
  %y = "tpu.group"() ({
    %x_l = "tpu.load"(%arg0) {ginfo = #tpu.lg_info<0, 144, 0, 0, true, [0], [1], [0, 7], [9, 9]>, names = ["x"]} : (tensor<1x3x16x16xi8>) -> tensor<1x3x16x16xi8>
    %w_l = "tpu.load"(%w) {ginfo = #tpu.lg_info<8192, 108, 0, 0, false, [0], [1], [0], [3]>, names = ["w"]} : (tensor<4x3x3x3xi8>) -> tensor<4x3x3x3xi8>
    %b_l = "tpu.load"(%b) {ginfo = #tpu.lg_info<8320, 16, 0, 0, false, [0], [1], [0], [1]>, names = ["b"]} : (tensor<4xi32>) -> tensor<4xi32>
    %c = "tpu.conv"(%x_l, %w_l, %b_l) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], multiplier = [19290, 21127, 17500, 30000], rshift = [18, 18, 17, 19], quant_mode = "multiplier_shift", ginfo = #tpu.lg_info<4096, 128, 12288, 512, true, [0], [1], [0, 8], [8, 8]>, names = ["y"]} : (tensor<1x3x16x16xi8>, tensor<4x3x3x3xi8>, tensor<4xi32>) -> tensor<1x4x16x16xi8>
    %c_s = "tpu.store"(%c) {ginfo = #tpu.lg_info<0, 0, 0, 0, true, [0], [1], [0, 8], [8, 8]>, names = ["y"]} : (tensor<1x4x16x16xi8>) -> tensor<1x4x16x16xi8>
    "tpu.yield"(%c_s) : (tensor<1x4x16x16xi8>) -> ()
  }) {n_slices = 1, h_slices = 2, group_type = "normal", flow = [0, 1, 2, 3, 4], names = ["y"]} : () -> tensor<1x4x16x16xi8>
  func.return %y : tensor<1x4x16x16xi8>
}

// CHECK:      %[[W:.*]] = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xi8>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<4xi32>
// CHECK-NEXT: %[[Y:.*]] = "tpu.group"() ({
// CHECK-NEXT:   %[[XL:.*]] = "tpu.load"(%arg0) {ginfo = #tpu.lg_info<0 : i64, 144 : i64, 0 : i64, 0 : i64, true, [0 : i64], [1 : i64], [0 : i64, 7 : i64], [9 : i64, 9 : i64]>, names = ["x"]} : (tensor<1x3x16x16xi8>) -> tensor<1x3x16x16xi8>
// CHECK-NEXT:   %[[WL:.*]] = "tpu.load"(%[[W]]) {ginfo = #tpu.lg_info<8192 : i64, 108 : i64, 0 : i64, 0 : i64, false, [0 : i64], [1 : i64], [0 : i64], [3 : i64]>, names = ["w"]} : (tensor<4x3x3x3xi8>) -> tensor<4x3x3x3xi8>
// CHECK-NEXT:   %[[BL:.*]] = "tpu.load"(%[[B]]) {ginfo = #tpu.lg_info<8320 : i64, 16 : i64, 0 : i64, 0 : i64, false, [0 : i64], [1 : i64], [0 : i64], [1 : i64]>, names = ["b"]} : (tensor<4xi32>) -> tensor<4xi32>
// CHECK-NEXT:   %[[C:.*]] = "tpu.conv"(%[[XL]], %[[WL]], %[[BL]]) {kernel_shape = [3 : i64, 3 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], multiplier = [19290 : i64, 21127 : i64, 17500 : i64, 30000 : i64], rshift = [18 : i64, 18 : i64, 17 : i64, 19 : i64], quant_mode = "multiplier_shift", ginfo = #tpu.lg_info<4096 : i64, 128 : i64, 12288 : i64, 512 : i64, true, [0 : i64], [1 : i64], [0 : i64, 8 : i64], [8 : i64, 8 : i64]>, names = ["y"]} : (tensor<1x3x16x16xi8>, tensor<4x3x3x3xi8>, tensor<4xi32>) -> tensor<1x4x16x16xi8>
// CHECK-NEXT:   %[[CS:.*]] = "tpu.store"(%[[C]]) {ginfo = #tpu.lg_info<0 : i64, 0 : i64, 0 : i64, 0 : i64, true, [0 : i64], [1 : i64], [0 : i64, 8 : i64], [8 : i64, 8 : i64]>, names = ["y"]} : (tensor<1x4x16x16xi8>) -> tensor<1x4x16x16xi8>
// CHECK-NEXT:   "tpu.yield"(%[[CS]]) : (tensor<1x4x16x16xi8>) -> ()
// CHECK-NEXT: }) {n_slices = 1 : i64, h_slices = 2 : i64, group_type = "normal", flow = [0 : i64, 1 : i64, 2 : i64, 3 : i64, 4 : i64], names = ["y"]} : () -> tensor<1x4x16x16xi8>
// CHECK-NEXT: func.return %[[Y]] : tensor<1x4x16x16xi8>
