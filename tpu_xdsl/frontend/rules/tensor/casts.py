"""Import rules that change element types: Cast, CastLike, OneHot."""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto, helper
from xdsl.ir import SSAValue

from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule
from tpu_xdsl.frontend.rules.elementwise import (
    constant,
)
from tpu_xdsl.frontend.rules.quantized import passes_codes
from tpu_xdsl.frontend.rules.tensor.common import (
    data_dtype,
    data_value,
    moved,
    norm_axis,
    onnx_dtype,
    top_dtype,
)

_CAST_FLOATS = {
    np.dtype(np.float16),
    np.dtype(np.float32),
    np.dtype(np.float64),
    np.dtype(helper.tensor_dtype_to_np_dtype(TensorProto.BFLOAT16)),
}


def _cast(ctx: NodeContext, target: np.dtype) -> None:
    """top.cast to the target dtype: bool, (u)int8..64, float16, bfloat16, float32, float64."""
    source = ctx.dtype(0)
    for dtype, what in ((source, "input"), (target, "target")):
        if not (dtype.kind in "biu" or dtype in _CAST_FLOATS):
            raise ctx.error(f"{what} element type {dtype} is not supported")
    if source == target:
        ctx.set_output(0, ctx.input(0, dtype=None))
        return
    ctx.output("cast", [ctx.input(0, dtype=None)], dtypes=[target])


@onnx_rule("Cast")
def cast(ctx: NodeContext) -> None:
    if not ctx.has_attr("to"):
        raise ctx.error("the 'to' attribute is required")
    if passes_codes(ctx):  # codes of a pre-quantized model, which TOP holds as real values
        ctx.set_output(0, ctx.input(0))
        return
    _cast(ctx, onnx_dtype(ctx, ctx.attr("to")))


@onnx_rule("CastLike", since=15)
def cast_like(ctx: NodeContext) -> None:
    """Cast to the element type of input 1."""
    _cast(ctx, ctx.dtype(1))


@onnx_rule("OneHot", since=9)
def one_hot(ctx: NodeContext) -> None:
    """values[1] where the (wrapped) index equals its position along `axis`,
    values[0] elsewhere: a compare with a constant range and a top.where.
    Indices outside [-depth, depth) (or not whole) match no position, as in
    ONNX's reference and onnxruntime."""
    depth = ctx.require_const(1, "depth")
    if depth.size != 1 or math.prod(ctx.shape(2)) != 2:
        raise ctx.error("depth must be a scalar and values hold [off, on]")
    depth = int(depth.reshape(()))
    index_shape = ctx.shape(0)
    rank = len(index_shape) + 1
    axis = norm_axis(ctx, ctx.attr("axis", -1), rank)
    index = ctx.input(0)
    zero = constant(ctx, 0.0, "zero", rank=rank - 1)
    (negative,) = ctx.emit(
        "compare", [index, zero], {"mode": "lt"}, dtypes=[np.dtype(np.bool_)]
    )
    (wrapped,) = ctx.emit(
        "add", [index, constant(ctx, float(depth), "depth", rank=rank - 1)]
    )
    (index,) = ctx.emit("where", [negative, wrapped, index])
    expanded = [*index_shape[:axis], 1, *index_shape[axis:]]
    (index,) = ctx.emit("unsqueeze", [index], {"axes": [axis]}, shapes_=[expanded])
    positions = np.arange(depth, dtype=np.float32).reshape(
        [depth if i == axis else 1 for i in range(rank)]
    )
    (hot,) = ctx.emit(
        "compare",
        [index, constant(ctx, positions, "positions")],
        {"mode": "eq"},
        dtypes=[np.dtype(np.bool_)],
    )
    off, on = _off_on(ctx, rank)
    target = [*index_shape[:axis], depth, *index_shape[axis:]]
    moved(ctx, "where", [hot, on, off], None, target, ctx.dtype(2))


def _off_on(ctx: NodeContext, rank: int) -> tuple[SSAValue, SSAValue]:
    """OneHot's values[0] and values[1] shaped to broadcast at `rank`
    (sliced out of a run-time values tensor)."""
    dtype = top_dtype(data_dtype(ctx, 2))
    values = ctx.const(2)
    if values is not None:
        values = values.reshape(-1)
        off = constant(ctx, values[0], "off", dtype=dtype, rank=rank)
        on = constant(ctx, values[1], "on", dtype=dtype, rank=rank)
        return off, on
    ones = [1] * rank
    flat = data_value(ctx, 2)
    if len(ctx.shape(2)) != 1:
        (flat,) = ctx.emit(
            "reshape", [flat], {"shape": [2]}, shapes_=[[2]], dtypes=[dtype]
        )
    parts = []
    for k in (0, 1):
        attrs = {"starts": [k], "ends": [k + 1], "axes": [0], "steps": [1]}
        (part,) = ctx.emit("slice", [flat], attrs, shapes_=[[1]], dtypes=[dtype])
        (part,) = ctx.emit(
            "reshape", [part], {"shape": ones}, shapes_=[ones], dtypes=[dtype]
        )
        parts.append(part)
    return parts[0], parts[1]
