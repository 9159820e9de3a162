"""Import rules that cut and pad tensors: Slice, Pad."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.ir import SSAValue

from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule
from tpu_xdsl.frontend.rules.elementwise import (
    constant,
)
from tpu_xdsl.frontend.rules.tensor.common import (
    const_input,
    data_dtype,
    data_value,
    ints_of,
    moved,
    norm_axes,
    top_dtype,
)


def _slice(
    ctx: NodeContext,
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int] | None,
    steps: Sequence[int] | None,
) -> None:
    """Normalize to one entry per sliced axis: axis >= 0, start clamped into the
    dim, end clamped to [0, dim] (step > 0) or [-1, dim - 1] (step < 0); an end
    before index 0 is written -dim-1, which ONNX's rule wraps to -1."""
    source = ctx.shape(0)
    n = len(starts)
    if len(ends) != n:
        raise ctx.error(f"starts {list(starts)} and ends {list(ends)} differ in length")
    axes = norm_axes(ctx, range(n) if axes is None else axes, len(source))
    steps = [1] * n if steps is None else list(steps)
    if len(axes) != n or len(steps) != n:
        raise ctx.error("starts, ends, axes and steps must have the same length")
    if 0 in steps:
        raise ctx.error(f"steps {steps} must not hold 0")
    target = list(source)
    norm_starts, norm_ends = [], []
    for axis, start, end, step in zip(axes, starts, ends, steps):
        dim = source[axis]
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        target[axis] = len(range(start, end, step))
        norm_starts.append(start)
        norm_ends.append(-dim - 1 if end < 0 else end)
    attrs = {"starts": norm_starts, "ends": norm_ends, "axes": axes, "steps": steps}
    moved(ctx, "slice", [data_value(ctx)], attrs, target)


@onnx_rule("Slice", until=9)
def slice_attr(ctx: NodeContext) -> None:
    """Before opset 10: starts, ends and axes are attributes, no steps."""
    axes = ctx.attr("axes")
    _slice(
        ctx,
        ints_of(ctx.attr("starts", [])),
        ints_of(ctx.attr("ends", [])),
        None if axes is None else ints_of(axes),
        None,
    )


@onnx_rule("Slice", since=10)
def slice_(ctx: NodeContext) -> None:
    starts = ints_of(ctx.require_const(1, "starts"))
    ends = ints_of(ctx.require_const(2, "ends"))
    axes = const_input(ctx, 3, "axes")
    steps = const_input(ctx, 4, "steps")
    _slice(
        ctx,
        starts,
        ends,
        None if axes is None else ints_of(axes),
        None if steps is None else ints_of(steps),
    )


_PAD_MODES = ("constant", "reflect", "edge", "wrap")


def _pad(
    ctx: NodeContext,
    pads: Sequence[int],
    value: float | SSAValue,
    axes: Sequence[int] | None = None,
) -> None:
    """Pads are begins then ends, per axis of `axes` (all dims by default);
    negative pads crop. A run-time constant value (a scalar tensor) fills the
    border through a top.where with a constant mask of where the data lands."""
    source = ctx.shape(0)
    rank = len(source)
    mode = ctx.attr("mode", "constant")
    if mode not in _PAD_MODES or (mode == "wrap" and ctx.opset < 19):
        raise ctx.error(
            f"mode '{mode}' is not supported (constant, reflect, edge; wrap from opset 19)"
        )
    axes = list(range(rank)) if axes is None else norm_axes(ctx, axes, rank)
    if len(pads) != 2 * len(axes):
        raise ctx.error(
            f"pads {list(pads)} must have {2 * len(axes)} entries (begins then ends)"
        )
    full = [0] * (2 * rank)
    for i, axis in enumerate(axes):
        full[axis], full[rank + axis] = int(pads[i]), int(pads[len(axes) + i])
    target = [d + full[i] + full[rank + i] for i, d in enumerate(source)]
    if min(target, default=0) < 0:
        raise ctx.error(f"pads {full} crop the input {list(source)} below size 0")
    if mode in ("reflect", "edge", "wrap") and any(
        source[i] == 0 and (full[i] > 0 or full[rank + i] > 0) for i in range(rank)
    ):
        raise ctx.error(f"mode '{mode}' cannot pad an empty dim")
    if not isinstance(value, SSAValue):
        attrs = {"pads": full, "mode": mode, "value": float(value)}
        moved(ctx, "pad", [data_value(ctx)], attrs, target)
        return
    dtype = top_dtype(data_dtype(ctx))
    attrs = {"pads": full, "mode": mode, "value": 0.0}
    (padded,) = ctx.emit("pad", [data_value(ctx)], attrs, shapes_=[target], dtypes=[dtype])
    kept = [d + min(full[i], 0) + min(full[rank + i], 0) for i, d in enumerate(source)]
    widths = [(max(full[i], 0), max(full[rank + i], 0)) for i in range(rank)]
    mask = np.pad(np.ones(kept, dtype=bool), widths)
    ones = [1] * rank
    (fill,) = ctx.emit(
        "reshape", [value], {"shape": ones}, shapes_=[ones], dtypes=[dtype]
    )
    operands = [constant(ctx, mask, "mask", dtype=None), padded, fill]
    moved(ctx, "where", operands, None, target)


@onnx_rule("Pad", until=10)
def pad_attr(ctx: NodeContext) -> None:
    """Before opset 11: `pads` (opset 1: `paddings`) and `value` are attributes."""
    pads = ctx.attr("pads", ctx.attr("paddings"))
    if pads is None:
        raise ctx.error("the 'pads' attribute is required")
    _pad(ctx, ints_of(pads), float(ctx.attr("value", 0.0)))


@onnx_rule("Pad", since=11)
def pad(ctx: NodeContext) -> None:
    """Inputs pads, constant_value (optional scalar) and, from opset 18, axes."""
    pads = ints_of(ctx.require_const(1, "pads"))
    axes = const_input(ctx, 3, "axes") if ctx.opset >= 18 else None
    value: float | SSAValue = 0.0
    if ctx.has_input(2):
        if math.prod(ctx.shape(2)) != 1:
            raise ctx.error(
                f"constant_value must be a scalar, got {list(ctx.shape(2))}"
            )
        const = ctx.const(2)
        if const is not None:
            value = float(const.reshape(()))
        elif ctx.attr("mode", "constant") == "constant":
            value = data_value(ctx, 2)
    _pad(ctx, pads, value, None if axes is None else ints_of(axes))
