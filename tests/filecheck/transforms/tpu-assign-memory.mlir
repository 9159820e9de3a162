// RUN: tpu-opt -p tpu-assign-memory %s 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=SUMMARY < %t.err
// RUN: tpu-opt -p tpu-assign-memory %s 2>/dev/null | tpu-opt -p tpu-assign-memory 2>/dev/null | filecheck %s
// RUN: not tpu-opt -p tpu-assign-memory %S/Inputs/assign_memory_huge.mlir 2>&1 | filecheck %s --check-prefix=HUGE
// RUN: sed 's/cv183x/bm1684x/' %S/Inputs/assign_memory_huge.mlir | tpu-opt -p tpu-assign-memory 2>/dev/null | filecheck %s --check-prefix=FITS
// RUN: sed 's/TPU_LOWERED/TOP_F32/' %s | not tpu-opt -p tpu-assign-memory 2>&1 | filecheck %s --check-prefix=STATE

// A chain (x -> xq -> c -> l), a branch (l splits into p and q, p goes through a second
// lookup table, the two meet in cat) and a residual (c is live until s adds it).
// The second run checks that an addressed module is addressed again the same way.
//
// Coefficients, program order, each at a 64-byte boundary (sizes rounded up to 64):
//   w  16x16x3x3 i8 = 2304 B  -> [0, 2304)
//   b  16 i32       =   64 B  -> [2304, 2368)
//   t  256 i8       =  256 B  -> [2368, 2624)
//   t2 names the entry "t" with the same type: placed once, at 2368.
// coeff_bytes = 2624; the activation region starts at align(2624, 4096) = 4096.
//
// Activations (op index in @main; life = [definition or 0 for inputs, last user or
// the end (13) for outputs]; size rounded up to 64):
//   x   1x16x5x5 f32 1600 B  [0, 4]      xq  1x16x5x5 i8 400 -> 448  [4, 5]
//   c   448  [5, 11]   l  448  [6, 7]   p  1x4x5x5  [7, 9]   q  1x12x5x5  [7, 10]
//   p2  128  [9, 10]   cat  448  [10, 11]   s  448  [11, 12]   y  1x16x5x5 f32 1600  [12, 13]
// p and q split l along channels of a batch-1 tensor: they are views, placed inside l
// (p at its byte 0, q at byte 4*5*5 = 100), and l lives until its views do: [6, 10].
// Lower bound: the largest live set, at op 4 (x + xq) and op 12 (s + y): 2048.
//
// First-fit in definition order: x 0, xq 1600, c 0, l 448, p2 896, cat 1024, s 448
// (c and cat are live), y 896 (s is live) -> peak 2496.
// Largest-first (x, y 1600; xq, c, l, cat, s 448; p2 128): x 0, y 0, xq 1600, c 0,
// l 448, cat 896, s 1600 (y, c, cat live), p2 1344 -> peak 2048 = the lower bound:
// largest-first is kept. Addresses are 4096 + offset.
builtin.module attributes {module.name = "mem", module.state = "TPU_LOWERED", module.chip = "bm1684x", module.mode = "INT8"} {
  func.func @main(%arg0: tensor<1x16x5x5xf32>) -> tensor<1x16x5x5xf32> {
    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x16x5x5xf32>) -> tensor<1x16x5x5xf32>
    %w = "top.weight"() {names = ["w"]} : () -> tensor<16x16x3x3xi8>
    %b = "top.weight"() {names = ["b"]} : () -> tensor<16xi32>
    %t = "top.weight"() {names = ["t"]} : () -> tensor<256xi8>
    %xq = "tpu.cast"(%x) {names = ["xq"]} : (tensor<1x16x5x5xf32>) -> tensor<1x16x5x5xi8>
    %c = "tpu.conv"(%xq, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], names = ["c"]} : (tensor<1x16x5x5xi8>, tensor<16x16x3x3xi8>, tensor<16xi32>) -> tensor<1x16x5x5xi8>
    %l = "tpu.lut"(%c, %t) {names = ["l"]} : (tensor<1x16x5x5xi8>, tensor<256xi8>) -> tensor<1x16x5x5xi8>
    %p, %q = "tpu.split"(%l) {axis = 1, split = [4, 12], names = ["p", "q"]} : (tensor<1x16x5x5xi8>) -> (tensor<1x4x5x5xi8>, tensor<1x12x5x5xi8>)
    %t2 = "top.weight"() {names = ["t"]} : () -> tensor<256xi8>
    %p2 = "tpu.lut"(%p, %t2) {names = ["p2"]} : (tensor<1x4x5x5xi8>, tensor<256xi8>) -> tensor<1x4x5x5xi8>
    %cat = "tpu.concat"(%p2, %q) {axis = 1, names = ["cat"]} : (tensor<1x4x5x5xi8>, tensor<1x12x5x5xi8>) -> tensor<1x16x5x5xi8>
    %s = "tpu.add"(%c, %cat) {names = ["s"]} : (tensor<1x16x5x5xi8>, tensor<1x16x5x5xi8>) -> tensor<1x16x5x5xi8>
    %y = "tpu.cast"(%s) {names = ["y"]} : (tensor<1x16x5x5xi8>) -> tensor<1x16x5x5xf32>
    func.return %y : tensor<1x16x5x5xf32>
  }
}

