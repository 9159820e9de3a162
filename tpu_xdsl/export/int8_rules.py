"""INT8 TPU ops -> TOSA, one rule per op kind, computing the codes the TPU interpreter does.

Representation: a TPU int8 tensor is a TOSA i8 tensor of the same codes; a uint8 one is an
i8 tensor of its codes less 128 (TOSA 1.0 computes on signless i8), so every zero point
TOSA sees is the TPU one plus that offset (`_offset`). Order-preserving ops (max pool,
data movement) work on either as they are.

- conv, matmul: i8 x i8 summed in i32 (`acc_type = i32`), the i32 bias, then one
  `tosa.rescale` with the op's own multipliers and shifts (per channel along the last
  axis: the channels-last layout puts a conv's channels there, a matmul's columns are
  there), output zero point, saturation; a fused ReLU clamps at the output zero point.
- avg pool: the window sum as a depthwise convolution with unit weights, then the rescale.
- add/sub: each input rescaled to i32 (its zero point removed); the sum of products with
  31-bit multipliers needs up to 40 bits, so each multiplier is split as q * 2^16 + r and
  the high and low sums are added after shifting the low one by 16 (exact: the low
  sum's last 16 bits cannot reach the rounding point), then rescaled by 1 / 2^(rshift - 16).
- deconv: `tosa.transpose_conv2d` summed in i32, then the rescale; scale: (x - zx) * s[c]
  + bias[c] in i32, rescaled per channel; reduce sum/mean: the i32 sum of x - zx, rescaled;
  reduce max/min, nearest resizes: on the codes as they are.
- concat: each input rescaled to the output's scale, then joined; lut: `tosa.table`;
  requant: rescale; cast: quantize (x * f32(1/scale), rounded as the op's `round_mode`,
  clamped), dequantize (cast, shift by the zero point, multiply), and between integer
  types quantize the codes as values (as kernels.int8.cast).
- Per-channel factors along an axis other than the last: rescaled with that axis
  transposed last and back (a requant of a rank-4 tensor works channels-last instead).

F16/BF16 ops (the float rules) compute in f32 on inputs widened to f32 and round each result
once to the storage type, as the TPU interpreter does (`_float_only`).

`tosa.rescale` rounds SINGLE_ROUND, half up: the project's `round_mode = "half_up"` (deploy
--round-mode half_up) computes the same codes bit for bit; with the default half away from
zero, negative ties round one code higher here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IntegerAttr,
    IntegerType,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute, Operation, SSAValue

from tpu_xdsl.dialects.tosa_attrs import RoundingMode, RoundingModeAttr
from tpu_xdsl.export.rules import RULES, Context, ExportError, Rule
from tpu_xdsl.export.rules_nn import reduce_axis
from tpu_xdsl.export.tosa_builder import (
    NHWC,
    Val,
    array_i64,
    boolean,
    float32,
    int32,
    numpy_dtype,
    tensor_type,
)

I8 = IntegerType(8)
I32 = IntegerType(32)
F32 = Float32Type()
_UI8 = IntegerType(8, Signedness.UNSIGNED)
_LOW_FLOATS = (Float16Type(), BFloat16Type())

TPU_RULES: dict[str, Rule] = {}

# Kinds whose float rule only moves or selects elements: they run on i8 codes as they are.
_DATA_MOVEMENT = ("reshape", "flatten", "squeeze", "unsqueeze", "expand_dims", "permute", "slice", "split",
                  "tile", "expand", "depth2space")


def tpu_rule(*kinds: str):
    def register(fn: Rule) -> Rule:
        for kind in kinds:
            TPU_RULES[kind] = fn
        return fn

    return register


def tpu_rules() -> dict[str, Rule]:
    """The rule table of a TPU module: the float rules (refusing integer operands), the
    data-movement rules on i8 codes, and the INT8 rules of this file."""
    table: dict[str, Rule] = {kind: _float_only(fn, kind) for kind, fn in RULES.items()}
    for kind in _DATA_MOVEMENT:
        if kind in RULES:
            table[kind] = _on_codes(RULES[kind])
    table.update(TPU_RULES)
    return table


# -- types ---------------------------------------------------------------------------------------


def _type(value: SSAValue) -> TensorType:
    kind = value.type
    assert isinstance(kind, TensorType)
    return kind


def _quantized(value: SSAValue) -> bool:
    kind = value.type
    return isinstance(kind, TensorType) and isinstance(kind.element_type, IntegerType) \
        and kind.element_type.width.data == 8


def _offset(value: SSAValue) -> int:
    """What the TOSA code adds to the TPU code: -128 for uint8, 0 for int8."""
    return -128 if _type(value).element_type == _UI8 else 0


def _zero_points(attrs: dict[str, Any]) -> list[int]:
    return [int(z) for z in attrs.get("input_zero_points") or []]


def _input_zp(op: Operation, attrs: dict[str, Any], index: int) -> int:
    points = _zero_points(attrs)
    return (points[index] if index < len(points) else 0) + _offset(op.operands[index])


def _output_zp(op: Operation, attrs: dict[str, Any]) -> int:
    return int(attrs.get("output_zero_point", 0) or 0) + _offset(op.results[0])


def _shape(op: Operation, index: int = 0) -> tuple[int, ...]:
    return tuple(_type(op.results[index]).get_shape())


class _CodesOp:
    """An op seen with i8 results where it has ui8 ones (for float rules on codes)."""

    def __init__(self, op: Operation):
        self.name = op.name
        self.results = [_Result(_i8_type(_type(r))) for r in op.results]


class _Result:
    def __init__(self, kind: TensorType):
        self.type = kind


def _i8_type(kind: TensorType) -> TensorType:
    element = I8 if kind.element_type == _UI8 else kind.element_type
    return tensor_type(kind.get_shape(), element)


def _float_only(fn: Rule, kind: str) -> Rule:
    """`fn` for float operands. An op on f16 or bf16 tensors computes as the TPU does: in
    f32 on its inputs widened (exactly) to f32, its f32 constants (a conv's bias) as they
    are, with one rounding of each result to the storage type; TOSA's own f16/bf16 ops
    would round every step (a conv's bias, each op of an activation's expansion).
    Data movement and casts run in the storage type."""

    def run(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
        if any(_quantized(v) for v in (*op.operands, *op.results)):
            raise ExportError(f"{op.name} on INT8 tensors does not export to TOSA")
        low = [r for r in op.results if isinstance(r.type, TensorType) and r.type.element_type in _LOW_FLOATS]
        if not low or kind in _STORAGE_KINDS:
            element = low[0].type.element_type if low else None  # pyright: ignore[reportAttributeAccessIssue]
            if element is not None:
                dtype = numpy_dtype(element)
                inputs = [Val(v.shape, element, const=v.const.astype(dtype)) if v.const is not None
                          and v.const.dtype.kind == "f" else v for v in inputs]
            x = inputs[0] if inputs else None
            if kind == "cast" and element == BFloat16Type() and x is not None and x.element == F32 \
                    and x.value is not None:  # f32 -> bf16 (an input's cast): rounded where IREE would not
                inputs = [ctx.new(_bf16_rounded(ctx, x.value), x.shape, F32, x.channels_last), *inputs[1:]]
            return fn(ctx, op, inputs, attrs)
        wide = [_widened(ctx, v) for v in inputs]
        outs = fn(ctx, _WideOp(op), wide, attrs)  # pyright: ignore[reportArgumentType]
        narrowed = []
        for result, val in zip(op.results, outs, strict=True):
            element = _type(result).element_type
            if val.element != element and element in _LOW_FLOATS:
                source = ctx.b.materialize(val, val.channels_last)
                if element == BFloat16Type():
                    source = _bf16_rounded(ctx, source)
                val = ctx.new(ctx.b.op("cast", [source], tensor_type(val.physical_shape, element)), val.shape,
                              element, val.channels_last)
            narrowed.append(val)
        return narrowed

    return run


# Kinds whose f16/bf16 form runs in the storage type: exact there (they move, select or
# compare elements) or conversions themselves.
_STORAGE_KINDS = (*_DATA_MOVEMENT, "cast", "concat", "max_pool", "interp", "upsample", "relu", "gather")


def _widened(ctx: Context, val: Val) -> Val:
    """`val` as f32 (exact from f16 and bf16); other values as they are."""
    if val.const is not None:
        floating = val.const.dtype.kind == "f" or val.const.dtype == ml_dtypes.bfloat16
        return Val(val.shape, F32, const=val.const.astype(np.float32)) if floating else val
    if val.element not in _LOW_FLOATS or val.value is None:
        return val
    source = ctx.b.materialize(val, val.channels_last)
    return ctx.new(ctx.b.op("cast", [source], tensor_type(val.physical_shape, F32)), val.shape, F32,
                   val.channels_last)


def _bf16_rounded(ctx: Context, x: SSAValue) -> SSAValue:
    """f32 `x` rounded to bf16's 8 significant bits, still in f32 (Veltkamp's split:
    t = x * (2^16 + 1), x rounded = t - (t - x)). IREE's CPU pipeline removes a cast to
    bf16 and back between two fused elementwise ops (ConvertBf16ArithToF32), so a plain
    tosa.cast would not round there; the cast that follows this is exact. Exact for
    |x| < 2^112 (t overflows beyond)."""
    kind = _type(x)
    rank = len(kind.get_shape())
    t = ctx.b.op("mul", [x, ctx.b.const(np.full((1,) * rank, 65537.0, np.float32)),
                         ctx.b.const(np.zeros(1, np.int8))], kind)
    return ctx.b.op("sub", [t, ctx.b.op("sub", [t, x], kind)], kind)


class _WideOp:
    """An op seen with f32 results where it has f16 or bf16 ones."""

    def __init__(self, op: Operation):
        self.name = op.name
        self.results = [_Result(tensor_type(_type(r).get_shape(), F32)) if isinstance(r.type, TensorType)
                        and r.type.element_type in _LOW_FLOATS else r for r in op.results]


def _float(kind: str) -> Rule:
    return _float_only(RULES[kind], kind)


def _on_codes(fn: Rule) -> Rule:
    def run(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
        if not any(_quantized(v) for v in op.results):
            return fn(ctx, op, inputs, attrs)
        return fn(ctx, _CodesOp(op), inputs, attrs)  # pyright: ignore[reportArgumentType]

    return run


# -- building blocks -----------------------------------------------------------------------------


def _zp(ctx: Context, value: int, element: Attribute = I8) -> SSAValue:
    dtype = np.int8 if element == I8 else np.int32
    return ctx.b.const(np.array([value], dtype))


def _tosa_scale(multiplier: int, shift: int, op: Operation) -> tuple[int, int]:
    """(multiplier, shift) in TOSA's ranges (0 <= m < 2^31, 2 <= shift <= 62) computing the
    same v * m / 2^shift rounding: a shift of 63 drops the multiplier's last bit (every i32
    value rounds to 0 either way); a shift below 2 scales the multiplier up."""
    if multiplier < 0:
        raise ExportError(f"{op.name}: a negative multiplier ({multiplier}) does not export to tosa.rescale")
    while shift > 62:
        multiplier >>= 1
        shift -= 1
    if shift < 2:
        multiplier <<= 2 - shift
        shift = 2
        if multiplier >= 1 << 31:  # a factor >= 2^29: any nonzero value saturates, as in the chip
            multiplier = (1 << 31) - 1
    return multiplier, shift


def rescale(ctx: Context, x: SSAValue, out: Attribute, multipliers: Sequence[int], shifts: Sequence[int],
            in_zp: int, out_zp: int, op: Operation, axis: int = -1) -> SSAValue:
    """`tosa.rescale` of `x` to element `out`: one factor, or one per channel of `x`'s
    axis `axis` (tosa.rescale takes them along the last axis: another axis is transposed
    there and back)."""
    count = max(len(multipliers), len(shifts))
    rank = len(_type(x).get_shape())
    axis %= max(rank, 1)
    if count > 1 and axis != rank - 1:
        perm = [*(a for a in range(rank) if a != axis), axis]
        inverse = [perm.index(a) for a in range(rank)]
        moved = rescale(ctx, ctx.b.transpose(x, perm), out, multipliers, shifts, in_zp, out_zp, op)
        return ctx.b.transpose(moved, inverse)
    pairs = [_tosa_scale(int(multipliers[i % len(multipliers)]), int(shifts[i % len(shifts)]), op)
             for i in range(count)]
    in_element = _type(x).element_type
    operands = [x, ctx.b.const(np.array([m for m, _ in pairs], np.int32)),
                ctx.b.const(np.array([s for _, s in pairs], np.int8)),
                _zp(ctx, in_zp, I8 if in_element == I8 else I32), _zp(ctx, out_zp, I8 if out == I8 else I32)]
    return ctx.b.op("rescale", operands, tensor_type(_type(x).get_shape(), out),
                    scale32=boolean(True), rounding_mode=RoundingModeAttr(RoundingMode.SINGLE_ROUND),
                    per_channel=boolean(count > 1), input_unsigned=boolean(False), output_unsigned=boolean(False))


def _to_i32(ctx: Context, x: SSAValue, zp: int, op: Operation) -> SSAValue:
    """x - zp as i32 (exact: a rescale by 2^30 / 2^30)."""
    return rescale(ctx, x, I32, [1 << 30], [30], zp, 0, op)


def _relu(ctx: Context, y: SSAValue, zp: int, attrs: dict[str, Any]) -> SSAValue:
    if not attrs.get("do_relu"):
        return y
    return ctx.b.op("clamp", [y], y.type, min_val=IntegerAttr(zp, I8), max_val=IntegerAttr(127, I8))


def _per_channel_const(values: Sequence[int] | np.ndarray, dtype: Any, rank: int, axis: int) -> np.ndarray:
    shape = [1] * rank
    shape[axis] = -1
    return np.asarray(values, dtype).reshape(shape)


def _physical_axis(val: Val, axis: int) -> int:
    axis %= max(val.rank, 1)
    return NHWC.index(axis) if val.channels_last and val.rank == 4 else axis


def _channel_axis(attrs: dict[str, Any], rank: int) -> int:
    return int(attrs.get("channel_axis", 1) or 1) % max(rank, 1)


def _mul_i32(ctx: Context, a: SSAValue, b: SSAValue, shape: Sequence[int]) -> SSAValue:
    return ctx.b.op("mul", [a, b, ctx.b.const(np.zeros(1, np.int8))], tensor_type(shape, I32))


# -- convolution-like ----------------------------------------------------------------------------


def _trimmed(size: int, kernel: int, before: int, after: int, stride: int, dilation: int) -> tuple[int, int]:
    """TOSA's divisibility rule met without changing the output (as the float conv rule):
    the end padding less the remainder, and the input rows to crop when that is not enough."""
    remainder = (size - 1 + before + after - (kernel - 1) * dilation) % stride
    trim = min(after, remainder)
    return after - trim, remainder - trim


def _conv_sum(ctx: Context, op: Operation, x: Val, weight: np.ndarray, bias: np.ndarray, group: int,
              kernel: Sequence[int], strides: Sequence[int], pads: Sequence[int], dilations: Sequence[int],
              out_shape: Sequence[int], x_zp: int) -> SSAValue:
    """The i32 sums of a grouped 2-D convolution of i8 `x` (zero point `x_zp`) with i8 OIHW
    `weight` plus `bias`, channels-last [N, OH, OW, C_out]; `pads` is ONNX's [t, l, b, r]."""
    tosa_pad = [pads[0], pads[2], pads[1], pads[3]]
    crop = [0, 0]
    for i in range(2):
        tosa_pad[2 * i + 1], crop[i] = _trimmed(x.shape[2 + i], kernel[i], tosa_pad[2 * i], tosa_pad[2 * i + 1],
                                                strides[i], dilations[i])
    if any(p < 0 for p in tosa_pad):
        raise ExportError(f"{op.name}: negative padding does not export to TOSA")
    source = ctx.b.channels_last(x)
    channels = x.shape[1]
    in_h, in_w = x.shape[2] - crop[0], x.shape[3] - crop[1]
    if any(crop):
        kept = [x.shape[0], in_h, in_w, channels]
        source = ctx.b.op("slice", [source, ctx.b.shape([0, 0, 0, 0]), ctx.b.shape(kept)], tensor_type(kept, I8))
    out_channels = out_shape[1]
    physical = [out_shape[0], out_shape[2], out_shape[3], out_channels]
    props = {"pad": array_i64(tosa_pad), "stride": array_i64(strides), "dilation": array_i64(dilations),
             "acc_type": I32}
    zps = [_zp(ctx, x_zp), _zp(ctx, 0)]
    if group == 1:
        w_arr = ctx.b.const(np.ascontiguousarray(weight.transpose(0, 2, 3, 1)).astype(np.int8))
        return ctx.b.op("conv2d", [source, w_arr, ctx.b.const(bias), *zps], tensor_type(physical, I32), **props)
    if group == channels and weight.shape[1] == 1:  # depthwise: [C*M, 1, KH, KW] -> [KH, KW, C, M]
        m = out_channels // channels
        w_arr = ctx.b.const(np.ascontiguousarray(
            weight.reshape(channels, m, *weight.shape[2:]).transpose(2, 3, 0, 1)).astype(np.int8))
        return ctx.b.op("depthwise_conv2d", [source, w_arr, ctx.b.const(bias), *zps], tensor_type(physical, I32),
                        **props)
    per_in, per_out = channels // group, out_channels // group
    parts = []
    for g in range(group):
        piece = ctx.b.op("slice", [source, ctx.b.shape([0, 0, 0, g * per_in]),
                                   ctx.b.shape([x.shape[0], in_h, in_w, per_in])],
                         tensor_type([x.shape[0], in_h, in_w, per_in], I8))
        w_arr = ctx.b.const(np.ascontiguousarray(weight[g * per_out:(g + 1) * per_out].transpose(0, 2, 3, 1)))
        parts.append(ctx.b.op("conv2d", [piece, w_arr, ctx.b.const(bias[g * per_out:(g + 1) * per_out]), *zps],
                              tensor_type([*physical[:3], per_out], I32), **props))
    return ctx.b.op("concat", parts, tensor_type(physical, I32), axis=int32(3))


