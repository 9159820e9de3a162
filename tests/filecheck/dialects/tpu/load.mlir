// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// tpu.load brings a BF16 activation and its per-channel scale into local
// memory, in two slices of the batch.

func.func @main(%arg0: tensor<4x3x8x8xbf16>) -> tensor<4x3x8x8xbf16> {
  %scale = "top.weight"() {names = ["scale"]} : () -> tensor<3xbf16>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<3xbf16>
  %y = "tpu.group"() ({
    %x = "tpu.load"(%arg0) {ginfo = #tpu.lg_info<0, 256, 0, 0, true, [0, 2], [2, 2], [0], [8]>, names = ["x"]} : (tensor<4x3x8x8xbf16>) -> tensor<4x3x8x8xbf16>
    %s = "tpu.load"(%scale) {ginfo = #tpu.lg_info<1024, 2, 0, 0, false, [0], [1], [0], [1]>, names = ["scale"]} : (tensor<3xbf16>) -> tensor<3xbf16>
    %c = "tpu.load"(%b) {ginfo = #tpu.lg_info<1088, 2, 0, 0, false, [0], [1], [0], [1]>, names = ["b"]} : (tensor<3xbf16>) -> tensor<3xbf16>
    %z = "tpu.scale"(%x, %s, %c) {ginfo = #tpu.lg_info<2048, 256, 0, 0, true, [0, 2], [2, 2], [0], [8]>, names = ["y"]} : (tensor<4x3x8x8xbf16>, tensor<3xbf16>, tensor<3xbf16>) -> tensor<4x3x8x8xbf16>
    %z_s = "tpu.store"(%z) {ginfo = #tpu.lg_info<0, 0, 0, 0, true, [0, 2], [2, 2], [0], [8]>, names = ["y"]} : (tensor<4x3x8x8xbf16>) -> tensor<4x3x8x8xbf16>
    "tpu.yield"(%z_s) : (tensor<4x3x8x8xbf16>) -> ()
  }) {n_slices = 2, h_slices = 1, names = ["y"]} : () -> tensor<4x3x8x8xbf16>
  func.return %y : tensor<4x3x8x8xbf16>
}

// CHECK:      %[[SCALE:.*]] = "top.weight"() {names = ["scale"]} : () -> tensor<3xbf16>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<3xbf16>
// CHECK-NEXT: "tpu.group"() ({
// CHECK-NEXT:   %[[X:.*]] = "tpu.load"(%arg0) {ginfo = #tpu.lg_info<0 : i64, 256 : i64, 0 : i64, 0 : i64, true, [0 : i64, 2 : i64], [2 : i64, 2 : i64], [0 : i64], [8 : i64]>, names = ["x"]} : (tensor<4x3x8x8xbf16>) -> tensor<4x3x8x8xbf16>
// CHECK-NEXT:   %[[S:.*]] = "tpu.load"(%[[SCALE]]) {ginfo = #tpu.lg_info<1024 : i64, 2 : i64, 0 : i64, 0 : i64, false, [0 : i64], [1 : i64], [0 : i64], [1 : i64]>, names = ["scale"]} : (tensor<3xbf16>) -> tensor<3xbf16>
// CHECK-NEXT:   %[[C:.*]] = "tpu.load"(%[[B]]) {ginfo = #tpu.lg_info<1088 : i64, 2 : i64, 0 : i64, 0 : i64, false, [0 : i64], [1 : i64], [0 : i64], [1 : i64]>, names = ["b"]} : (tensor<3xbf16>) -> tensor<3xbf16>
// CHECK-NEXT:   "tpu.scale"(%[[X]], %[[S]], %[[C]])
