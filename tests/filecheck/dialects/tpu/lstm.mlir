// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<5x2x4xf16>) -> (tensor<5x1x2x3xf16>, tensor<1x2x3xf16>) {
  %w = "top.weight"() {names = ["w"]} : () -> tensor<1x12x4xf16>
  %r = "top.weight"() {names = ["r"]} : () -> tensor<1x12x3xf16>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<1x24xf16>
  %none = "top.none"() : () -> none
  %y, %y_h, %r0_2 = "tpu.lstm"(%arg0, %w, %r, %b, %none, %none) {hidden_size = 3, direction = "forward", layout = 0, names = ["y", "y_h", ""]} : (tensor<5x2x4xf16>, tensor<1x12x4xf16>, tensor<1x12x3xf16>, tensor<1x24xf16>, none, none) -> (tensor<5x1x2x3xf16>, tensor<1x2x3xf16>, none)
  func.return %y, %y_h : tensor<5x1x2x3xf16>, tensor<1x2x3xf16>
}

// CHECK:      %[[W:.*]] = "top.weight"() {names = ["w"]} : () -> tensor<1x12x4xf16>
// CHECK-NEXT: %[[R:.*]] = "top.weight"() {names = ["r"]} : () -> tensor<1x12x3xf16>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<1x24xf16>
// CHECK-NEXT: %[[NONE:.*]] = "top.none"() : () -> none
// CHECK-NEXT: %[[Y:[^,]*]], %[[Y_H:[^,]*]], %[[R0_2:.*]] = "tpu.lstm"(%arg0, %[[W]], %[[R]], %[[B]], %[[NONE]], %[[NONE]]) {hidden_size = 3 : i64, direction = "forward", layout = 0 : i64, names = ["y", "y_h", ""]} : (tensor<5x2x4xf16>, tensor<1x12x4xf16>, tensor<1x12x3xf16>, tensor<1x24xf16>, none, none) -> (tensor<5x1x2x3xf16>, tensor<1x2x3xf16>, none)
// CHECK-NEXT: func.return