def _constant(op: Operation, val: Val | None, what: str) -> np.ndarray:
    if val is None or val.const is None:
        raise ExportError(f"{op.name}: its {what} must be a weight to export to TOSA")
    return val.const


def _present(inputs: Sequence[Val], index: int) -> Val | None:
    if index >= len(inputs):
        return None
    val = inputs[index]
    return None if val.rank == 0 and val.const is None and val.value is None else val


def _requantized(ctx: Context, op: Operation, acc: SSAValue, attrs: dict[str, Any], out_shape: Sequence[int],
                 channels_last: bool) -> Val:
    zo = _output_zp(op, attrs)
    y = rescale(ctx, acc, I8, attrs.get("multiplier") or [1], attrs.get("rshift") or [0], 0, zo, op)
    return ctx.new(_relu(ctx, y, zo, attrs), out_shape, I8, channels_last)


@tpu_rule("conv")
def conv(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    if not _quantized(op.operands[0]):
        return _float("conv")(ctx, op, inputs, attrs)
    x, w = inputs[0], inputs[1]
    if len(attrs["kernel_shape"]) != 2:
        raise ExportError(f"{op.name}: only 2-D INT8 convolutions export to TOSA")
    out_shape = _shape(op)
    b = _present(inputs, 2)
    bias = _constant(op, b, "bias").astype(np.int32) if b is not None else np.zeros(out_shape[1], np.int32)
    acc = _conv_sum(ctx, op, x, _constant(op, w, "filter"), bias, int(attrs.get("group", 1)),
                    list(attrs["kernel_shape"]), list(attrs.get("strides") or [1, 1]),
                    list(attrs.get("pads") or [0, 0, 0, 0]), list(attrs.get("dilations") or [1, 1]),
                    out_shape, _input_zp(op, attrs, 0))
    return [_requantized(ctx, op, acc, attrs, out_shape, True)]


@tpu_rule("deconv")
def deconv(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """`tosa.transpose_conv2d` of i8 x (its zero point) and i8 weights summed in i32 with
    the i32 bias, then the per-channel rescale; dilation and groups as the float rule."""
    if not _quantized(op.operands[0]):
        return _float("deconv")(ctx, op, inputs, attrs)
    x = inputs[0]
    if len(attrs["kernel_shape"]) != 2:
        raise ExportError(f"{op.name}: only 2-D INT8 deconvolutions export to TOSA")
    out_shape = _shape(op)
    weight = _constant(op, inputs[1], "filter").astype(np.int8)  # [C_in, C_out / group, KH, KW]
    dilations = list(attrs.get("dilations") or [1, 1])
    if any(d != 1 for d in dilations):
        kh, kw = weight.shape[2:]
        dilated = np.zeros((*weight.shape[:2], (kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1), np.int8)
        dilated[:, :, ::dilations[0], ::dilations[1]] = weight
        weight = dilated
    b = _present(inputs, 2)
    bias = _constant(op, b, "bias").astype(np.int32) if b is not None else np.zeros(out_shape[1], np.int32)
    pads = list(attrs.get("pads") or [0, 0, 0, 0])
    extra = list(attrs.get("output_padding") or [0, 0])  # grows the bottom/right edge
    out_pad = [-pads[0], -pads[2] + extra[0], -pads[1], -pads[3] + extra[1]]
    props = {"out_pad": array_i64(out_pad), "stride": array_i64(list(attrs.get("strides") or [1, 1])),
             "acc_type": I32}
    zps = [_zp(ctx, _input_zp(op, attrs, 0)), _zp(ctx, 0)]
    physical = [out_shape[0], out_shape[2], out_shape[3], out_shape[1]]
    source = ctx.b.channels_last(x)
    group = int(attrs.get("group", 1))
    per_in, per_out = x.shape[1] // group, out_shape[1] // group
    parts = []
    for g in range(group):
        piece = source
        if group > 1:
            sizes = [x.shape[0], x.shape[2], x.shape[3], per_in]
            piece = ctx.b.op("slice", [source, ctx.b.shape([0, 0, 0, g * per_in]), ctx.b.shape(sizes)],
                             tensor_type(sizes, I8))
        w_g = weight[g * per_in:(g + 1) * per_in].transpose(1, 2, 3, 0)  # [C_out / group, KH, KW, C_in / group]
        parts.append(ctx.b.op("transpose_conv2d", [piece, ctx.b.const(np.ascontiguousarray(w_g)),
                                                   ctx.b.const(bias[g * per_out:(g + 1) * per_out]), *zps],
                              tensor_type([*physical[:3], per_out], I32), **props))
    acc = parts[0] if group == 1 else ctx.b.op("concat", parts, tensor_type(physical, I32), axis=int32(3))
    return [_requantized(ctx, op, acc, attrs, out_shape, True)]


@tpu_rule("scale")
def scale(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """(x - zx) * s[c] + bias[c] in i32 (i8 s, i32 bias along axis 1), rescaled per channel."""
    if not _quantized(op.operands[0]):
        return _float("scale")(ctx, op, inputs, attrs)
    x = inputs[0]
    if x.rank < 2:
        raise ExportError(f"{op.name}: an INT8 scale of a rank-{x.rank} tensor does not export to TOSA")
    axis = _physical_axis(x, 1)
    physical = list(x.physical_shape)
    acc = _mul_i32(ctx, _to_i32(ctx, ctx.b.materialize(x, x.channels_last), _input_zp(op, attrs, 0), op),
                   ctx.b.const(_per_channel_const(_constant(op, inputs[1], "scale"), np.int32, x.rank, axis)),
                   physical)
    b = _present(inputs, 2)
    if b is not None:
        bias = _per_channel_const(_constant(op, b, "bias"), np.int32, x.rank, axis)
        acc = ctx.b.op("add", [acc, ctx.b.const(bias)], tensor_type(physical, I32))
    zo = _output_zp(op, attrs)
    y = rescale(ctx, acc, I8, attrs.get("multiplier") or [1], attrs.get("rshift") or [0], 0, zo, op, axis)
    return [ctx.new(_relu(ctx, y, zo, attrs), x.shape, I8, x.channels_last)]


@tpu_rule("interp", "upsample")
def interp(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """Nearest-neighbour resizes only pick codes: the float rule on them (TOSA's resize
    takes i8 for NEAREST_NEIGHBOR). A linear resize of INT8 codes is refused."""
    kind = op.name.partition(".")[2]
    if not _quantized(op.results[0]):
        return _float(kind)(ctx, op, inputs, attrs)
    if kind == "interp" and attrs.get("mode") != "nearest":
        raise ExportError(f"{op.name}: an INT8 {attrs.get('mode')} resize does not export to TOSA (nearest does)")
    return _on_codes(RULES[kind])(ctx, op, inputs, attrs)


@tpu_rule("avg_pool")
def avg_pool(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """The window sum of x - zx (padding adds 0) as a depthwise convolution with unit
    weights, times the multiplier (which holds 1 / count)."""
    if not _quantized(op.operands[0]):
        return _float("avg_pool")(ctx, op, inputs, attrs)
    x = inputs[0]
    kernel = list(attrs["kernel_shape"])
    if len(kernel) != 2:
        raise ExportError(f"{op.name}: only 2-D INT8 pools export to TOSA")
    out_shape = _shape(op)
    strides = list(attrs.get("strides") or [1, 1])
    pads = list(attrs.get("pads") or [0, 0, 0, 0])
    # The end padding that gives the declared output size (ceil mode included).
    for i in range(2):
        pads[2 + i] = (out_shape[2 + i] - 1) * strides[i] + kernel[i] - x.shape[2 + i] - pads[i]
    channels = x.shape[1]
    ones = np.ones((channels, 1, *kernel), np.int8)
    acc = _conv_sum(ctx, op, x, ones, np.zeros(channels, np.int32), channels, kernel, strides, pads, [1, 1],
                    out_shape, _input_zp(op, attrs, 0))
    return [_requantized(ctx, op, acc, attrs, out_shape, True)]


@tpu_rule("max_pool")
def max_pool(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    if not _quantized(op.operands[0]):
        return _float("max_pool")(ctx, op, inputs, attrs)
    (y,) = RULES["max_pool"](ctx, _CodesOp(op), inputs, {**attrs, "do_relu": False})  # pyright: ignore[reportArgumentType]
    if not attrs.get("do_relu"):
        return [y]
    zo = int(attrs.get("output_zero_point", _zero_points(attrs)[0] if _zero_points(attrs) else 0) or 0)
    zo += _offset(op.results[0])
    return [ctx.new(_relu(ctx, ctx.b.materialize(y, y.channels_last), zo, attrs), y.shape, I8, y.channels_last)]


@tpu_rule("matmul")
def matmul(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """(a - za) @ (b - zb) + bias in i32, rescaled per output column (the last axis)."""
    if not _quantized(op.operands[0]):
        return _float("matmul")(ctx, op, inputs, attrs)
    a, b = inputs[0], inputs[1]
    bias = _present(inputs, 2)
    out_shape = _shape(op)
    a_log, b_log = _transposed(ctx, a, attrs.get("left_transpose")), _transposed(ctx, b, attrs.get("right_transpose"))
    m = a_log.shape[-2] if a_log.rank > 1 else 1
    k, n = a_log.shape[-1], b_log.shape[-1]
    batch = out_shape[:-2] if len(out_shape) >= 2 else ()
    count = int(np.prod(batch)) if batch else 1

    def as3(val: Val, rows: int, cols: int) -> SSAValue:
        lead = int(np.prod(val.shape[:-2])) if val.rank > 2 else 1
        if val.const is not None:
            array = np.broadcast_to(val.const.reshape(lead, rows, cols), (count, rows, cols))
            return ctx.b.const(np.ascontiguousarray(array).astype(np.int8))
        value = ctx.b.reshape(ctx.b.logical(val), [lead, rows, cols])
        if lead != count:
            value = ctx.b.op("tile", [value, ctx.b.shape([count, 1, 1])], tensor_type([count, rows, cols], I8))
        return value

    zps = [_zp(ctx, _input_zp(op, attrs, 0)), _zp(ctx, _input_zp(op, attrs, 1))]
    acc = ctx.b.op("matmul", [as3(a_log, m, k), as3(b_log, k, n), *zps], tensor_type([count, m, n], I32))
    if bias is not None:
        bias_array = _constant(op, bias, "bias").astype(np.int32).reshape(1, 1, -1)
        acc = ctx.b.op("add", [acc, ctx.b.const(np.ascontiguousarray(np.broadcast_to(bias_array, (1, 1, n))))],
                       tensor_type([count, m, n], I32))
    zo = _output_zp(op, attrs)
    y = rescale(ctx, acc, I8, attrs.get("multiplier") or [1], attrs.get("rshift") or [0], 0, zo, op)
    y = _relu(ctx, y, zo, attrs)
    return [ctx.new(ctx.b.reshape(y, out_shape), out_shape, I8)]


def _transposed(ctx: Context, val: Val, flag: Any) -> Val:
    if not flag:
        return val
    perm = list(range(val.rank))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    shape = tuple(val.shape[p] for p in perm)
    if val.const is not None:
        return Val(shape, val.element, const=val.const.transpose(perm))
    return ctx.new(ctx.b.transpose(ctx.b.logical(val), perm), shape, val.element)


# -- elementwise ---------------------------------------------------------------------------------


def _operands(ctx: Context, inputs: Sequence[Val], shape: Sequence[int]) -> tuple[list[SSAValue], bool]:
    """The inputs broadcast to `shape`'s rank, in one layout (channels-last when one is)."""
    rank = len(shape)
    last = rank == 4 and any(v.channels_last for v in inputs if v.const is None)
    return [ctx.b.materialize(ctx.expand(v, rank), last) for v in inputs], last


@tpu_rule("add", "sub")
def add(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """(a - za) * m0 + (b - zb) * m1 >> rshift (sub: the lowering negated m1), exactly in
    i32: with m = q * 2^16 + r, the sum is H * 2^16 + L for H = sum(v * q) and L = sum(v * r),
    and rounding it by 2^s (s > 16) equals rounding H + (L >> 16) by 2^(s - 16)."""
    if not _quantized(op.results[0]):
        return _float(op.name.partition(".")[2])(ctx, op, inputs, attrs)
    shape = _shape(op)
    (a, b), last = _operands(ctx, inputs, shape)
    physical = [shape[p] for p in NHWC] if last else list(shape)
    multipliers = [int(v) for v in attrs["multiplier"]]
    rshift = [int(v) for v in attrs.get("rshift") or [0]]
    if len(rshift) != 1:
        raise ExportError(f"{op.name}: an INT8 add with one shift per channel does not export to TOSA")
    shift = rshift[0]
    half = len(multipliers) // 2
    rank = len(shape)
    probe = Val(tuple(shape), I8, channels_last=last)
    axis = _physical_axis(probe, _channel_axis(attrs, rank))

    def factor(values: Sequence[int]) -> np.ndarray:
        if len(values) == 1:
            return np.full((1,) * rank, values[0], np.int32)
        return _per_channel_const(values, np.int32, rank, axis)

    centered = [_to_i32(ctx, a, _input_zp(op, attrs, 0), op), _to_i32(ctx, b, _input_zp(op, attrs, 1), op)]
    shapes = [_type(v).get_shape() for v in centered]
    if any(s != tuple(physical) for s in shapes) and any(
            len(set(d)) > 1 and 1 not in d for d in zip(*shapes, physical, strict=True)):
        raise ExportError(f"{op.name}: operands of shapes {shapes} do not broadcast")
    parts = (multipliers[:half], multipliers[half:])

    def weighted_sum(coefficients: Sequence[Sequence[int]]) -> SSAValue:
        terms = [_mul_i32(ctx, v, ctx.b.const(factor(c)), np.broadcast_shapes(_type(v).get_shape(), factor(c).shape))
                 for v, c in zip(centered, coefficients, strict=True)]
        return ctx.b.op("add", terms, tensor_type(physical, I32))

    largest = max(abs(m) for m in multipliers)
    if largest * 256 * 2 < 1 << 31:  # the whole sum fits i32
        total, shift_left = weighted_sum(parts), shift
    elif shift > 16:
        high = weighted_sum([[m >> 16 for m in p] for p in parts])
        lows = [[m & 0xFFFF for m in p] for p in parts]
        if any(any(p) for p in lows):
            low = ctx.b.op("arithmetic_right_shift", [weighted_sum(lows), ctx.b.const(np.full((1,) * rank, 16,
                                                                                               np.int32))],
                           tensor_type(physical, I32), round=boolean(False))
            high = ctx.b.op("add", [high, low], tensor_type(physical, I32))
        total, shift_left = high, shift - 16
    else:
        raise ExportError(f"{op.name}: an INT8 add with multiplier {largest} and shift {shift} does not export")
    zo = _output_zp(op, attrs)
    y = rescale(ctx, total, I8, [1], [shift_left], 0, zo, op)
    return [ctx.new(_relu(ctx, y, zo, attrs), shape, I8, last)]


@tpu_rule("mul")
def mul(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """(a - za) * (b - zb) in i32, rescaled by the multiplier (per channel when it has C)."""
    if not _quantized(op.results[0]):
        return _float("mul")(ctx, op, inputs, attrs)
    shape = _shape(op)
    (a, b), last = _operands(ctx, inputs, shape)
    physical = [shape[p] for p in NHWC] if last else list(shape)
    product = _mul_i32(ctx, _to_i32(ctx, a, _input_zp(op, attrs, 0), op), _to_i32(ctx, b, _input_zp(op, attrs, 1), op),
                       physical)
    multipliers = attrs.get("multiplier") or [1]
    axis = _physical_axis(Val(tuple(shape), I8, channels_last=last), _channel_axis(attrs, len(shape)))
    zo = _output_zp(op, attrs)
    y = rescale(ctx, product, I8, multipliers, attrs.get("rshift") or [0], 0, zo, op, axis)
    return [ctx.new(_relu(ctx, y, zo, attrs), shape, I8, last)]


@tpu_rule("lut")
def lut(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """`tosa.table`: TOSA reads entry code + 128 of an i8 input; the TPU table is indexed
    by the input's byte (two's complement for int8, the code for uint8)."""
    x, table = inputs
    entries = _constant(op, table, "table")
    index = np.arange(256)
    byte = index if _offset(op.operands[0]) else (index + 128) % 256  # TOSA index -> the TPU's
    values = (entries.astype(np.int64)[..., byte] + _offset(op.results[0])).astype(np.int8)
    source = ctx.b.materialize(x, x.channels_last)
    if entries.ndim == 1:
        out = ctx.b.op("table", [source, ctx.b.const(values)], tensor_type(x.physical_shape, I8))
        return [ctx.new(out, x.shape, I8, x.channels_last)]
    return [_lut_per_channel(ctx, x, source, values, _channel_axis(attrs, x.rank))]


def _lut_per_channel(ctx: Context, x: Val, source: SSAValue, values: np.ndarray, axis: int) -> Val:
    """One table per channel (rows of `values`, in TOSA's index order) as a `tosa.gather`
    from all rows laid end to end: entry code + 128 + 256 * channel."""
    shape = x.physical_shape
    count = int(np.prod(shape))
    start = _per_channel_const(np.arange(values.shape[0]) * 256 + 128, np.int32, x.rank, _physical_axis(x, axis))
    index = ctx.b.op("cast", [source], tensor_type(shape, I32))
    index = ctx.b.op("add", [index, ctx.b.const(start)], tensor_type(shape, I32))
    rows = ctx.b.const(values.reshape(1, -1, 1))
    picked = ctx.b.op("gather", [rows, ctx.b.reshape(index, [1, count])], tensor_type([1, count, 1], I8))
    return ctx.new(ctx.b.reshape(picked, shape), x.shape, I8, x.channels_last)


@tpu_rule("requant")
def requant(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """A rescale; per-channel factors along axis 1 of a rank-4 tensor rescale it in the
    channels-last layout (where a conv leaves it), along other axes transposed there."""
    x = inputs[0]
    multipliers, shifts = attrs["multiplier"], attrs["rshift"]
    axis = int(attrs.get("axis", 1)) % max(x.rank, 1)
    last = x.channels_last or (x.rank == 4 and axis == 1 and max(len(multipliers), len(shifts)) > 1)
    source = ctx.b.materialize(x, last)
    out_zp = int(attrs.get("zero_point", 0) or 0) + _offset(op.results[0])
    in_zp = _offset(op.operands[0]) if _quantized(op.operands[0]) else 0
    layout = Val(x.shape, I8, channels_last=last and x.rank == 4)
    y = rescale(ctx, source, I8, multipliers, shifts, in_zp, out_zp, op, _physical_axis(layout, axis))
    return [ctx.new(y, x.shape, I8, layout.channels_last)]


@tpu_rule("reduce")
def reduce(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """max/min compare codes as they are; sum and mean: the sum of x - zx in i32 over the
    axes, rescaled (per channel along axis 1 of the result when the op is)."""
    if not _quantized(op.operands[0]):
        return _float("reduce")(ctx, op, inputs, attrs)
    mode = attrs["mode"]
    if mode in ("max", "min"):
        return _on_codes(RULES["reduce"])(ctx, op, inputs, attrs)
    if mode not in ("sum", "mean"):
        raise ExportError(f"{op.name}: an INT8 reduce {mode} does not export to TOSA (sum, mean, max, min do)")
    x = inputs[0]
    axes = sorted(int(a) % x.rank for a in attrs["axes"]) if attrs.get("axes") else list(range(x.rank))
    total = ctx.new(_to_i32(ctx, ctx.b.materialize(x, x.channels_last), _input_zp(op, attrs, 0), op), x.shape, I32,
                    x.channels_last)
    for axis in axes:
        total = reduce_axis(ctx, "reduce_sum", total, axis)
    out_shape = _shape(op)
    acc = ctx.b.reshape(ctx.b.logical(total), out_shape)
    zo = _output_zp(op, attrs)
    y = rescale(ctx, acc, I8, attrs.get("multiplier") or [1], attrs.get("rshift") or [0], 0, zo, op,
                1 % max(len(out_shape), 1))
    return [ctx.new(_relu(ctx, y, zo, attrs), out_shape, I8)]


# -- data movement with requantization --------------------------------------------------------


@tpu_rule("concat")
def concat(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    if not _quantized(op.results[0]):
        return _float("concat")(ctx, op, inputs, attrs)
    shape = _shape(op)
    multipliers = attrs.get("multiplier")
    zo = _output_zp(op, attrs)
    if not multipliers:
        (y,) = RULES["concat"](ctx, _CodesOp(op), inputs, {**attrs, "do_relu": False})  # pyright: ignore[reportArgumentType]
        return [ctx.new(_relu(ctx, ctx.b.materialize(y, y.channels_last), zo, attrs), shape, I8, y.channels_last)]
    rshifts = attrs["rshift"]
    rank = len(shape)
    last = rank == 4 and any(v.channels_last for v in inputs if v.const is None)
    per = len(multipliers) // len(inputs)
    parts = []
    for i, val in enumerate(inputs):
        channel = _physical_axis(Val(val.shape, I8, channels_last=last), _channel_axis(attrs, rank))
        source = ctx.b.materialize(val, last)
        parts.append(rescale(ctx, source, I8, multipliers[i * per:(i + 1) * per], rshifts[i * per:(i + 1) * per],
                             _input_zp(op, attrs, i), zo, op, channel))
    axis = int(attrs["axis"]) % rank
    physical = [shape[p] for p in NHWC] if last else list(shape)
    out = ctx.b.op("concat", parts, tensor_type(physical, I8), axis=int32(NHWC.index(axis) if last else axis))
    return [ctx.new(_relu(ctx, out, zo, attrs), shape, I8, last)]


@tpu_rule("pad")
def pad(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    if not _quantized(op.results[0]):
        return _float("pad")(ctx, op, inputs, attrs)
    value = float(attrs.get("value", 0.0)) + _offset(op.results[0])
    return RULES["pad"](ctx, _CodesOp(op), inputs, {**attrs, "value": value})  # pyright: ignore[reportArgumentType]


# -- casts ---------------------------------------------------------------------------------------


@tpu_rule("cast")
def cast(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    source, target = op.operands[0], op.results[0]
    if not _quantized(source) and not _quantized(target):
        return _float("cast")(ctx, op, inputs, attrs)
    x = inputs[0]
    if _quantized(source) and _quantized(target):  # codes quantized as values (kernels.int8.cast), via f32
        codes = ctx.b.op("cast", [ctx.b.materialize(x, x.channels_last)], tensor_type(x.physical_shape, F32))
        if _offset(source):
            codes = _f32(ctx, "add", codes, np.full((1,) * x.rank, -_offset(source), np.float32), x.physical_shape)
        x = ctx.new(codes, x.shape, F32, x.channels_last)
    rank = x.rank
    scales = _present(inputs, 1)
    if scales is not None:
        axis = _physical_axis(x, _channel_axis(attrs, rank))
        scale: np.ndarray = _per_channel_const(_constant(op, scales, "scale").astype(np.float64), np.float64, rank,
                                               axis)
    else:
        scale = np.full((1,) * rank, float(attrs.get("scale", 1.0)))
    zp = int(attrs.get("zero_point", 0) or 0)
    if _quantized(target):
        return [_quantize(ctx, op, x, scale, zp + _offset(target), attrs.get("round_mode") or "half_away_from_zero")]
    codes = ctx.b.materialize(x, x.channels_last)
    real = ctx.b.op("cast", [codes], tensor_type(x.physical_shape, F32))
    shift = -(zp + _offset(source))  # the TPU code less its zero point, exact in f32
    if shift:
        real = _f32(ctx, "add", real, np.full((1,) * rank, shift, np.float32), x.physical_shape)
    real = _f32(ctx, "mul", real, scale.astype(np.float32), x.physical_shape)
    element = _type(target).element_type
    if element != F32:
        if element == BFloat16Type():
            real = _bf16_rounded(ctx, real)
        real = ctx.b.op("cast", [real], tensor_type(x.physical_shape, element))
    return [ctx.new(real, x.shape, element, x.channels_last)]


def _f32(ctx: Context, name: str, x: SSAValue, constant: np.ndarray, shape: Sequence[int]) -> SSAValue:
    extra = [ctx.b.const(np.zeros(1, np.int8))] if name == "mul" else []
    return ctx.b.op(name, [x, ctx.b.const(constant.astype(np.float32)), *extra], tensor_type(shape, F32))


def _quantize(ctx: Context, op: Operation, x: Val, scale: np.ndarray, zp: int, mode: str) -> Val:
    """sat(round(x * f32(1 / scale)) + zp) in float32, rounded as `mode` (kernels.quant)."""
    shape = x.physical_shape
    source = ctx.b.materialize(x, x.channels_last)
    if _type(source).element_type != F32:
        source = ctx.b.op("cast", [source], tensor_type(shape, F32))
    v = _f32(ctx, "mul", source, (1.0 / scale).astype(np.float32), shape)
    half = np.full((1,) * x.rank, 0.5, np.float32)
    up = ctx.b.op("floor", [_f32(ctx, "add", v, half, shape)], tensor_type(shape, F32))
    if mode == "half_up":
        rounded = up
    elif mode == "half_away_from_zero":  # ties of negative values round down
        down = ctx.b.op("ceil", [_f32(ctx, "sub", v, half, shape)], tensor_type(shape, F32))
        zero = ctx.b.const(np.zeros((1,) * x.rank, np.float32))
        negative = ctx.b.op("greater", [zero, v], tensor_type(shape, IntegerType(1)))
        rounded = ctx.b.op("select", [negative, down, up], tensor_type(shape, F32))
    else:
        raise ExportError(f"{op.name}: a quantizing cast rounding {mode} does not export to TOSA")
    if zp:
        rounded = _f32(ctx, "add", rounded, np.full((1,) * x.rank, zp, np.float32), shape)
    clamped = ctx.b.op("clamp", [rounded], tensor_type(shape, F32), min_val=float32(-128.0),
                       max_val=float32(127.0))
    out = ctx.b.op("cast", [clamped], tensor_type(shape, I8))
    return ctx.new(out, x.shape, I8, x.channels_last)
