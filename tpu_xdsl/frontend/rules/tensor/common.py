"""What the tensor rules share: axes normalized, the dtype data movement keeps, constant inputs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from onnx import TensorProto, helper
from xdsl.ir import SSAValue

from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.onnx_model import F32
from tpu_xdsl.frontend.rules.elementwise import (
    cast_output,
    is_integral,
)


def ints_of(values: object) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]


def norm_axis(ctx: NodeContext, axis: int, rank: int, what: str = "axis") -> int:
    """`axis` in [-rank, rank) made non-negative."""
    if not -rank <= axis < rank:
        raise ctx.error(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def norm_axes(
    ctx: NodeContext, axes: Sequence[int], rank: int, what: str = "axes"
) -> list[int]:
    """Distinct axes made non-negative."""
    out = [norm_axis(ctx, int(a), rank, what) for a in axes]
    if len(set(out)) != len(out):
        raise ctx.error(f"{what} {list(axes)} repeat an axis")
    return out


def data_dtype(ctx: NodeContext, i: int = 0) -> np.dtype:
    dtype = ctx.dtype(i)
    if dtype.kind in "OSU":
        raise ctx.error("string tensors are not supported")
    return dtype


# TOP ops whose data operands and result share any element type (the rest are f32).
ANY_DTYPE = {
    "reshape", "permute", "concat", "split", "slice", "squeeze", "unsqueeze", "flatten", "pad",
    "upsample", "gather", "gather_elements", "scatter_nd", "tile", "expand", "where", "depth2space",
}  # fmt: skip


def top_dtype(dtype: np.dtype) -> np.dtype:
    """How TOP holds an ONNX dtype: integers and bool as they are, floats as f32."""
    return dtype if is_integral(dtype) else F32


def data_value(ctx: NodeContext, i: int = 0) -> SSAValue:
    """Input i for a data-movement op, in its TOP dtype."""
    return ctx.input(i, dtype=top_dtype(data_dtype(ctx, i)))


def moved(
    ctx: NodeContext,
    kind: str,
    operands: Sequence[SSAValue | Sequence[SSAValue]],
    attrs: dict | None = None,
    shape: Sequence[int] | None = None,
    dtype: np.dtype | None = None,
) -> SSAValue:
    """Emit `top.<kind>` as the node's output 0 in the TOP dtype of `dtype`
    (input 0's by default); an f32-only op's result is cast back to an integer
    or bool dtype."""
    target = top_dtype(data_dtype(ctx) if dtype is None else dtype)
    shapes_ = None if shape is None else [[int(d) for d in shape]]
    if kind in ANY_DTYPE or target == F32:
        return ctx.output(kind, operands, attrs, shapes_=shapes_, dtypes=[target])[0]
    (value,) = ctx.emit(kind, operands, attrs, shapes_=shapes_)
    return cast_output(ctx, value, target)


def const_input(ctx: NodeContext, i: int, what: str) -> np.ndarray | None:
    """Optional constant input i: None when absent or empty, an error when computed at run time."""
    if not ctx.has_input(i):
        return None
    value = ctx.require_const(i, what)
    return None if value.size == 0 and value.ndim == 1 else value


def onnx_dtype(ctx: NodeContext, to: int | str) -> np.dtype:
    """The numpy dtype of an ONNX element type (opsets 1-5 name it by string)."""
    try:
        code = (
            TensorProto.DataType.Value(to.upper()) if isinstance(to, str) else int(to)
        )
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(code))
    except (KeyError, ValueError, TypeError) as e:
        raise ctx.error(f"element type {to!r} is not supported") from e
    return dtype
