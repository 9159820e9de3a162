// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<1x8x8xbf16>) -> tensor<1x8x3xbf16> {
  %y = "tpu.slice"(%arg0) {starts = [2], ends = [8], axes = [2], steps = [2], names = ["y"]} : (tensor<1x8x8xbf16>) -> tensor<1x8x3xbf16>
  func.return %y : tensor<1x8x3xbf16>
}

// CHECK:      %[[Y:.*]] = "tpu.slice"(%arg0) {starts = [2 : i64], ends = [8 : i64], axes = [2 : i64], steps = [2 : i64], names = ["y"]} : (tensor<1x8x8xbf16>) -> tensor<1x8x3xbf16>
// CHECK-NEXT: func.return
