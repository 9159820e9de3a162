// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

func.func @main(%arg0: tensor<4x1xf16>, %arg1: tensor<1x5xf16>) -> tensor<4x5xf16> {
  %y = "tpu.div"(%arg0, %arg1) {names = ["y"]} : (tensor<4x1xf16>, tensor<1x5xf16>) -> tensor<4x5xf16>
  func.return %y : tensor<4x5xf16>
}

// CHECK:      %[[Y:.*]] = "tpu.div"(%arg0, %arg1) {names = ["y"]} : (tensor<4x1xf16>, tensor<1x5xf16>) -> tensor<4x5xf16>
// CHECK-NEXT: func.return
