// A 2 GiB weight (its type only: there is no weight file to read): more than cv183x's 1 GiB of
// DDR, less than bm1684x's 12 GiB. Input of tpu-assign-memory.mlir.
builtin.module attributes {module.name = "huge", module.state = "TPU_LOWERED", module.chip = "cv183x", module.mode = "BF16"} {
  func.func @main(%arg0: tensor<1x1024xbf16>) -> tensor<1x1048576xbf16> {
    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x1024xbf16>) -> tensor<1x1024xbf16>
    %w = "top.weight"() {names = ["w"]} : () -> tensor<1024x1048576xbf16>
    %none = "top.none"() : () -> none
    %y = "tpu.matmul"(%x, %w, %none) {names = ["y"]} : (tensor<1x1024xbf16>, tensor<1024x1048576xbf16>, none) -> tensor<1x1048576xbf16>
    func.return %y : tensor<1x1048576xbf16>
  }
}
