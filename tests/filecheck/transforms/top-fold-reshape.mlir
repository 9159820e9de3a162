// RUN: tpu-opt -p top-fold-reshape %s | filecheck %s

// reshape(reshape(x)) -> reshape(x), named as the outer one; an identity reshape
// (Identity, Dropout) in the middle of the graph disappears.
func.func @chain(%arg0: tensor<2x3x4xf32>) -> tensor<4x6xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %s = "top.sigmoid"(%x) {names = ["s"]} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %id = "top.reshape"(%s) {shape = [2, 3, 4], names = ["id"]} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %a = "top.reshape"(%id) {shape = [6, 4], names = ["a"]} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %b = "top.reshape"(%a) {shape = [24], names = ["b"]} : (tensor<6x4xf32>) -> tensor<24xf32>
  %c = "top.reshape"(%b) {shape = [4, 6], names = ["c"]} : (tensor<24xf32>) -> tensor<4x6xf32>
  func.return %c : tensor<4x6xf32>
}

// CHECK-LABEL: func.func @chain
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[S:.*]] = "top.sigmoid"(%[[X]]) {names = ["s"]}
// CHECK-NEXT:  %[[C:.*]] = "top.reshape"(%[[S]]) {shape = [4 : i64, 6 : i64], names = ["c"]} : (tensor<2x3x4xf32>) -> tensor<4x6xf32>
// CHECK-NEXT:  func.return %[[C]]

// squeeze, unsqueeze and flatten chain too; a chain back to the input's shape vanishes.
func.func @mixed(%arg0: tensor<1x3x1x4xf32>) -> (tensor<3x4xf32>, tensor<1x3x1x4xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x1x4xf32>) -> tensor<1x3x1x4xf32>
  %e = "top.exp"(%x) {names = ["e"]} : (tensor<1x3x1x4xf32>) -> tensor<1x3x1x4xf32>
  %sq = "top.squeeze"(%e) {axes = [0, 2], names = ["sq"]} : (tensor<1x3x1x4xf32>) -> tensor<3x4xf32>
  %un = "top.unsqueeze"(%sq) {axes = [0], names = ["un"]} : (tensor<3x4xf32>) -> tensor<1x3x4xf32>
  %fl = "top.flatten"(%un) {axis = 2, names = ["fl"]} : (tensor<1x3x4xf32>) -> tensor<3x4xf32>
  %back = "top.unsqueeze"(%sq) {axes = [0, 2], names = ["back"]} : (tensor<3x4xf32>) -> tensor<1x3x1x4xf32>
  %n = "top.neg"(%back) {names = ["n"]} : (tensor<1x3x1x4xf32>) -> tensor<1x3x1x4xf32>
  func.return %fl, %n : tensor<3x4xf32>, tensor<1x3x1x4xf32>
}

// CHECK-LABEL: func.func @mixed
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[E:.*]] = "top.exp"(%[[X]])
// CHECK-NEXT:  %[[FL:.*]] = "top.reshape"(%[[E]]) {shape = [3 : i64, 4 : i64], names = ["fl"]} : (tensor<1x3x1x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:  %[[N:.*]] = "top.neg"(%[[E]]) {names = ["n"]}
// CHECK-NEXT:  func.return %[[FL]], %[[N]]

// An identity whose result is a graph output: the producer takes the output's
// name when nothing else uses it; otherwise (here: the input itself, and a tensor
// that is an output too) the identity stays.
func.func @outputs(%arg0: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %s = "top.sigmoid"(%x) {names = ["s"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = "top.reshape"(%s) {names = ["y"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %x2 = "top.reshape"(%x) {names = ["x2"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = "top.tanh"(%x) {names = ["t"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %t2 = "top.reshape"(%t) {names = ["t2"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %y, %x2, %t, %t2 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// CHECK-LABEL: func.func @outputs
// CHECK-NEXT:  %[[X:.*]] = "top.input"
// CHECK-NEXT:  %[[Y:.*]] = "top.sigmoid"(%[[X]]) {names = ["y"]}
// CHECK-NEXT:  %[[X2:.*]] = "top.reshape"(%[[X]]) {names = ["x2"]}
// CHECK-NEXT:  %[[T:.*]] = "top.tanh"(%[[X]]) {names = ["t"]}
// CHECK-NEXT:  %[[T2:.*]] = "top.reshape"(%[[T]]) {names = ["t2"]}
// CHECK-NEXT:  func.return %[[Y]], %[[X2]], %[[T]], %[[T2]]
