"""TOP normalizations, softmax, reductions and the other whole-tensor ops -> TOSA."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.export.rules import (
    Context,
    ExportError,
    acc_type,
    const_array,
    is_none,
    op_kind,
    result_element,
    result_shape,
    rule,
)
from tpu_xdsl.export.tosa_builder import NHWC, Val, array_i64, int32, numpy_dtype, tensor_type

# -- normalizations and softmax ---------------------------------------------------------------


def reduce_axis(ctx: Context, name: str, x: Val, axis: int) -> Val:
    shape = list(x.shape)
    shape[axis] = 1
    physical_axis = NHWC.index(axis) if x.channels_last else axis
    physical = [shape[p] for p in NHWC] if x.channels_last else shape
    out = ctx.b.op(name, [ctx.b.materialize(x, x.channels_last)], tensor_type(physical, x.element),
                   axis=int32(physical_axis))
    return ctx.new(out, shape, x.element, x.channels_last)


@rule("softmax", "log_softmax")
def softmax(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    axis = int(attrs.get("axis", -1)) % x.rank
    shifted = ctx.elementwise("sub", [x, reduce_axis(ctx, "reduce_max", x, axis)], x.shape, x.element)
    e = ctx.unary("exp", shifted)
    total = reduce_axis(ctx, "reduce_sum", e, axis)
    if op_kind(op) == "log_softmax":
        return [ctx.elementwise("sub", [shifted, ctx.unary("log", total)], x.shape, x.element)]
    return [ctx.mul(e, ctx.unary("reciprocal", total), x.shape)]


@rule("layer_norm")
def layer_norm(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x, gamma, beta = inputs
    axis = int(attrs.get("axis", -1)) % x.rank
    axes = list(range(axis, x.rank))
    return [_normalize(ctx, x, axes, float(attrs.get("epsilon", 1e-5)), gamma, beta, trailing=True)]


@rule("instance_norm")
def instance_norm(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x, gamma, beta = inputs
    return [_normalize(ctx, x, list(range(2, x.rank)), float(attrs.get("epsilon", 1e-5)), gamma, beta,
                       trailing=False)]


def _normalize(ctx: Context, x: Val, axes: Sequence[int], eps: float, gamma: Val, beta: Val, trailing: bool) -> Val:
    count = int(np.prod([x.shape[a] for a in axes]))
    inv = ctx.scalar(1.0 / count, x.element, x.rank)
    total = x
    for axis in axes:
        total = reduce_axis(ctx, "reduce_sum", total, axis)
    centered = ctx.elementwise("sub", [x, ctx.mul(total, inv, total.shape)], x.shape, x.element)
    square = ctx.mul(centered, centered, x.shape)
    for axis in axes:
        square = reduce_axis(ctx, "reduce_sum", square, axis)
    var = ctx.elementwise("add", [ctx.mul(square, inv, square.shape), ctx.scalar(eps, x.element, x.rank)],
                          square.shape, x.element)
    y = ctx.mul(centered, ctx.unary("rsqrt", var), x.shape)
    if trailing:
        g, b = gamma, beta
    else:
        shape = (1, x.shape[1]) + (1,) * (x.rank - 2)
        g = Val(shape, gamma.element, const=const_array(gamma).reshape(shape)) if gamma.const is not None else gamma
        b = Val(shape, beta.element, const=const_array(beta).reshape(shape)) if beta.const is not None else beta
    y = ctx.mul(y, g, x.shape) if not is_none(g) else y
    return ctx.elementwise("add", [y, b], x.shape, x.element) if not is_none(b) else y


@rule("reduce")
def reduce(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    mode = attrs["mode"]
    axes = sorted(int(a) % x.rank for a in attrs["axes"])
    names = {"sum": "reduce_sum", "mean": "reduce_sum", "max": "reduce_max", "min": "reduce_min",
             "prod": "reduce_product", "l1": "reduce_sum", "l2": "reduce_sum", "sum_square": "reduce_sum",
             "log_sum_exp": "reduce_sum"}
    if mode not in names:
        raise ExportError(f"{op.name}: reduce mode {mode} does not export to TOSA")
    source, peak = x, None
    if mode == "l1":
        source = ctx.unary("abs", x)
    elif mode in ("l2", "sum_square"):
        source = ctx.mul(x, x, x.shape)
    elif mode == "log_sum_exp":  # log(sum(exp(x - peak))) + peak, as the interpreter computes it
        peak = x
        for axis in axes:
            peak = reduce_axis(ctx, "reduce_max", peak, axis)
        source = ctx.unary("exp", ctx.elementwise("sub", [x, peak], x.shape, x.element))
    y = source
    for axis in axes:
        y = reduce_axis(ctx, names[mode], y, axis)
    if mode == "l2":
        y = ctx.elementwise("pow", [y, ctx.scalar(0.5, x.element, x.rank)], y.shape, x.element)
    if peak is not None:
        y = ctx.elementwise("add", [ctx.unary("log", y), peak], y.shape, x.element)
    if mode == "mean":
        count = int(np.prod([x.shape[a] for a in axes]))
        y = ctx.mul(y, ctx.scalar(1.0 / count, x.element, x.rank), y.shape)
    out_shape = result_shape(op)
    if tuple(out_shape) != y.shape:
        y = ctx.new(ctx.b.reshape(ctx.b.logical(y), out_shape), out_shape, x.element)
    return [y]


# -- arg, topk, lrn, group norm ------------------------------------------------------------------


def _argmax(ctx: Context, value: SSAValue, shape: Sequence[int], axis: int) -> SSAValue:
    """tosa.argmax of a logical value along `axis`, the axis kept as 1 (i32 indices)."""
    kept = [1 if a == axis else d for a, d in enumerate(shape)]
    dropped = [d for a, d in enumerate(shape) if a != axis]
    index = ctx.b.op("argmax", [value], tensor_type(dropped, IntegerType(32)), axis=int32(axis))
    return ctx.b.reshape(index, kept)


def _negated(ctx: Context, x: Val) -> SSAValue:
    zp = ctx.b.zero_point(x.element)
    return ctx.b.op("negate", [ctx.b.logical(x), zp, zp], tensor_type(x.shape, x.element))


def _to_element(ctx: Context, value: SSAValue, shape: Sequence[int], element) -> Val:
    if element != IntegerType(32):
        value = ctx.b.op("cast", [value], tensor_type(shape, element))
    return ctx.new(value, shape, element)


@rule("arg")
def arg(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """tosa.argmax (the first index of the largest); argmin is argmax of -x, and the last index
    is size - 1 - the first index in the reversed tensor."""
    x = inputs[0]
    axis = int(attrs["axis"]) % x.rank
    value = ctx.b.logical(x) if attrs["mode"] == "max" else _negated(ctx, x)
    last = bool(attrs.get("select_last_index"))
    if last:
        value = ctx.b.op("reverse", [value], tensor_type(x.shape, x.element), axis=int32(axis))
    index = _argmax(ctx, value, x.shape, axis)
    kept = [1 if a == axis else d for a, d in enumerate(x.shape)]
    if last:
        top = ctx.b.const(np.full([1] * x.rank, x.shape[axis] - 1, np.int32))
        index = ctx.b.op("sub", [top, index], tensor_type(kept, IntegerType(32)))
    out_shape = result_shape(op)
    return [_to_element(ctx, ctx.b.reshape(index, out_shape), out_shape, result_element(op))]


@rule("topk")
def topk(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """k rounds of argmax: each takes the largest remaining value and its first index (ONNX's
    order for equal values), then masks that position with -inf. Inputs holding -inf
    themselves may order their indices differently."""
    x = inputs[0]
    k = int(attrs["k"])
    axis = int(attrs.get("axis", -1)) % x.rank
    largest = bool(attrs.get("largest", True))
    current = ctx.b.logical(x) if largest else _negated(ctx, x)
    kept = [1 if a == axis else d for a, d in enumerate(x.shape)]
    iota_shape = [x.shape[axis] if a == axis else 1 for a in range(x.rank)]
    iota = ctx.b.const(np.arange(x.shape[axis], dtype=np.int32).reshape(iota_shape))
    dtype = numpy_dtype(x.element)
    floor = -np.inf if dtype.kind == "f" else -(2 ** (8 * dtype.itemsize - 1))
    lowest = ctx.b.const(np.full([1] * x.rank, floor, dtype))
    full = tensor_type(x.shape, x.element)
    values, indices = [], []
    for _ in range(k):
        index = _argmax(ctx, current, x.shape, axis)
        values.append(ctx.b.op("reduce_max", [current], tensor_type(kept, x.element), axis=int32(axis)))
        indices.append(index)
        chosen = ctx.b.op("equal", [iota, index], tensor_type(x.shape, IntegerType(1)))
        current = ctx.b.op("select", [chosen, lowest, current], full)
    out_shape = result_shape(op)
    value = ctx.b.op("concat", values, tensor_type(out_shape, x.element), axis=int32(axis))
    if not largest:
        zp = ctx.b.zero_point(x.element)
        value = ctx.b.op("negate", [value, zp, zp], tensor_type(out_shape, x.element))
    index = ctx.b.op("concat", indices, tensor_type(out_shape, IntegerType(32)), axis=int32(axis))
    return [ctx.new(value, out_shape, x.element), _to_element(ctx, index, out_shape, result_element(op, 1))]


@rule("lrn")
def lrn(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """The sum of squares over each channel's window is a 1x1 convolution with a 0/1 band
    matrix; then x * (bias + alpha / size * sum) ** -beta."""
    x = inputs[0]
    size = int(attrs["size"])
    alpha, beta, bias = (float(attrs.get(k, d)) for k, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    channels = x.shape[1]
    before = (size - 1) // 2
    band = np.zeros((channels, channels, 1, 1), np.float32)
    for c in range(channels):
        band[c, max(0, c - before):min(channels, c - before + size), 0, 0] = 1
    four = x
    if x.rank != 4:  # [N, C, rest] as [N, C, rest, 1]
        shape4 = (x.shape[0], channels, int(np.prod(x.shape[2:])), 1)
        four = ctx.new(ctx.b.reshape(ctx.b.logical(x), shape4), shape4, x.element)
    square = ctx.mul(four, four, four.shape)
    zp = ctx.b.zero_point(x.element)
    physical = [square.shape[p] for p in NHWC]
    total = ctx.b.op("conv2d", [ctx.b.channels_last(square), ctx.b.const(band.transpose(0, 2, 3, 1)),
                                ctx.b.const(np.zeros(channels, np.float32)), zp, zp], tensor_type(physical, x.element),
                     pad=array_i64([0, 0, 0, 0]), stride=array_i64([1, 1]), dilation=array_i64([1, 1]),
                     acc_type=acc_type(x.element))
    summed = ctx.new(total, square.shape, x.element, channels_last=True)
    base = ctx.elementwise("add", [ctx.mul(summed, ctx.scalar(alpha / size, x.element, 4), summed.shape),
                                   ctx.scalar(bias, x.element, 4)], summed.shape, x.element)
    factor = ctx.elementwise("pow", [base, ctx.scalar(-beta, x.element, 4)], base.shape, x.element)
    y = ctx.mul(four, factor, four.shape)
    if x.rank != 4:
        y = ctx.new(ctx.b.reshape(ctx.b.logical(y), x.shape), x.shape, x.element)
    return [y]


@rule("group_norm")
def group_norm(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """Normalized as [N, groups, rest], then scaled and shifted per channel (a per-group scale,
    ONNX opset 18's, repeated over the group's channels)."""
    x, scale, bias = inputs
    groups = int(attrs["num_groups"])
    channels = x.shape[1]
    grouped = (x.shape[0], groups, int(np.prod(x.shape[1:])) // groups)
    flat = ctx.new(ctx.b.reshape(ctx.b.logical(x), grouped), grouped, x.element)
    none = Val((), x.element)
    y3 = _normalize(ctx, flat, [2], float(attrs.get("epsilon", 1e-5)), none, none, trailing=True)
    y = ctx.new(ctx.b.reshape(ctx.b.logical(y3), x.shape), x.shape, x.element)
    per_channel = (1, channels) + (1,) * (x.rank - 2)
    for param, name in ((scale, "mul"), (bias, "add")):
        if is_none(param):
            continue
        if param.const is None:
            raise ExportError(f"{op.name}: a scale or bias computed at run time does not export")
        array = param.const.reshape(-1)
        if array.size == groups and groups != channels:
            array = np.repeat(array, channels // groups)
        p = Val(per_channel, x.element, const=array.reshape(per_channel))
        y = ctx.mul(y, p, x.shape) if name == "mul" else ctx.elementwise("add", [y, p], x.shape, x.element)
    return [y]
