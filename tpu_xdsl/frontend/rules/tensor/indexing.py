"""Import rules that index, generate and repeat: Gather, GatherElements, ScatterND, Compress,
ConstantOfShape, Range, NonZero, Trilu, EyeLike, Tile, Expand, DepthToSpace, SpaceToDepth."""

from __future__ import annotations

import math

import numpy as np
from onnx import numpy_helper
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
    norm_axis,
    onnx_dtype,
    top_dtype,
)
from tpu_xdsl.limits import check_tensor_size


def _indices(ctx: NodeContext, i: int, size: int | None = None) -> SSAValue:
    """Integer indices as they are (a constant one checked against `size`)."""
    dtype = ctx.dtype(i)
    if dtype.kind not in "iu":
        raise ctx.error(f"indices (input {i}) must be integers, got {dtype}")
    const = ctx.const(i)
    if (
        const is not None
        and size is not None
        and const.size
        and (const.min() < -size or const.max() >= size)
    ):
        raise ctx.error(
            f"indices (input {i}) hold a value outside [-{size}, {size - 1}]"
        )
    return ctx.input(i, dtype=None)


@onnx_rule("Gather")
def gather(ctx: NodeContext) -> None:
    """out = take(data, indices, axis): data[:axis] + indices.shape + data[axis+1:]."""
    source = ctx.shape(0)
    axis = norm_axis(ctx, ctx.attr("axis", 0), len(source))
    target = [*source[:axis], *ctx.shape(1), *source[axis + 1 :]]
    const = ctx.const(1)
    if (
        const is not None
        and const.ndim == 0
        and const.dtype.kind in "iu"
        and -source[axis] <= const < source[axis]
    ):
        # x[..., i, ...]: a one-wide slice with the axis dropped.
        start = int(const) % source[axis]
        attrs = {"starts": [start], "ends": [start + 1], "axes": [axis], "steps": [1]}
        sliced = [*source[:axis], 1, *source[axis + 1 :]]
        (row,) = ctx.emit(
            "slice",
            [data_value(ctx)],
            attrs,
            shapes_=[sliced],
            dtypes=[top_dtype(ctx.dtype(0))],
        )
        moved(ctx, "reshape", [row], {"shape": target}, target)
        return
    moved(
        ctx,
        "gather",
        [data_value(ctx), _indices(ctx, 1, source[axis])],
        {"axis": axis},
        target,
    )


@onnx_rule("GatherElements", since=11)
def gather_elements(ctx: NodeContext) -> None:
    source, index_shape = ctx.shape(0), ctx.shape(1)
    axis = norm_axis(ctx, ctx.attr("axis", 0), len(source))
    if len(index_shape) != len(source):
        raise ctx.error(
            f"indices {list(index_shape)} must have the rank of the data {list(source)}"
        )
    moved(
        ctx,
        "gather_elements",
        [data_value(ctx), _indices(ctx, 1, source[axis])],
        {"axis": axis},
        index_shape,
    )


@onnx_rule("ScatterND", since=11)
def scatter_nd(ctx: NodeContext) -> None:
    """A copy of data with the slices at indices replaced (reduction from opset 16)."""
    reduction = ctx.attr("reduction", "none")
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise ctx.error(f"reduction '{reduction}' is not an ONNX value")
    data, indices, updates = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    depth = indices[-1] if indices else None
    if depth is None or depth > len(data) or updates != (*indices[:-1], *data[depth:]):
        raise ctx.error(
            f"indices {list(indices)} and updates {list(updates)} do not fit data {list(data)} (updates must "
            "be indices' shape without its last dim, then the data dims past the indexed ones)"
        )
    operands = [data_value(ctx), _indices(ctx, 1), data_value(ctx, 2)]
    moved(ctx, "scatter_nd", operands, {"reduction": reduction}, ctx.shape(0))


@onnx_rule("Compress", since=9)
def compress(ctx: NodeContext) -> None:
    """A gather of the positions where the (constant) condition holds; without
    `axis`, of the flattened input."""
    condition = ctx.require_const(1, "the condition, which decides the output's shape,")
    x, source = data_value(ctx), list(ctx.shape(0))
    axis = ctx.attr("axis")
    if axis is None:
        source = [math.prod(source)]
        (x,) = ctx.emit(
            "reshape",
            [x],
            {"shape": source},
            shapes_=[source],
            dtypes=[top_dtype(ctx.dtype(0))],
        )
        axis = 0
    axis = norm_axis(ctx, axis, len(source))
    if condition.ndim != 1 or condition.size > source[axis]:
        raise ctx.error(
            f"condition {list(condition.shape)} must be 1-D and no longer than dim {axis} ({source[axis]})"
        )
    positions = np.flatnonzero(condition.astype(bool)).astype(np.int64)
    indices = constant(ctx, positions, "positions", dtype=None)
    target = [*source[:axis], positions.size, *source[axis + 1 :]]
    moved(ctx, "gather", [x, indices], {"axis": axis}, target)


@onnx_rule("ConstantOfShape", since=9)
def constant_of_shape(ctx: NodeContext) -> None:
    """A constant (folding makes it unless the result is very large); a
    run-time shape gives no static shape."""
    shape_ = ints_of(ctx.require_const(0, "the shape"))
    value = ctx.attr("value")
    value = np.zeros(1, np.float32) if value is None else numpy_helper.to_array(value)
    if value.size != 1:
        raise ctx.error(f"attribute 'value' must hold one element, it holds {value.size}")
    if any(d < 0 for d in shape_):
        raise ctx.error(f"the shape {list(shape_)} has a negative dimension")
    check_tensor_size(f"{ctx.where} result", shape_, value.dtype.itemsize)
    ctx.set_const(0, np.full(shape_, value.reshape(-1)[0], dtype=value.dtype))


