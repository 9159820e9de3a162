// RUN: tpu-opt -p top-fold-compare-cast %s | filecheck %s

// A one-hot encoding as exporters write it: Cast(Equal(x, range)) to float.
// The compare yields the float under the cast's name; the i1 tensor is gone.
func.func @one_hot(%arg0: tensor<1x8x1xf32>) -> tensor<1x8x4xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x8x1xf32>) -> tensor<1x8x1xf32>
  %r = "top.weight"() {names = ["range"]} : () -> tensor<1x1x4xf32>
  %eq = "top.compare"(%x, %r) {mode = "eq", names = ["eq"]} : (tensor<1x8x1xf32>, tensor<1x1x4xf32>) -> tensor<1x8x4xi1>
  %f = "top.cast"(%eq) {names = ["one_hot"]} : (tensor<1x8x4xi1>) -> tensor<1x8x4xf32>
  func.return %f : tensor<1x8x4xf32>
}

// CHECK-LABEL: func.func @one_hot
// CHECK:       %[[EQ:.*]] = "top.compare"(%{{.*}}, %{{.*}}) {mode = "eq", names = ["one_hot"]} : (tensor<1x8x1xf32>, tensor<1x1x4xf32>) -> tensor<1x8x4xf32>
// CHECK-NEXT:  func.return %[[EQ]] : tensor<1x8x4xf32>

// A boolean also read as a boolean (by a where) stays; the cast gets its own compare.
func.func @shared(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<4xf32>) -> tensor<4xf32>
  %z = "top.weight"() {names = ["zero"]} : () -> tensor<1xf32>
  %gt = "top.compare"(%x, %z) {mode = "gt", names = ["gt"]} : (tensor<4xf32>, tensor<1xf32>) -> tensor<4xi1>
  %m = "top.cast"(%gt) {names = ["mask"]} : (tensor<4xi1>) -> tensor<4xf32>
  %w = "top.where"(%gt, %x, %z) {names = ["relu"]} : (tensor<4xi1>, tensor<4xf32>, tensor<1xf32>) -> tensor<4xf32>
  func.return %m, %w : tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @shared
// CHECK:       %[[GT:.*]] = "top.compare"(%{{.*}}, %{{.*}}) {mode = "gt", names = ["gt"]} : (tensor<4xf32>, tensor<1xf32>) -> tensor<4xi1>
// CHECK:       %[[M:.*]] = "top.compare"(%{{.*}}, %{{.*}}) {mode = "gt", names = ["mask"]} : (tensor<4xf32>, tensor<1xf32>) -> tensor<4xf32>
// CHECK:       "top.where"(%[[GT]],

// A cast to an integer type is not a float: unchanged.
func.func @to_int(%arg0: tensor<4xf32>) -> tensor<4xi32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<4xf32>) -> tensor<4xf32>
  %z = "top.weight"() {names = ["zero"]} : () -> tensor<1xf32>
  %lt = "top.compare"(%x, %z) {mode = "lt", names = ["lt"]} : (tensor<4xf32>, tensor<1xf32>) -> tensor<4xi1>
  %i = "top.cast"(%lt) {names = ["lt_i"]} : (tensor<4xi1>) -> tensor<4xi32>
  func.return %i : tensor<4xi32>
}

// CHECK-LABEL: func.func @to_int
// CHECK:       "top.compare"{{.*}} -> tensor<4xi1>
// CHECK-NEXT:  "top.cast"{{.*}} -> tensor<4xi32>
