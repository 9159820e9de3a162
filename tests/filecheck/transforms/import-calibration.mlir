// RUN: tpu-opt -p 'import-calibration{table="%S/Inputs/import_calibration_table"}' %s 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=WARN < %t.err
// RUN: not tpu-opt -p 'import-calibration{table="%S/Inputs/other_model_table"}' %s 2>&1 | filecheck %s --check-prefix=OTHER

// Each float tensor with a row gets the calibrated type; tensors without a row
// ("m") and rows naming no tensor ("not_in_module") are warnings; weights have
// no range. @main's result type follows the value returned.
builtin.module attributes {module.name = "cal", module.state = "TOP_F32"} {
  func.func @main(%arg0: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %w = "top.weight"() {names = ["w"]} : () -> tensor<2x2x1x1xf32>
    %none = "top.none"() : () -> none
    %c = "top.conv"(%x, %w, %none) {kernel_shape = [1, 1], names = ["c"]} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x4x4xf32>
    %m = "top.mul"(%c, %x) {names = ["m"]} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %y = "top.sigmoid"(%m) {names = ["y"]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    func.return %y : tensor<1x2x4x4xf32>
  }
}

// CHECK:      builtin.module attributes {module.name = "cal", module.state = "TOP_CALIBRATED"}
// CHECK:      func.func @main(%arg0: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32, #top.calibrated<1.000000e+00 : f64, 0.000000e+00 : f64, 1.000000e+00 : f64>>
// CHECK-NEXT: %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32, #top.calibrated<4.000000e+00 : f64, -4.000000e+00 : f64, 3.900000e+00 : f64>>
// CHECK-NEXT: %w = "top.weight"() {names = ["w"]} : () -> tensor<2x2x1x1xf32>
// CHECK:      %c = "top.conv"(%x, %w, %none) {{.*}} -> tensor<1x2x4x4xf32, #top.calibrated<2.000000e+00 : f64, -1.000000e+00 : f64, 2.500000e+00 : f64>>
// CHECK-NEXT: %m = "top.mul"(%c, %x) {{.*}} -> tensor<1x2x4x4xf32>
// CHECK-NEXT: %y = "top.sigmoid"(%m) {{.*}} -> tensor<1x2x4x4xf32, #top.calibrated<1.000000e+00 : f64, 0.000000e+00 : f64, 1.000000e+00 : f64>>

// WARN: warning: calibration table {{.*}}import_calibration_table has no row for 1 tensor(s) of the module: m; INT8 ops producing them cannot lower
// WARN: warning: calibration table {{.*}}import_calibration_table has 1 row(s) naming no tensor of the module: not_in_module

// OTHER: tpu-opt: error: calibration table {{.*}}other_model_table has rows for only 0 of the module's 4 tensors (its first row is 'conv1', the module's first uncalibrated tensor 'x'): it was made for another model; calibrate this one with tpu-xdsl calibrate
