// RUN: tpu-opt --split-input-file -p tpu-layer-group %s 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=SUMMARY < %t.err
// RUN: tpu-opt --split-input-file -p 'tpu-layer-group{opt=1}' %s 2>/dev/null | filecheck %s --check-prefix=GREEDY
// RUN: tpu-opt --split-input-file -p tpu-layer-group %s 2>/dev/null | tpu-opt --split-input-file | filecheck %s
// RUN: sed 's/TPU_LOWERED/TOP_F32/' %s | not tpu-opt --split-input-file -p tpu-layer-group 2>&1 | filecheck %s --check-prefix=STATE
// RUN: not tpu-opt --split-input-file -p 'tpu-layer-group{opt=3}' %s 2>&1 | filecheck %s --check-prefix=OPT

// All three on cv183x in BF16: 32 lanes of 32 KiB (8 banks of 4 KiB), 16-byte
// execution units. A [1, 32, H, 64] bf16 tensor has one channel per lane: 128 bytes
// a row. A 32x32x3x3 bf16 filter is 32 x 288 x 2 = 576 bytes a lane. Dynamic
// programming (opt=2) groups all ops of each: grouping costs fewer cycles. Greedy
// (opt=1) groups the chain and the residual block the same way.

// A conv chain, conv3x3 -> conv3x3+relu, 128 rows: one step would need
// 3 x 16 KiB + weights; 2 steps 2 x (64 + 65 + 66 rows) x 128 B = 48.75 KiB; 3 steps
// (43 rows) 2 x (43 + 45 + 47) x 128 B + 1152 = 34,688 B: too much. 4 steps of 32
// rows fit: 2 x (32 + 34 + 36) x 128 + 1152 = 27,264 B (packed: bank-aligned buffers
// would take 6 x 8 KiB). Backward inference: c2 rows [32k, 32k+32); c1 one row more on
// each side inside the image; x two. The buffers go from address 0 in the order backward
// inference meets the tensors (c2 2 x 4096, c1 2 x 4352, x 2 x 4608), the weights above.
builtin.module attributes {module.name = "chain", module.state = "TPU_LOWERED", module.chip = "cv183x", module.mode = "BF16"} {
  func.func @main(%arg0: tensor<1x32x128x64xbf16>) -> tensor<1x32x128x64xbf16> {
    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x32x128x64xbf16>) -> tensor<1x32x128x64xbf16>
    %w1 = "top.weight"() {names = ["w1"]} : () -> tensor<32x32x3x3xbf16>
    %w2 = "top.weight"() {names = ["w2"]} : () -> tensor<32x32x3x3xbf16>
    %none = "top.none"() : () -> none
    %c1 = "tpu.conv"(%x, %w1, %none) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [1, 1], dilations = [1, 1], group = 1, names = ["c1"]} : (tensor<1x32x128x64xbf16>, tensor<32x32x3x3xbf16>, none) -> tensor<1x32x128x64xbf16>
    %c2 = "tpu.conv"(%c1, %w2, %none) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [1, 1], dilations = [1, 1], group = 1, do_relu = true, names = ["c2"]} : (tensor<1x32x128x64xbf16>, tensor<32x32x3x3xbf16>, none) -> tensor<1x32x128x64xbf16>
    func.return %c2 : tensor<1x32x128x64xbf16>
  }
}

