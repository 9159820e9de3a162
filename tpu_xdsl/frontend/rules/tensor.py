"""Import rules for shape and data-movement ops."""

from __future__ import annotations

import numpy as np

from tpu_xdsl.frontend.onnx_importer import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule


@onnx_rule("Shape")
def shape(ctx: NodeContext) -> None:
    dims = np.array(ctx.shape(0), dtype=np.int64)
    start, end = ctx.attr("start", 0), ctx.attr("end", None)
    ctx.set_const(0, dims[start:end])


@onnx_rule("Size")
def size(ctx: NodeContext) -> None:
    ctx.set_const(0, np.array(int(np.prod(ctx.shape(0))), dtype=np.int64))


@onnx_rule("Reshape", since=5)
def reshape(ctx: NodeContext) -> None:
    target = ctx.require_const(1, "the target shape").astype(np.int64).tolist()
    source = ctx.shape(0)
    allowzero = ctx.attr("allowzero", 0)
    resolved = [source[i] if d == 0 and not allowzero else d for i, d in enumerate(target)]
    if -1 in resolved:
        known = int(np.prod([d for d in resolved if d != -1]))
        resolved[resolved.index(-1)] = int(np.prod(source)) // max(known, 1)
    ctx.output("reshape", [ctx.input(0, dtype=None)], {"shape": resolved}, shapes_=[resolved], dtypes=[ctx.dtype(0)])


@onnx_rule("Flatten")
def flatten(ctx: NodeContext) -> None:
    axis = ctx.attr("axis", 1)
    source = ctx.shape(0)
    axis = axis + len(source) if axis < 0 else axis
    target = [int(np.prod(source[:axis])), int(np.prod(source[axis:]))]
    ctx.output("reshape", [ctx.input(0, dtype=None)], {"shape": target}, shapes_=[target], dtypes=[ctx.dtype(0)])
