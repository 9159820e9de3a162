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

from tpu_xdsl.dialects.quant_types import is_quantized
from tpu_xdsl.dialects.tosa_attrs import RoundingMode, RoundingModeAttr
from tpu_xdsl.export.rules import RULES, Context, ExportError, Rule
from tpu_xdsl.export.tosa_builder import (
    NHWC,
    Val,
    boolean,
    float32,
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
                  "tile", "expand", "depth2space", "fold_taps")


def tpu_rule(*kinds: str):
    def register(fn: Rule) -> Rule:
        for kind in kinds:
            TPU_RULES[kind] = fn
        return fn

    return register


def tpu_rules() -> dict[str, Rule]:
    """The rule table of a TPU module: the float rules (refusing integer operands), the
    data-movement rules on i8 codes, and the INT8 rules of this file."""
    from tpu_xdsl.export import int8_rules_nn  # noqa: F401  (registers its rules; it imports this module)

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
        # INT8 codes (a mask held as int8 0 and 1 is no code: it carries no scale)
        if any(_quantized(v) and is_quantized(v.type) for v in (*op.operands, *op.results)):
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


def _constant(op: Operation, val: Val | None, what: str) -> np.ndarray:
    if val is None or val.const is None:
        raise ExportError(f"{op.name}: its {what} must be a weight to export to TOSA")
    return val.const


def _present(inputs: Sequence[Val], index: int) -> Val | None:
    if index >= len(inputs):
        return None
    val = inputs[index]
    return None if val.rank == 0 and val.const is None and val.value is None else val


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
