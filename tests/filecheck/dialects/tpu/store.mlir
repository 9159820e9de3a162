// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// tpu.store writes each INT8 slice of the group's output back to global memory.

func.func @main(%arg0: tensor<1x16x32x32xi8>) -> tensor<1x16x16x16xi8> {
  %y = "tpu.group"() ({
    %x = "tpu.load"(%arg0) {ginfo = #tpu.lg_info<0, 512, 0, 0, true, [0], [1], [0, 16], [16, 16]>} : (tensor<1x16x32x32xi8>) -> tensor<1x16x32x32xi8>
    %p = "tpu.max_pool"(%x) {kernel_shape = [2, 2], strides = [2, 2], ginfo = #tpu.lg_info<512, 128, 0, 0, true, [0], [1], [0, 8], [8, 8]>, names = ["y"]} : (tensor<1x16x32x32xi8>) -> tensor<1x16x16x16xi8>
    %p_s = "tpu.store"(%p) {ginfo = #tpu.lg_info<0, 0, 0, 0, true, [0], [1], [0, 8], [8, 8]>, names = ["y"]} : (tensor<1x16x16x16xi8>) -> tensor<1x16x16x16xi8>
    "tpu.yield"(%p_s) : (tensor<1x16x16x16xi8>) -> ()
  }) {n_slices = 1, h_slices = 2, names = ["y"]} : () -> tensor<1x16x16x16xi8>
  func.return %y : tensor<1x16x16x16xi8>
}

// CHECK:      %[[P:.*]] = "tpu.max_pool"
// CHECK-NEXT: %[[PS:.*]] = "tpu.store"(%[[P]]) {ginfo = #tpu.lg_info<0 : i64, 0 : i64, 0 : i64, 0 : i64, true, [0 : i64], [1 : i64], [0 : i64, 8 : i64], [8 : i64, 8 : i64]>, names = ["y"]} : (tensor<1x16x16x16xi8>) -> tensor<1x16x16x16xi8>
// CHECK-NEXT: "tpu.yield"(%[[PS]]) : (tensor<1x16x16x16xi8>) -> ()
