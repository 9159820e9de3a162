// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<5x2x4xbf16>) -> (tensor<5x2x2x3xbf16>, tensor<2x2x3xbf16>) {
  %w = "top.weight"() {names = ["w"]} : () -> tensor<2x9x4xbf16>
  %r = "top.weight"() {names = ["r"]} : () -> tensor<2x9x3xbf16>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<2x18xbf16>
  %none = "top.none"() : () -> none
  %y, %y_h = "tpu.gru"(%arg0, %w, %r, %b, %none) {hidden_size = 3, direction = "bidirectional", linear_before_reset = true, layout = 0, names = ["y", "y_h"]} : (tensor<5x2x4xbf16>, tensor<2x9x4xbf16>, tensor<2x9x3xbf16>, tensor<2x18xbf16>, none) -> (tensor<5x2x2x3xbf16>, tensor<2x2x3xbf16>)
  func.return %y, %y_h : tensor<5x2x2x3xbf16>, tensor<2x2x3xbf16>
}

// CHECK:      %[[W:.*]] = "top.weight"() {names = ["w"]} : () -> tensor<2x9x4xbf16>
// CHECK-NEXT: %[[R:.*]] = "top.weight"() {names = ["r"]} : () -> tensor<2x9x3xbf16>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<2x18xbf16>
// CHECK-NEXT: %[[NONE:.*]] = "top.none"() : () -> none
// CHECK-NEXT: %[[Y:[^,]*]], %[[Y_H:.*]] = "tpu.gru"(%arg0, %[[W]], %[[R]], %[[B]], %[[NONE]]) {hidden_size = 3 : i64, direction = "bidirectional", linear_before_reset = true, layout = 0 : i64, names = ["y", "y_h"]} : (tensor<5x2x4xbf16>, tensor<2x9x4xbf16>, tensor<2x9x3xbf16>, tensor<2x18xbf16>, none) -> (tensor<5x2x2x3xbf16>, tensor<2x2x3xbf16>)
// CHECK-NEXT: func.return