// CHECK:       module.name = "chain", module.state = "TPU_GROUPED"
// CHECK:       %[[W1:.*]] = "top.weight"() {names = ["w1"]}
// CHECK:       %[[W2:.*]] = "top.weight"() {names = ["w2"]}
// CHECK:       %[[G:.*]] = "tpu.group"() ({
// x: rows [0,34) [30,36) [62,36) [94,34), 36 rows x 128 B = 4608 B a buffer, at
// 8192 + 8704 = 16896; the weights resident from 16896 + 9216 = 26112: w1, then w2.
// CHECK-NEXT:    %[[X:.*]] = "tpu.load"(%x) {ginfo = #tpu.lg_info<16896 : i64, 4608 : i64, 0 : i64, 0 : i64, true, [0 : i64, 0 : i64, 0 : i64, 0 : i64], [1 : i64, 1 : i64, 1 : i64, 1 : i64], [0 : i64, 30 : i64, 62 : i64, 94 : i64], [34 : i64, 36 : i64, 36 : i64, 34 : i64]>}
// CHECK-NEXT:    %[[LW1:.*]] = "tpu.load"(%[[W1]]) {ginfo = #tpu.lg_info<26112 : i64, 576 : i64, 0 : i64, 0 : i64, true, [0 : i64], [1 : i64], [0 : i64], [1 : i64]>}
// CHECK-NEXT:    %[[C1:.*]] = "tpu.conv"(%[[X]], %[[LW1]], %none) {{.*}}names = ["c1"], ginfo = #tpu.lg_info<8192 : i64, 4352 : i64, 0 : i64, 0 : i64, true, [0 : i64, 0 : i64, 0 : i64, 0 : i64], [1 : i64, 1 : i64, 1 : i64, 1 : i64], [0 : i64, 31 : i64, 63 : i64, 95 : i64], [33 : i64, 34 : i64, 34 : i64, 33 : i64]>}
// CHECK-NEXT:    %[[LW2:.*]] = "tpu.load"(%[[W2]]) {ginfo = #tpu.lg_info<26688 : i64, 576 : i64,
// CHECK-NEXT:    %[[C2:.*]] = "tpu.conv"(%[[C1]], %[[LW2]], %none) {{.*}}names = ["c2"], ginfo = #tpu.lg_info<0 : i64, 4096 : i64, 0 : i64, 0 : i64, true, [0 : i64, 0 : i64, 0 : i64, 0 : i64], [1 : i64, 1 : i64, 1 : i64, 1 : i64], [0 : i64, 32 : i64, 64 : i64, 96 : i64], [32 : i64, 32 : i64, 32 : i64, 32 : i64]>}
// CHECK-NEXT:    %[[S:.*]] = "tpu.store"(%[[C2]]) {ginfo = #tpu.lg_info<0 : i64, 4096 : i64,
// CHECK-NEXT:    "tpu.yield"(%[[S]])
// CHECK-NEXT:  }) {n_slices = 1 : i64, h_slices = 4 : i64, group_type = "NH", names = ["c2"]} : () -> tensor<1x32x128x64xbf16>
// CHECK-NEXT:  func.return %[[G]]

// -----

// A residual block, conv -> conv -> add with the block's input: x is loaded once per
// step with the halo both convs need (two rows each side); the add reads only the
// step's own rows of it, so it gets a local copy in its buffer (buffer_addr, size).
// 6 steps of 22 rows (the last 18): s, c2 22 rows (2816 B), c1 24, x 26.
builtin.module attributes {module.name = "residual", module.state = "TPU_LOWERED", module.chip = "cv183x", module.mode = "BF16"} {
  func.func @main(%arg0: tensor<1x32x128x64xbf16>) -> tensor<1x32x128x64xbf16> {
    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x32x128x64xbf16>) -> tensor<1x32x128x64xbf16>
    %w1 = "top.weight"() {names = ["w1"]} : () -> tensor<32x32x3x3xbf16>
    %w2 = "top.weight"() {names = ["w2"]} : () -> tensor<32x32x3x3xbf16>
    %none = "top.none"() : () -> none
    %c1 = "tpu.conv"(%x, %w1, %none) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [1, 1], dilations = [1, 1], group = 1, do_relu = true, names = ["c1"]} : (tensor<1x32x128x64xbf16>, tensor<32x32x3x3xbf16>, none) -> tensor<1x32x128x64xbf16>
    %c2 = "tpu.conv"(%c1, %w2, %none) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [1, 1], dilations = [1, 1], group = 1, names = ["c2"]} : (tensor<1x32x128x64xbf16>, tensor<32x32x3x3xbf16>, none) -> tensor<1x32x128x64xbf16>
    %s = "tpu.add"(%c2, %x) {do_relu = true, names = ["s"]} : (tensor<1x32x128x64xbf16>, tensor<1x32x128x64xbf16>) -> tensor<1x32x128x64xbf16>
    func.return %s : tensor<1x32x128x64xbf16>
  }
}

