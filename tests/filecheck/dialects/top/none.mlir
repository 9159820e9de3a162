// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main() -> tensor<2xf32> {
  %none = "top.none"() : () -> none
  %w = "top.weight"() {names = ["w"]} : () -> tensor<2xf32>
  func.return %w : tensor<2xf32>
}

// CHECK:      %[[NONE:.*]] = "top.none"() : () -> none
// CHECK-NEXT: %[[W:.*]] = "top.weight"() {names = ["w"]} : () -> tensor<2xf32>
