// RUN: python %S/Inputs/lower_weights.py %t.npz && tpu-opt -p "lower-top-to-tpu{mode=F16 chip=bm1684x}" --weight-file %t.npz --weight-output %t.out.npz %s | filecheck %s
// RUN: python %S/Inputs/lower_weights.py %t.npz && tpu-opt -p "lower-top-to-tpu{mode=BF16 chip=cv183x}" --weight-file %t.npz --weight-output %t.bf.npz %s | filecheck %s --check-prefix=BF16
// RUN: python %S/Inputs/lower_weights.py %t.npz && tpu-opt -p "lower-top-to-tpu{mode=F32}" --weight-file %t.npz %s | filecheck %s --check-prefix=F32
// RUN: python %S/Inputs/lower_weights.py %t.npz && not tpu-opt -p "lower-top-to-tpu{mode=F16 chip=cv183x}" --weight-file %t.npz %s 2>&1 | filecheck %s --check-prefix=NOF16

builtin.module attributes {module.name = "lowering", module.state = "TOP_F32"} {
  func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
    %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
    %b = "top.weight"() {names = ["b"]} : () -> tensor<4xf32>
    %c = "top.conv"(%x, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], do_relu = true, names = ["conv"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
    %s = "top.sigmoid"(%c) {names = ["y"]} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
    func.return %s : tensor<1x4x8x8xf32>
  }
}

// The input is cast in, weights are converted (new entries), ops keep their
// tensor names, the output is cast back to f32 by a cast that takes the output's
// name (the F16 value gets a derived one); the f32 weights are gone but the conv's
// bias, which the chip adds to its f32 sum in f32.
// CHECK:      builtin.module attributes {module.name = "lowering", module.state = "TPU_LOWERED", module.chip = "bm1684x", module.mode = "F16", module.weight_file = "{{.*}}.out.npz"}
// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]}
// CHECK-NEXT: %[[XC:.*]] = "tpu.cast"(%[[X]]) {names = ["x_float16"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf16>
// CHECK-NOT:  names = ["w"]
// CHECK-DAG:  %[[W:.*]] = "top.weight"() {names = ["w_float16"]} : () -> tensor<4x3x3x3xf16>
// CHECK-DAG:  %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<4xf32>
// CHECK:      %[[C:.*]] = "tpu.conv"(%[[XC]], %[[W]], %[[B]]) {kernel_shape = [3 : i64, 3 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], do_relu = true, names = ["conv"]} : (tensor<1x3x8x8xf16>, tensor<4x3x3x3xf16>, tensor<4xf32>) -> tensor<1x4x8x8xf16>
// CHECK-NEXT: %[[S:.*]] = "tpu.sigmoid"(%[[C]]) {names = ["y_float16"]} : (tensor<1x4x8x8xf16>) -> tensor<1x4x8x8xf16>
// CHECK-NEXT: %[[O:.*]] = "tpu.cast"(%[[S]]) {names = ["y"]} : (tensor<1x4x8x8xf16>) -> tensor<1x4x8x8xf32>
// CHECK-NEXT: func.return %[[O]] : tensor<1x4x8x8xf32>

// BF16:      module.chip = "cv183x", module.mode = "BF16"
// BF16:      "tpu.conv"
// BF16-SAME: -> tensor<1x4x8x8xbf16>

// F32:       module.mode = "F32"
// F32-NOT:   "tpu.cast"
// F32:       "tpu.conv"({{.*}}) {{.*}} -> tensor<1x4x8x8xf32>
// F32-NOT:   "tpu.cast"

// NOF16: tpu-opt: error: chip cv183x has no F16 mode; it computes in BF16, INT8
