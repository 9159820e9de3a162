// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// INT8 scale: i8 scale, i16 bias, per-channel rshift.

func.func @main(%arg0: tensor<1x3x4x4xi8>) -> tensor<1x3x4x4xi8> {
  %scale = "top.weight"() {names = ["scale"]} : () -> tensor<3xi8>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<3xi16>
  %y = "tpu.scale"(%arg0, %scale, %b) {do_relu = true, rshift = [6, 6, 7], round_mode = "half_away_from_zero", names = ["y"]} : (tensor<1x3x4x4xi8>, tensor<3xi8>, tensor<3xi16>) -> tensor<1x3x4x4xi8>
  func.return %y : tensor<1x3x4x4xi8>
}

// CHECK:      %[[SCALE:.*]] = "top.weight"() {names = ["scale"]} : () -> tensor<3xi8>
// CHECK-NEXT: %[[B:.*]] = "top.weight"() {names = ["b"]} : () -> tensor<3xi16>
// CHECK-NEXT: %[[Y:.*]] = "tpu.scale"(%arg0, %[[SCALE]], %[[B]]) {do_relu = true, rshift = [6 : i64, 6 : i64, 7 : i64], round_mode = "half_away_from_zero", names = ["y"]} : (tensor<1x3x4x4xi8>, tensor<3xi8>, tensor<3xi16>) -> tensor<1x3x4x4xi8>
// CHECK-NEXT: func.return