// CHECK:      builtin.module attributes {module.name = "mem", module.state = "TPU_ADDRESSED", module.chip = "bm1684x", module.mode = "INT8", module.coeff_bytes = 2624 : i64, module.activation_bytes = 2048 : i64, module.activation_lower_bound = 2048 : i64, module.ddr_bytes = 6144 : i64, module.memory_strategy = "largest-first"}
// CHECK:      %x = "top.input"(%arg0) {names = ["x"], ddr = [4096 : i64]}
// CHECK-NEXT: %w = "top.weight"() {names = ["w"], ddr = [0 : i64]}
// CHECK-NEXT: %b = "top.weight"() {names = ["b"], ddr = [2304 : i64]}
// CHECK-NEXT: %t = "top.weight"() {names = ["t"], ddr = [2368 : i64]}
// CHECK-NEXT: %xq = "tpu.cast"(%x) {names = ["xq"], ddr = [5696 : i64]}
// CHECK-NEXT: %c = "tpu.conv"(%xq, %w, %b) {{{.*}}names = ["c"], ddr = [4096 : i64]}
// CHECK-NEXT: %l = "tpu.lut"(%c, %t) {names = ["l"], ddr = [4544 : i64]}
// CHECK-NEXT: %p, %q = "tpu.split"(%l) {{{.*}}names = ["p", "q"], ddr = [4544 : i64, 4644 : i64]}
// CHECK-NEXT: %t2 = "top.weight"() {names = ["t"], ddr = [2368 : i64]}
// CHECK-NEXT: %p2 = "tpu.lut"(%p, %t2) {names = ["p2"], ddr = [5440 : i64]}
// CHECK-NEXT: %cat = "tpu.concat"(%p2, %q) {{{.*}}names = ["cat"], ddr = [4992 : i64]}
// CHECK-NEXT: %s = "tpu.add"(%c, %cat) {names = ["s"], ddr = [5696 : i64]}
// CHECK-NEXT: %y = "tpu.cast"(%s) {names = ["y"], ddr = [4096 : i64]}
// CHECK-NEXT: func.return %y

// SUMMARY: activations: 2.00 KiB at peak, lower bound 2.00 KiB (1.00x), largest-first; coefficients 2.56 KiB

// The 2 GiB weight does not fit cv183x (1 GiB); the same module on bm1684x (12 GiB) does:
// the weight at 0, the activation region at 2 GiB = 2147483648 (x: 2 KiB, then y).
// HUGE: tpu-opt: error: the model needs 2.00 GiB of DDR (weights 2.00 GiB, activations 2.00 MiB); cv183x has 1.00 GiB: quantize to INT8 or deploy to a chip with more DDR
// FITS:      module.chip = "bm1684x", {{.*}}module.coeff_bytes = 2147483648 : i64, module.activation_bytes = 2099200 : i64
// FITS:      %x = "top.input"(%arg0) {names = ["x"], ddr = [2147483648 : i64]}
// FITS-NEXT: %w = "top.weight"() {names = ["w"], ddr = [0 : i64]}
// FITS:      %y = "tpu.matmul"(%x, %w, %none) {names = ["y"], ddr = [2147485696 : i64]}

// STATE: tpu-opt: error: module.state is TOP_F32: tpu-assign-memory takes a TPU module (TPU_LOWERED); lower it with tpu-xdsl deploy or the lower-top-to-tpu pass first
