"""`top-fuse-softmax`: the decomposed softmax exporters emit (tf2onnx from JAX or
TensorFlow, hand-written graphs) becomes `top.softmax`.

The chain, over one axis A of x:

    e = exp(x - m)        m constant along A as it broadcasts against x (a reduce max
                          over A with its dims kept, through a reshape, an expand, a max
                          with a constant; a scalar)
    y = e / s             s = sum_A(e), possibly through a reshape to the kept dims and
                          an expand

y becomes softmax(x) {axis = A}, named as the division. Softmax does not change when a
value constant along A is subtracted from x, so any such m is the same function (the
kernel subtracts the max itself). Fused, INT8 quantizes x and y only: the exponentials'
range (one value near 1, the rest near 0) is what a KL threshold clips, and the sum of
clipped values turns every probability into a multiple of the true one.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern

from tpu_xdsl.dialects.module import names_of
from tpu_xdsl.transforms.matching import attr, build, producer, replace_with, shape


def _through_broadcasts(value: SSAValue) -> SSAValue:
    """`value` before any reshape or expand that only adds or keeps size-1 dims: the
    value a reduction without keepdims gave, seen as its keepdims shape."""
    while True:
        op = producer(value, "reshape", "expand", "unsqueeze")
        if op is None:
            return value
        before, after = shape(op.operands[0]), shape(op.results[0])
        if [d for d in before if d != 1] != [d for d in after if d != 1]:
            return value
        value = op.operands[0]


def _reduced_axis(op: Operation | None, kind: str, x: SSAValue) -> int | None:
    """The one axis `op`, a `top.reduce` of `kind` over `x`, reduces; None otherwise."""
    if op is None or attr(op, "mode") != kind or op.operands[0] is not x:
        return None
    rank = len(shape(x))
    axes = attr(op, "axes") or list(range(rank))
    if len(axes) != 1:
        return None
    return int(axes[0]) % rank


def _constant_along(value: SSAValue, x: SSAValue, axis: int) -> bool:
    """Whether `value`, subtracted from `x`, is one value along `axis` for each row: its
    shape, aligned to x's trailing dims as broadcasting aligns it, has size 1 there (or
    does not reach it)."""
    found = shape(value)
    at = axis - (len(shape(x)) - len(found))
    return at < 0 or found[at] == 1


class FuseSoftmax(RewritePattern):
    """div(exp(x - m), sum_A(exp(x - m))) -> softmax(x) {axis = A}, named as the div."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op.name != "top.div":
            return
        numerator, denominator = op.operands
        exp = producer(numerator, "exp")
        if exp is None:
            return
        total = producer(_through_broadcasts(denominator), "reduce")
        axis = _reduced_axis(total, "sum", numerator)
        if axis is None or shape(numerator) != shape(op.results[0]):
            return
        kept = list(shape(numerator))
        kept[axis] = 1
        if list(shape(denominator)) != kept:
            return  # each sum must divide its own row
        sub = producer(exp.operands[0], "sub")
        x = exp.operands[0]
        if sub is not None and shape(sub.operands[0]) == shape(x) and _constant_along(sub.operands[1], x, axis):
            x = sub.operands[0]
        if x.type != op.results[0].type:
            return
        softmax = build("softmax", [x], op.results[0].type, {"axis": axis}, names_of(op))
        replace_with(rewriter, op, softmax)


class TopFuseSoftmax(ModulePass):
    """Fuse exp(x - max) / sum(exp(x - max)) into `top.softmax`."""

    name = "top-fuse-softmax"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(FuseSoftmax()).rewrite_module(op)