// CHECK:       module.name = "residual", module.state = "TPU_GROUPED"
// CHECK:       %[[G:.*]] = "tpu.group"() ({
// CHECK-NEXT:    %[[X:.*]] = "tpu.load"(%x) {ginfo = #tpu.lg_info<{{[0-9]+}} : i64, 3328 : i64, 0 : i64, 0 : i64, true, [0 : i64, 0 : i64, 0 : i64, 0 : i64, 0 : i64, 0 : i64], [1 : i64, 1 : i64, 1 : i64, 1 : i64, 1 : i64, 1 : i64], [0 : i64, 20 : i64, 42 : i64, 64 : i64, 86 : i64, 108 : i64], [24 : i64, 26 : i64, 26 : i64, 26 : i64, 26 : i64, 20 : i64]>}
// CHECK:         %[[C1:.*]] = "tpu.conv"(%[[X]], {{.*}}names = ["c1"], ginfo = #tpu.lg_info<{{[0-9]+}} : i64, 3072 : i64, 0 : i64, 0 : i64, true, {{.*}}, [0 : i64, 21 : i64, 43 : i64, 65 : i64, 87 : i64, 109 : i64], [23 : i64, 24 : i64, 24 : i64, 24 : i64, 24 : i64, 19 : i64]>}
// CHECK:         %[[C2:.*]] = "tpu.conv"(%[[C1]], {{.*}}names = ["c2"]
// CHECK-NEXT:    %[[S:.*]] = "tpu.add"(%[[C2]], %[[X]]) {do_relu = true, names = ["s"], ginfo = #tpu.lg_info<{{[0-9]+}} : i64, 2816 : i64, {{[1-9][0-9]*}} : i64, 2816 : i64, true, {{.*}}, [0 : i64, 22 : i64, 44 : i64, 66 : i64, 88 : i64, 110 : i64], [22 : i64, 22 : i64, 22 : i64, 22 : i64, 22 : i64, 18 : i64]>}
// CHECK-NEXT:    %[[ST:.*]] = "tpu.store"(%[[S]])
// CHECK-NEXT:    "tpu.yield"(%[[ST]])
// CHECK-NEXT:  }) {n_slices = 1 : i64, h_slices = 6 : i64, group_type = "NH", names = ["s"]}
// CHECK-NEXT:  func.return %[[G]]

// -----

// A branch that meets in a concat, then a pool: a 1x1 and a 3x3 conv read x (loaded
// once with the 3x3's halo; the 1x1 reads its own rows through a local copy), the concat
// joins the channels, the pool halves the rows. 3 steps: pool rows 11, 11, 10.
builtin.module attributes {module.name = "branch", module.state = "TPU_LOWERED", module.chip = "cv183x", module.mode = "BF16"} {
  func.func @main(%arg0: tensor<1x32x64x64xbf16>) -> tensor<1x32x32x32xbf16> {
    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x32x64x64xbf16>) -> tensor<1x32x64x64xbf16>
    %wa = "top.weight"() {names = ["wa"]} : () -> tensor<16x32x1x1xbf16>
    %wb = "top.weight"() {names = ["wb"]} : () -> tensor<16x32x3x3xbf16>
    %none = "top.none"() : () -> none
    %a = "tpu.conv"(%x, %wa, %none) {kernel_shape = [1, 1], pads = [0, 0, 0, 0], strides = [1, 1], dilations = [1, 1], group = 1, names = ["a"]} : (tensor<1x32x64x64xbf16>, tensor<16x32x1x1xbf16>, none) -> tensor<1x16x64x64xbf16>
    %b = "tpu.conv"(%x, %wb, %none) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [1, 1], dilations = [1, 1], group = 1, names = ["b"]} : (tensor<1x32x64x64xbf16>, tensor<16x32x3x3xbf16>, none) -> tensor<1x16x64x64xbf16>
    %cat = "tpu.concat"(%a, %b) {axis = 1, names = ["cat"]} : (tensor<1x16x64x64xbf16>, tensor<1x16x64x64xbf16>) -> tensor<1x32x64x64xbf16>
    %p = "tpu.max_pool"(%cat) {kernel_shape = [2, 2], strides = [2, 2], pads = [0, 0, 0, 0], names = ["p"]} : (tensor<1x32x64x64xbf16>) -> tensor<1x32x32x32xbf16>
    func.return %p : tensor<1x32x32x32xbf16>
  }
}

