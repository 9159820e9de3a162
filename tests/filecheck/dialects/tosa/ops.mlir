// RUN: tpu-opt %s | tpu-opt | filecheck %s
// RUN: tpu-opt %s --print-op-generic | tpu-opt | filecheck %s

// TOSA 1.0 as IREE 3.13 reads it (this function compiled there as written): zero points
// are tensor<1xT> operands, shapes are !tosa.shape values, modes are enum attributes and
// inherent attributes print as properties, in <{...}>.

func.func @main(%x: tensor<1x8x8x4xf32>, %q: tensor<1x8x8x4xi8>) -> (tensor<1x16x16x4xf32>, tensor<1x16x16x4xf32>, tensor<1x4x4x4xf32>, tensor<1x8x8x4xi8>, tensor<1x8x8x4xi8>, tensor<1x10x10x4xf32>, tensor<1x4x8x4xf32>, tensor<2x8x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x8x4xi32>, tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>, tensor<1x8x8x8xf32>, tensor<1x8x8x4xi32>, tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>) {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %w = "tosa.const"() <{values = dense<0.1> : tensor<4x2x2x4xf32>}> : () -> tensor<4x2x2x4xf32>
  %b = "tosa.const"() <{values = dense<0.0> : tensor<4xf32>}> : () -> tensor<4xf32>
  %tc = "tosa.transpose_conv2d"(%x, %w, %b, %z, %z) <{acc_type = f32, out_pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>}> : (tensor<1x8x8x4xf32>, tensor<4x2x2x4xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x16x4xf32>
  %sc = "tosa.const_shape"() <{values = dense<[4, 2, 4, 2]> : tensor<4xindex>}> : () -> !tosa.shape<4>
  %of = "tosa.const_shape"() <{values = dense<[0, 0]> : tensor<2xindex>}> : () -> !tosa.shape<2>
  %bd = "tosa.const_shape"() <{values = dense<[2, 2]> : tensor<2xindex>}> : () -> !tosa.shape<2>
  %rs = "tosa.resize"(%x, %sc, %of, %bd) <{mode = #tosa.resize_mode<BILINEAR>}> : (tensor<1x8x8x4xf32>, !tosa.shape<4>, !tosa.shape<2>, !tosa.shape<2>) -> tensor<1x16x16x4xf32>
  %ap = "tosa.avg_pool2d"(%x, %z, %z) <{acc_type = f32, kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>}> : (tensor<1x8x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x4xf32>
  %m = "tosa.const"() <{values = dense<1073741824> : tensor<1xi32>}> : () -> tensor<1xi32>
  %s = "tosa.const"() <{values = dense<31> : tensor<1xi8>}> : () -> tensor<1xi8>
  %z8 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %rq = "tosa.rescale"(%q, %m, %s, %z8, %z8) <{input_unsigned = false, output_unsigned = false, per_channel = false, rounding_mode = #tosa.rounding_mode<SINGLE_ROUND>, scale32 = true}> : (tensor<1x8x8x4xi8>, tensor<1xi32>, tensor<1xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<1x8x8x4xi8>
  %tb = "tosa.const"() <{values = dense<3> : tensor<256xi8>}> : () -> tensor<256xi8>
  %tl = "tosa.table"(%q, %tb) : (tensor<1x8x8x4xi8>, tensor<256xi8>) -> tensor<1x8x8x4xi8>
  %pp = "tosa.const_shape"() <{values = dense<[0, 0, 1, 1, 1, 1, 0, 0]> : tensor<8xindex>}> : () -> !tosa.shape<8>
  %pd = "tosa.pad"(%x, %pp, %z) : (tensor<1x8x8x4xf32>, !tosa.shape<8>, tensor<1xf32>) -> tensor<1x10x10x4xf32>
  %st = "tosa.const_shape"() <{values = dense<[0, 2, 0, 0]> : tensor<4xindex>}> : () -> !tosa.shape<4>
  %sz = "tosa.const_shape"() <{values = dense<[1, 4, 8, 4]> : tensor<4xindex>}> : () -> !tosa.shape<4>
  %sl = "tosa.slice"(%x, %st, %sz) : (tensor<1x8x8x4xf32>, !tosa.shape<4>, !tosa.shape<4>) -> tensor<1x4x8x4xf32>
  %mu = "tosa.const_shape"() <{values = dense<[2, 1, 1, 1]> : tensor<4xindex>}> : () -> !tosa.shape<4>
  %ti = "tosa.tile"(%x, %mu) : (tensor<1x8x8x4xf32>, !tosa.shape<4>) -> tensor<2x8x8x4xf32>
  %rd = "tosa.reduce_sum"(%x) <{axis = 1 : i32}> : (tensor<1x8x8x4xf32>) -> tensor<1x1x8x4xf32>
  %am = "tosa.argmax"(%x) <{axis = 1 : i32}> : (tensor<1x8x8x4xf32>) -> tensor<1x8x4xi32>
  %cl = "tosa.clamp"(%x) <{max_val = 6.0 : f32, min_val = 0.0 : f32}> : (tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  %sh = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %mm = "tosa.mul"(%x, %cl, %sh) : (tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>, tensor<1xi8>) -> tensor<1x8x8x4xf32>
  %cc = "tosa.concat"(%x, %mm) <{axis = 3 : i32}> : (tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>) -> tensor<1x8x8x8xf32>
  %ca = "tosa.cast"(%x) : (tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xi32>
  %ng = "tosa.negate"(%x, %z, %z) : (tensor<1x8x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x4xf32>
  %gt = "tosa.greater"(%x, %ng) : (tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xi1>
  %se = "tosa.select"(%gt, %x, %ng) : (tensor<1x8x8x4xi1>, tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  return %tc, %rs, %ap, %rq, %tl, %pd, %sl, %ti, %rd, %am, %cl, %mm, %cc, %ca, %ng, %se : tensor<1x16x16x4xf32>, tensor<1x16x16x4xf32>, tensor<1x4x4x4xf32>, tensor<1x8x8x4xi8>, tensor<1x8x8x4xi8>, tensor<1x10x10x4xf32>, tensor<1x4x8x4xf32>, tensor<2x8x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x8x4xi32>, tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>, tensor<1x8x8x8xf32>, tensor<1x8x8x4xi32>, tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>
}

// CHECK: = "tosa.const"() <{values = dense<0.000000e+00> : tensor<1xf32>}> : () -> tensor<1xf32>
// CHECK: = "tosa.const"() <{values = dense<1.000000e-01> : tensor<4x2x2x4xf32>}> : () -> tensor<4x2x2x4xf32>
// CHECK: = "tosa.const"() <{values = dense<0.000000e+00> : tensor<4xf32>}> : () -> tensor<4xf32>
// CHECK: = "tosa.transpose_conv2d"({{.*}}) <{acc_type = f32, out_pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>}> : (tensor<1x8x8x4xf32>, tensor<4x2x2x4xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x16x4xf32>
// CHECK: = "tosa.const_shape"() <{values = dense<[4, 2, 4, 2]> : tensor<4xindex>}> : () -> !tosa.shape<4>
// CHECK: = "tosa.const_shape"() <{values = dense<0> : tensor<2xindex>}> : () -> !tosa.shape<2>
// CHECK: = "tosa.const_shape"() <{values = dense<2> : tensor<2xindex>}> : () -> !tosa.shape<2>
// CHECK: = "tosa.resize"({{.*}}) <{mode = #tosa.resize_mode<BILINEAR>}> : (tensor<1x8x8x4xf32>, !tosa.shape<4>, !tosa.shape<2>, !tosa.shape<2>) -> tensor<1x16x16x4xf32>
// CHECK: = "tosa.avg_pool2d"({{.*}}) <{acc_type = f32, kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>}> : (tensor<1x8x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x4xf32>
// CHECK: = "tosa.const"() <{values = dense<1073741824> : tensor<1xi32>}> : () -> tensor<1xi32>
// CHECK: = "tosa.const"() <{values = dense<31> : tensor<1xi8>}> : () -> tensor<1xi8>
// CHECK: = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
// CHECK: = "tosa.rescale"({{.*}}) <{input_unsigned = false, output_unsigned = false, per_channel = false, rounding_mode = #tosa.rounding_mode<SINGLE_ROUND>, scale32 = true}> : (tensor<1x8x8x4xi8>, tensor<1xi32>, tensor<1xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<1x8x8x4xi8>
// CHECK: = "tosa.const"() <{values = dense<3> : tensor<256xi8>}> : () -> tensor<256xi8>
// CHECK: = "tosa.table"({{.*}}) : (tensor<1x8x8x4xi8>, tensor<256xi8>) -> tensor<1x8x8x4xi8>
// CHECK: = "tosa.const_shape"() <{values = dense<[0, 0, 1, 1, 1, 1, 0, 0]> : tensor<8xindex>}> : () -> !tosa.shape<8>
// CHECK: = "tosa.pad"({{.*}}) : (tensor<1x8x8x4xf32>, !tosa.shape<8>, tensor<1xf32>) -> tensor<1x10x10x4xf32>
// CHECK: = "tosa.const_shape"() <{values = dense<[0, 2, 0, 0]> : tensor<4xindex>}> : () -> !tosa.shape<4>
// CHECK: = "tosa.const_shape"() <{values = dense<[1, 4, 8, 4]> : tensor<4xindex>}> : () -> !tosa.shape<4>
// CHECK: = "tosa.slice"({{.*}}) : (tensor<1x8x8x4xf32>, !tosa.shape<4>, !tosa.shape<4>) -> tensor<1x4x8x4xf32>
// CHECK: = "tosa.const_shape"() <{values = dense<[2, 1, 1, 1]> : tensor<4xindex>}> : () -> !tosa.shape<4>
// CHECK: = "tosa.tile"({{.*}}) : (tensor<1x8x8x4xf32>, !tosa.shape<4>) -> tensor<2x8x8x4xf32>
// CHECK: = "tosa.reduce_sum"({{.*}}) <{axis = 1 : i32}> : (tensor<1x8x8x4xf32>) -> tensor<1x1x8x4xf32>
// CHECK: = "tosa.argmax"({{.*}}) <{axis = 1 : i32}> : (tensor<1x8x8x4xf32>) -> tensor<1x8x4xi32>
// CHECK: = "tosa.clamp"({{.*}}) <{max_val = 6.000000e+00 : f32, min_val = 0.000000e+00 : f32}> : (tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
// CHECK: = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
// CHECK: = "tosa.mul"({{.*}}) : (tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>, tensor<1xi8>) -> tensor<1x8x8x4xf32>
// CHECK: = "tosa.concat"({{.*}}) <{axis = 3 : i32}> : (tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>) -> tensor<1x8x8x8xf32>
// CHECK: = "tosa.cast"({{.*}}) : (tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xi32>
// CHECK: = "tosa.negate"({{.*}}) : (tensor<1x8x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x4xf32>
// CHECK: = "tosa.greater"({{.*}}) : (tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xi1>
// CHECK: = "tosa.select"({{.*}}) : (tensor<1x8x8x4xi1>, tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
