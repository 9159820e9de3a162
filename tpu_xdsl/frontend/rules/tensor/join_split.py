"""Import rules that join and split tensors: Concat, Split."""

from __future__ import annotations

from collections.abc import Sequence

from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule
from tpu_xdsl.frontend.rules.tensor.common import (
    const_input,
    data_dtype,
    data_value,
    ints_of,
    moved,
    norm_axis,
    top_dtype,
)


@onnx_rule("Concat")
def concat(ctx: NodeContext) -> None:
    present = [i for i in range(ctx.num_inputs) if ctx.has_input(i)]
    if not present:
        raise ctx.error("needs at least one input")
    first = ctx.shape(present[0])
    if not ctx.has_attr("axis") and ctx.opset >= 4:
        raise ctx.error("the 'axis' attribute is required")
    axis = norm_axis(ctx, ctx.attr("axis", 1), len(first))
    for i in present:
        other = ctx.shape(i)
        if len(other) != len(first) or any(
            a != b for d, (a, b) in enumerate(zip(first, other)) if d != axis
        ):
            raise ctx.error(
                f"input {i} {list(other)} does not concatenate with {list(first)} along axis {axis}"
            )
    target = list(first)
    target[axis] = sum(ctx.shape(i)[axis] for i in present)
    dtype = data_dtype(ctx, present[0])
    moved(
        ctx, "concat", [[data_value(ctx, i) for i in present]], {"axis": axis}, target, dtype
    )


def _split(
    ctx: NodeContext, sizes: Sequence[int] | None, num_outputs: int | None = None
) -> None:
    """Explicit sizes, or equal parts (opset 18's num_outputs: ceil-sized, the last smaller)."""
    source = ctx.shape(0)
    axis = norm_axis(ctx, ctx.attr("axis", 0), len(source))
    dim = source[axis]
    parts = ctx.num_outputs
    if sizes is None:
        if num_outputs is not None or ctx.opset >= 18:
            parts = num_outputs or parts
            chunk = -(-dim // parts)
            sizes = [max(0, min(chunk, dim - i * chunk)) for i in range(parts)]
        elif dim % parts:
            raise ctx.error(
                f"dim {axis} of size {dim} does not split into {parts} equal parts"
            )
        else:
            sizes = [dim // parts] * parts
    sizes = [int(s) for s in sizes]
    if len(sizes) != ctx.num_outputs:
        raise ctx.error(
            f"split {sizes} has {len(sizes)} parts for {ctx.num_outputs} outputs"
        )
    if any(s < 0 for s in sizes) or sum(sizes) != dim:
        raise ctx.error(f"split {sizes} does not add up to dim {axis} of size {dim}")
    shapes_ = [[*source[:axis], s, *source[axis + 1 :]] for s in sizes]
    dtypes = [top_dtype(data_dtype(ctx))] * len(sizes)
    ctx.output(
        "split",
        [data_value(ctx)],
        {"axis": axis, "split": sizes},
        shapes_=shapes_,
        dtypes=dtypes,
    )


@onnx_rule("Split", until=12)
def split_attr(ctx: NodeContext) -> None:
    """Sizes in the `split` attribute (opset 1 also takes them as input 1)."""
    sizes = ctx.attr("split")
    if sizes is None and ctx.opset < 2:
        sizes = const_input(ctx, 1, "split")
    _split(ctx, None if sizes is None else ints_of(sizes))


@onnx_rule("Split", since=13)
def split(ctx: NodeContext) -> None:
    """Sizes in input 1; from opset 18 `num_outputs` asks for equal parts."""
    sizes = const_input(ctx, 1, "split")
    num_outputs = ctx.attr("num_outputs") if ctx.opset >= 18 else None
    _split(ctx, None if sizes is None else ints_of(sizes), num_outputs)