// CHECK:       module.name = "branch", module.state = "TPU_GROUPED"
// CHECK:       %[[G:.*]] = "tpu.group"() ({
// CHECK-NEXT:    %[[X:.*]] = "tpu.load"(%x) {ginfo = #tpu.lg_info<{{.*}}, [0 : i64, 21 : i64, 43 : i64], [23 : i64, 24 : i64, 21 : i64]>}
// CHECK:         %[[A:.*]] = "tpu.conv"(%[[X]], {{.*}}names = ["a"], ginfo = #tpu.lg_info<{{[0-9]+}} : i64, 2816 : i64, {{[1-9][0-9]*}} : i64, 2816 : i64, true, {{.*}}, [0 : i64, 22 : i64, 44 : i64], [22 : i64, 22 : i64, 20 : i64]>}
// CHECK:         %[[B:.*]] = "tpu.conv"(%[[X]], {{.*}}names = ["b"], ginfo = #tpu.lg_info<{{[0-9]+}} : i64, 2816 : i64, 0 : i64, 0 : i64, true,
// CHECK-NEXT:    %[[CAT:.*]] = "tpu.concat"(%[[A]], %[[B]]) {axis = 1 : i64, names = ["cat"], ginfo
// CHECK-NEXT:    %[[P:.*]] = "tpu.max_pool"(%[[CAT]]) {{.*}}names = ["p"], ginfo = #tpu.lg_info<{{.*}}, [0 : i64, 11 : i64, 22 : i64], [11 : i64, 11 : i64, 10 : i64]>}
// CHECK-NEXT:    %[[ST:.*]] = "tpu.store"(%[[P]])
// CHECK-NEXT:    "tpu.yield"(%[[ST]])
// CHECK-NEXT:  }) {n_slices = 1 : i64, h_slices = 3 : i64, group_type = "NH", names = ["p"]}
// CHECK-NEXT:  func.return %[[G]]

// Greedy grows a group op by op: conv a and conv b alone are no chain (a feeds no op
// of the pair), so a stays alone and the group starts at b.
// GREEDY:       module.name = "chain"
// GREEDY:       "tpu.group"() ({
// GREEDY:       h_slices = 4 : i64, group_type = "NH", names = ["c2"]
// GREEDY:       module.name = "residual"
// GREEDY:       "tpu.group"() ({
// GREEDY:       h_slices = 6 : i64, group_type = "NH", names = ["s"]
// GREEDY:       module.name = "branch"
// GREEDY:       %a = "tpu.conv"(%x, %wa, %none)
// GREEDY-NEXT:  %{{.*}} = "tpu.group"() ({
// GREEDY-NEXT:    "tpu.load"(%x)
// GREEDY-NEXT:    "tpu.load"(%wb)
// GREEDY-NEXT:    %b = "tpu.conv"
// GREEDY:         "tpu.load"(%a)
// GREEDY-NEXT:    %cat = "tpu.concat"
// GREEDY-NEXT:    %{{.*}} = "tpu.max_pool"

// SUMMARY: tpu-layer-group (cv183x, opt 2): 1 groups hold 2 of 2 ops (4 steps)
// SUMMARY: tpu-layer-group (cv183x, opt 2): 1 groups hold 3 of 3 ops (6 steps)
// SUMMARY: tpu-layer-group (cv183x, opt 2): 1 groups hold 4 of 4 ops (3 steps)

// STATE: tpu-opt: error: module.state is TOP_F32: tpu-layer-group takes a lowered TPU module (TPU_LOWERED)
// OPT: tpu-opt: error: opt=3: use 1 (greedy) or 2 (dynamic programming)
