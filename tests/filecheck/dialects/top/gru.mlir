// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<5x2x4xf32>, %arg1: tensor<2x2x3xf32>) -> tensor<2x2x3xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<5x2x4xf32>) -> tensor<5x2x4xf32>
  %h0 = "top.input"(%arg1) {names = ["h0"]} : (tensor<2x2x3xf32>) -> tensor<2x2x3xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<2x9x4xf32>
  %r = "top.weight"() {names = ["r"]} : () -> tensor<2x9x3xf32>
  %none = "top.none"() : () -> none
  %y, %y_h = "top.gru"(%x, %w, %r, %none, %h0) {hidden_size = 3, direction = "bidirectional", linear_before_reset = true, layout = 0, names = ["", "y_h"]} : (tensor<5x2x4xf32>, tensor<2x9x4xf32>, tensor<2x9x3xf32>, none, tensor<2x2x3xf32>) -> (none, tensor<2x2x3xf32>)
  func.return %y_h : tensor<2x2x3xf32>
}

// CHECK:      %[[X:.*]] = "top.input"(%arg0) {names = ["x"]} : (tensor<5x2x4xf32>) -> tensor<5x2x4xf32>
// CHECK-NEXT: %[[H0:.*]] = "top.input"(%arg1) {names = ["h0"]} : (tensor<2x2x3xf32>) -> tensor<2x2x3xf32>
// CHECK-NEXT: %[[W:.*]] = "top.weight"() {names = ["w"]} : () -> tensor<2x9x4xf32>
// CHECK-NEXT: %[[R:.*]] = "top.weight"() {names = ["r"]} : () -> tensor<2x9x3xf32>
// CHECK-NEXT: %[[NONE:.*]] = "top.none"() : () -> none
// CHECK-NEXT: %[[Y:[^,]*]], %[[Y_H:.*]] = "top.gru"(%[[X]], %[[W]], %[[R]], %[[NONE]], %[[H0]]) {hidden_size = 3 : i64, direction = "bidirectional", linear_before_reset = true, layout = 0 : i64, names = ["", "y_h"]} : (tensor<5x2x4xf32>, tensor<2x9x4xf32>, tensor<2x9x3xf32>, none, tensor<2x2x3xf32>) -> (none, tensor<2x2x3xf32>)
