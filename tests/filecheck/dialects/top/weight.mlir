// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main() -> tensor<4x3x3x3xf32> {
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %table = "top.weight"() {names = ["table"]} : () -> tensor<256xi8>
  func.return %w : tensor<4x3x3x3xf32>
}

// CHECK:      %[[W:.*]] = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
// CHECK-NEXT: %[[TABLE:.*]] = "top.weight"() {names = ["table"]} : () -> tensor<256xi8>
