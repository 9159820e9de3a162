"""`top-fold-reduce-mean`: a sum over axes times 1/count (or divided by count) is the
mean over them.

Exporters that lower `mean` themselves (jax2tf, some TensorFlow graphs) write
ReduceSum then a multiply by the constant 1/n. The sum alone can leave F16's
range where the mean does not (magika's layer norm sums 512 squares to about
1.2e5 > 65504), so the mean keeps the accumulation inside one op, which F16
kernels accumulate in float32.
"""

from __future__ import annotations

import math

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern

from tpu_xdsl.dialects.module import names_of
from tpu_xdsl.transforms.matching import (
    attr,
    build,
    close,
    has_fused_relu,
    other_operand,
    producer,
    replace_with,
    scalar,
    shape,
)


def reduced_count(reduce: Operation) -> int:
    """How many elements each result of a `top.reduce` combines."""
    in_shape = shape(reduce.operands[0])
    axes = attr(reduce, "axes", []) or list(range(len(in_shape)))
    return math.prod(in_shape[a % len(in_shape)] for a in axes)


class FoldSumScaleToMean(RewritePattern):
    """mul(reduce_sum(x), 1/n) or div(reduce_sum(x), n) -> reduce_mean(x), n the count
    the sum combines; named as the mul or div."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op.name not in ("top.mul", "top.div") or has_fused_relu(op):
            return
        module = op.get_toplevel_object()
        if not isinstance(module, ModuleOp):
            return
        candidates = op.operands if op.name == "top.mul" else op.operands[:1]
        for value in candidates:
            reduce = producer(value, "reduce")
            if reduce is None or attr(reduce, "mode") != "sum" or not value.has_one_use():
                continue
            other = other_operand(op, value)
            factor = scalar(module, other) if other is not None else None
            count = reduced_count(reduce)
            wanted = 1.0 / count if op.name == "top.mul" else float(count)
            if not close(factor, wanted, 1e-6) or shape(op.results[0]) != shape(value):
                continue
            attrs = {"mode": "mean", "axes": attr(reduce, "axes", []), "keepdims": attr(reduce, "keepdims", True)}
            mean = build("reduce", [reduce.operands[0]], op.results[0].type, attrs, names_of(op))
            replace_with(rewriter, op, mean)
            return


class TopFoldReduceMean(ModulePass):
    """Sums scaled by 1/count become means."""

    name = "top-fold-reduce-mean"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(FoldSumScaleToMean()).rewrite_module(op)
