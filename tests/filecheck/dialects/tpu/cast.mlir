// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// Quantize f32 to i8, dequantize i8 to f32, and f32 to f16 and bf16.

func.func @main(%arg0: tensor<1x3x4x4xf32>, %arg1: tensor<1x3x4x4xi8>) -> (tensor<1x3x4x4xi8>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf16>, tensor<1x3x4x4xbf16>) {
  %q = "tpu.cast"(%arg0) {scale = 0.0235, zero_point = 0, round_mode = "half_away_from_zero", names = ["q"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xi8>
  %dq = "tpu.cast"(%arg1) {scale = 0.0235, names = ["dq"]} : (tensor<1x3x4x4xi8>) -> tensor<1x3x4x4xf32>
  %h = "tpu.cast"(%arg0) {names = ["h"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf16>
  %b = "tpu.cast"(%arg0) {names = ["b"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xbf16>
  func.return %q, %dq, %h, %b : tensor<1x3x4x4xi8>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf16>, tensor<1x3x4x4xbf16>
}

// CHECK:      %[[Q:.*]] = "tpu.cast"(%arg0) {scale = 2.350000e-02 : f64, zero_point = 0 : i64, round_mode = "half_away_from_zero", names = ["q"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xi8>
// CHECK-NEXT: %[[DQ:.*]] = "tpu.cast"(%arg1) {scale = 2.350000e-02 : f64, names = ["dq"]} : (tensor<1x3x4x4xi8>) -> tensor<1x3x4x4xf32>
// CHECK-NEXT: %[[H:.*]] = "tpu.cast"(%arg0) {names = ["h"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf16>
// CHECK-NEXT: %[[B:.*]] = "tpu.cast"(%arg0) {names = ["b"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xbf16>
// CHECK-NEXT: func.return
