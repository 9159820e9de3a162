"""INT8 TPU ops -> TOSA, the rules of ops that compute (convolution-like, elementwise, lookup
tables, requantization, reductions, concatenation): registered in `int8_rules.TPU_RULES`,
whose docstring says how each maps; the building blocks (rescale, zero points, the i32
sums) live there too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.export.int8_rules import (
    I8,
    I32,
    _channel_axis,
    _CodesOp,
    _constant,
    _float,
    _input_zp,
    _mul_i32,
    _offset,
    _on_codes,
    _output_zp,
    _per_channel_const,
    _physical_axis,
    _present,
    _quantized,
    _relu,
    _shape,
    _to_i32,
    _type,
    _zero_points,
    _zp,
    rescale,
    tpu_rule,
)
from tpu_xdsl.export.rules import RULES, Context, ExportError, swap_last_two
from tpu_xdsl.export.rules_conv import transpose_conv
from tpu_xdsl.export.rules_nn import reduce_axis
from tpu_xdsl.export.tosa_builder import NHWC, Val, array_i64, boolean, int32, tensor_type

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
    b = _present(inputs, 2)
    bias = _constant(op, b, "bias").astype(np.int32) if b is not None else np.zeros(out_shape[1], np.int32)
    zps = [_zp(ctx, _input_zp(op, attrs, 0)), _zp(ctx, 0)]
    acc = transpose_conv(ctx, x, weight, bias, attrs, out_shape, I32, zps)
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
    a_log = swap_last_two(ctx, a, attrs.get("left_transpose"))
    b_log = swap_last_two(ctx, b, attrs.get("right_transpose"))
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
