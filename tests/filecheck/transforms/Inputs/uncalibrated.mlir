builtin.module attributes {module.name = "int8", module.state = "TOP_F32"} {
  func.func @main(%arg0: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %y = "top.sigmoid"(%x) {names = ["y"]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    func.return %y : tensor<1x2x4x4xf32>
  }
}