def _scalar(array: np.ndarray) -> np.integer | np.floating:
    """A one-element constant as a numpy scalar of its dtype (what np.arange takes)."""
    return array.dtype.type(array.reshape(()))


@onnx_rule("Range", since=11)
def range_(ctx: NodeContext) -> None:
    """A constant; run-time start, limit or delta leave its length unknown."""
    start, limit, delta = (
        _scalar(ctx.require_const(i, what))
        for i, what in enumerate(("start", "limit", "delta"))
    )
    if delta == 0 or not np.all(np.isfinite([start, limit, delta])):
        raise ctx.error(f"Range({start}, {limit}, {delta}) has no finite length")
    length = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    check_tensor_size(f"{ctx.where} result", [length], start.dtype.itemsize)
    ctx.set_const(0, np.arange(start, limit, delta, dtype=start.dtype))


@onnx_rule("NonZero", since=9)
def nonzero(ctx: NodeContext) -> None:
    raise ctx.error(
        "the output's shape depends on the input's values (only a constant input can be folded)"
    )


@onnx_rule("Trilu", since=14)
def trilu(ctx: NodeContext) -> None:
    """Keep the upper (or lower) triangle of the last two dims from diagonal k:
    a top.where with a constant mask."""
    source = ctx.shape(0)
    if len(source) < 2:
        raise ctx.error(f"the input must have rank >= 2, got {list(source)}")
    k = const_input(ctx, 1, "k")
    k = 0 if k is None else int(k.reshape(()))
    ones = np.ones(source[-2:], dtype=bool)
    mask = np.triu(ones, k) if ctx.attr("upper", 1) else np.tril(ones, k)
    operands = [
        constant(ctx, mask, "mask", dtype=None),
        data_value(ctx),
        constant(ctx, 0, "zero", dtype=top_dtype(data_dtype(ctx)), rank=len(source)),
    ]
    moved(ctx, "where", operands, None, source)


@onnx_rule("EyeLike", since=9)
def eye_like(ctx: NodeContext) -> None:
    """Only the input's shape matters: a constant."""
    source = ctx.shape(0)
    if len(source) != 2:
        raise ctx.error(f"the input must be 2-D, got {list(source)}")
    dtype = (
        ctx.dtype(0)
        if ctx.attr("dtype") is None
        else onnx_dtype(ctx, ctx.attr("dtype"))
    )
    ctx.set_const(0, np.eye(*source, k=ctx.attr("k", 0), dtype=dtype))


@onnx_rule("Tile", since=6)
def tile(ctx: NodeContext) -> None:
    source = ctx.shape(0)
    repeats = ints_of(ctx.require_const(1, "repeats"))
    if len(repeats) != len(source) or min(repeats, default=0) < 0:
        raise ctx.error(f"repeats {repeats} must hold {len(source)} counts >= 0")
    target = [d * r for d, r in zip(source, repeats)]
    moved(ctx, "tile", [data_value(ctx)], {"repeats": repeats}, target)


@onnx_rule("Expand", since=8)
def expand(ctx: NodeContext) -> None:
    """Broadcast both ways: the output is broadcast(input shape, shape)."""
    source = ctx.shape(0)
    shape_ = ints_of(ctx.require_const(1, "the target shape"))
    try:
        target = list(np.broadcast_shapes(tuple(source), tuple(shape_)))
    except ValueError as e:
        raise ctx.error(
            f"the input {list(source)} does not broadcast with shape {shape_}"
        ) from e
    moved(ctx, "expand", [data_value(ctx)], None, target)


def _depth2space(ctx: NodeContext, inverse: bool) -> None:
    source = ctx.shape(0)
    if len(source) != 4:
        raise ctx.error(f"the input must be 4-D (NCHW), got {list(source)}")
    block = ctx.attr("blocksize")
    if block is None or block < 1:
        raise ctx.error("the 'blocksize' attribute must be >= 1")
    mode = ctx.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise ctx.error(f"mode '{mode}' is not DCR or CRD")
    n, c, h, w = source
    if inverse:
        if h % block or w % block:
            raise ctx.error(
                f"blocksize {block} does not divide H and W of {list(source)}"
            )
        target = [n, c * block * block, h // block, w // block]
    else:
        if c % (block * block):
            raise ctx.error(
                f"blocksize^2 = {block * block} does not divide the {c} channels"
            )
        target = [n, c // (block * block), h * block, w * block]
    attrs = {"block_size": block, "mode": mode, "inverse": inverse}
    moved(ctx, "depth2space", [data_value(ctx)], attrs, target)


@onnx_rule("DepthToSpace")
def depth_to_space(ctx: NodeContext) -> None:
    """mode DCR (default) or CRD (opset 11+)."""
    _depth2space(ctx, inverse=False)


@onnx_rule("SpaceToDepth")
def space_to_depth(ctx: NodeContext) -> None:
    """top.depth2space with inverse; mode (opset 28) as DepthToSpace's."""
    _depth2space(ctx, inverse=True)
