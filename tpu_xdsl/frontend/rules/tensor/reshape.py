"""Import rules that change a tensor's shape: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Transpose."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule
from tpu_xdsl.frontend.rules.tensor.common import (
    const_input,
    data_value,
    ints_of,
    moved,
    norm_axes,
)


@onnx_rule("Shape")
def shape(ctx: NodeContext) -> None:
    dims = np.array(ctx.shape(0), dtype=np.int64)
    start, end = ctx.attr("start", 0), ctx.attr("end", None)
    ctx.set_const(0, dims[start:end])


@onnx_rule("Size")
def size(ctx: NodeContext) -> None:
    ctx.set_const(0, np.array(int(np.prod(ctx.shape(0))), dtype=np.int64))


def _reshape(ctx: NodeContext, target: Sequence[int], allowzero: int) -> None:
    """0 copies the input dim (unless allowzero), -1 takes what is left."""
    source = ctx.shape(0)
    if not allowzero and any(d == 0 and i >= len(source) for i, d in enumerate(target)):
        raise ctx.error(
            f"shape {list(target)} copies a dim (0) beyond the input's rank {len(source)}"
        )
    resolved = [
        source[i] if d == 0 and not allowzero else int(d) for i, d in enumerate(target)
    ]
    if resolved.count(-1) > 1 or any(d < -1 for d in resolved):
        raise ctx.error(f"shape {list(target)} is not a valid target shape")
    total = math.prod(source)
    if -1 in resolved:
        known = math.prod(d for d in resolved if d != -1)
        if known == 0 or total % known:
            raise ctx.error(
                f"shape {list(target)} does not fit the input {list(source)}"
            )
        resolved[resolved.index(-1)] = total // known
    if math.prod(resolved) != total:
        raise ctx.error(f"shape {list(target)} does not fit the input {list(source)}")
    moved(ctx, "reshape", [data_value(ctx)], {"shape": resolved}, resolved)


@onnx_rule("Reshape", until=4)
def reshape_attr(ctx: NodeContext) -> None:
    """Before opset 5 the target shape is an attribute."""
    if not ctx.has_attr("shape"):
        raise ctx.error("the 'shape' attribute is required")
    _reshape(ctx, ints_of(ctx.attr("shape")), 0)


@onnx_rule("Reshape", since=5)
def reshape(ctx: NodeContext) -> None:
    _reshape(
        ctx, ints_of(ctx.require_const(1, "the target shape")), ctx.attr("allowzero", 0)
    )


@onnx_rule("Flatten")
def flatten(ctx: NodeContext) -> None:
    """2-D: the dims before `axis` and the dims from `axis` on (axis in [-r, r])."""
    source = ctx.shape(0)
    axis = ctx.attr("axis", 1)
    if not -len(source) <= axis <= len(source):
        raise ctx.error(f"axis {axis} is out of range for rank {len(source)}")
    axis = axis + len(source) if axis < 0 else axis
    target = [math.prod(source[:axis]), math.prod(source[axis:])]
    moved(ctx, "reshape", [data_value(ctx)], {"shape": target}, target)


def _squeeze(ctx: NodeContext, axes: Sequence[int] | None) -> None:
    """No axes: every size-1 dim."""
    source = ctx.shape(0)
    if axes is None:
        axes = [i for i, d in enumerate(source) if d == 1]
    axes = sorted(norm_axes(ctx, axes, len(source)))
    for a in axes:
        if source[a] != 1:
            raise ctx.error(
                f"cannot squeeze dim {a} of size {source[a]} (input shape {list(source)})"
            )
    target = [d for i, d in enumerate(source) if i not in axes]
    moved(ctx, "squeeze", [data_value(ctx)], {"axes": axes}, target)


@onnx_rule("Squeeze", until=12)
def squeeze_attr(ctx: NodeContext) -> None:
    axes = ctx.attr("axes")
    _squeeze(ctx, None if axes is None else ints_of(axes))


@onnx_rule("Squeeze", since=13)
def squeeze(ctx: NodeContext) -> None:
    axes = const_input(ctx, 1, "axes")
    _squeeze(ctx, None if axes is None else ints_of(axes))


def _unsqueeze(ctx: NodeContext, axes: Sequence[int]) -> None:
    """Axes count in the output's rank."""
    source = ctx.shape(0)
    rank = len(source) + len(axes)
    axes = sorted(norm_axes(ctx, axes, rank))
    rest = iter(source)
    target = [1 if i in axes else next(rest) for i in range(rank)]
    moved(ctx, "unsqueeze", [data_value(ctx)], {"axes": axes}, target)


@onnx_rule("Unsqueeze", until=12)
def unsqueeze_attr(ctx: NodeContext) -> None:
    if not ctx.has_attr("axes"):
        raise ctx.error("the 'axes' attribute is required")
    _unsqueeze(ctx, ints_of(ctx.attr("axes")))


@onnx_rule("Unsqueeze", since=13)
def unsqueeze(ctx: NodeContext) -> None:
    _unsqueeze(ctx, ints_of(ctx.require_const(1, "axes")))


@onnx_rule("Transpose")
def transpose(ctx: NodeContext) -> None:
    """top.permute; the default order reverses the dims."""
    rank = ctx.rank(0)
    perm = ctx.attr("perm")
    order = list(range(rank))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(order) != list(range(rank)):
        raise ctx.error(f"perm {order} is not a permutation of {rank} dims")
    source = ctx.shape(0)
    moved(ctx, "permute", [data_value(ctx)], {"order": order}, [source[p] for p in order])
