// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<5x2x4xf32>) -> tensor<5x1x2x3xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<5x2x4xf32>) -> tensor<5x2x4xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<1x12x4xf32>
  %r = "top.weight"() {names = ["r"]} : () -> tensor<1x12x3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<1x24xf32>
  %none = "top.none"() : () -> none
  %y, %y_h, %y_c = "top.lstm"(%x, %w, %r, %b, %none, %none) {hidden_size = 3, direction = "forward", layout = 0, names = ["y", "y_h", ""]} : (tensor<5x2x4xf32>, tensor<1x12x4xf32>, tensor<1x12x3xf32>, tensor<1x24xf32>, none, none) -> (tensor<5x1x2x3xf32>, tensor<1x2x3xf32>, none)
  func.return %y : tensor<5x1x2x3xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<5x2x4xf32>) -> tensor<5x2x4xf32>
// CHECK-NEXT: %[[W:.*]] = "top.weight"() {names = ["w"]} : () -> tensor<1x12x4xf32>
// CHECK-NEXT: %[[R:.*]] = "top.weight"() {names = ["r"]} : () -> tensor<1x12x3xf32>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<1x24xf32>
// CHECK-NEXT: %[[NONE:.*]] = "top.none"() : () -> none
// CHECK-NEXT: %[[Y:[^,]*]], %[[Y_H:[^,]*]], %[[Y_C:.*]] = "top.lstm"(%[[X]], %[[W]], %[[R]], %[[B]], %[[NONE]], %[[NONE]]) {hidden_size = 3 : i64, direction = "forward", layout = 0 : i64, names = ["y", "y_h", ""]} : (tensor<5x2x4xf32>, tensor<1x12x4xf32>, tensor<1x12x3xf32>, tensor<1x24xf32>, none, none) -> (tensor<5x1x2x3xf32>, tensor<1x2x3xf32>, none)
