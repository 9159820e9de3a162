"""TOP normalizations, softmax, reductions and the other whole-tensor ops -> TOSA."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.ir import Operation

from tpu_xdsl.export.rules import (
    Context,
    ExportError,
    const_array,
    is_none,
    op_kind,
    result_shape,
    rule,
)
from tpu_xdsl.export.tosa_builder import NHWC, Val, int32, tensor_type

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
             "prod": "reduce_product"}
    if mode not in names:
        raise ExportError(f"{op.name}: reduce mode {mode} does not export to TOSA")
    y = x
    for axis in axes:
        y = reduce_axis(ctx, names[mode], y, axis)
    if mode == "mean":
        count = int(np.prod([x.shape[a] for a in axes]))
        y = ctx.mul(y, ctx.scalar(1.0 / count, x.element, x.rank), y.shape)
    out_shape = result_shape(op)
    if tuple(out_shape) != y.shape:
        y = ctx.new(ctx.b.reshape(ctx.b.logical(y), out_shape), out_shape, x.element)
    return [y]
