// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<3x4xbf16>) -> tensor<3x2xbf16> {
  %ids = "top.weight"() {names = ["ids"]} : () -> tensor<3x2xi32>
  %y = "tpu.gather_elements"(%arg0, %ids) {axis = 1, names = ["y"]} : (tensor<3x4xbf16>, tensor<3x2xi32>) -> tensor<3x2xbf16>
  func.return %y : tensor<3x2xbf16>
}

// CHECK:      %[[IDS:.*]] = "top.weight"() {names = ["ids"]} : () -> tensor<3x2xi32>
// CHECK-NEXT: %[[Y:.*]] = "tpu.gather_elements"(%arg0, %[[IDS]]) {axis = 1 : i64, names = ["y"]} : (tensor<3x4xbf16>, tensor<3x2xi32>) -> tensor<3x2xbf16>
// CHECK-NEXT: func.return
