// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// tpu.yield ends a group's body and gives the group its results, here two.

func.func @main(%arg0: tensor<1x8x4x4xf16>) -> (tensor<1x8x4x4xf16>, tensor<1x8x4x4xf16>) {
  %a, %b = "tpu.group"() ({
    %x = "tpu.load"(%arg0) {ginfo = #tpu.lg_info<0, 256, 0, 0, true, [0], [1], [0], [4]>} : (tensor<1x8x4x4xf16>) -> tensor<1x8x4x4xf16>
    %r = "tpu.relu"(%x) {ginfo = #tpu.lg_info<256, 256, 0, 0, true, [0], [1], [0], [4]>, names = ["r"]} : (tensor<1x8x4x4xf16>) -> tensor<1x8x4x4xf16>
    %s = "tpu.sigmoid"(%x) {ginfo = #tpu.lg_info<512, 256, 0, 0, true, [0], [1], [0], [4]>, names = ["s"]} : (tensor<1x8x4x4xf16>) -> tensor<1x8x4x4xf16>
    %r_s = "tpu.store"(%r) {ginfo = #tpu.lg_info<0, 0, 0, 0, true, [0], [1], [0], [4]>, names = ["r"]} : (tensor<1x8x4x4xf16>) -> tensor<1x8x4x4xf16>
    %s_s = "tpu.store"(%s) {ginfo = #tpu.lg_info<0, 0, 0, 0, true, [0], [1], [0], [4]>, names = ["s"]} : (tensor<1x8x4x4xf16>) -> tensor<1x8x4x4xf16>
    "tpu.yield"(%r_s, %s_s) : (tensor<1x8x4x4xf16>, tensor<1x8x4x4xf16>) -> ()
  }) {n_slices = 1, h_slices = 1, names = ["r", "s"]} : () -> (tensor<1x8x4x4xf16>, tensor<1x8x4x4xf16>)
  func.return %a, %b : tensor<1x8x4x4xf16>, tensor<1x8x4x4xf16>
}

// CHECK:      %[[A:[^,]*]], %[[B:.*]] = "tpu.group"() ({
// CHECK:        %[[RS:.*]] = "tpu.store"
// CHECK-NEXT:   %[[SS:.*]] = "tpu.store"
// CHECK-NEXT:   "tpu.yield"(%[[RS]], %[[SS]]) : (tensor<1x8x4x4xf16>, tensor<1x8x4x4xf16>) -> ()
// CHECK-NEXT: }) {n_slices = 1 : i64, h_slices = 1 : i64, names = ["r", "s"]} : () -> (tensor<1x8x4x4xf16>, tensor<1x8x4x4xf16>)
// CHECK-NEXT: func.return %[[A]], %[[B]] : tensor<1x8x4x4xf16>, tensor<1x8x4x4xf16>
