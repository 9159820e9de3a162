"""`top-fuse-layernorm`: the decomposed layer normalization exporters emit becomes
`top.layer_norm`.

The chain (over the trailing axes A of x, ReduceMean with keepdims):

    m = mean_A(x); d = x - m; v = mean_A(d ** 2)   (or d * d)
    n = d / sqrt(v + eps)   (or d * reciprocal(sqrt(v + eps)), or d * rsqrt(v + eps))
    y = n * gamma + beta    (each optional)

n becomes layer_norm(x) {axis = first axis of A, epsilon = eps}; the affine
tail is then absorbed as its scale and bias, reshaped to the normalized shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, NoneType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.rewriter import InsertPoint

from tpu_xdsl.dialects.module import names_of, tensor_name
from tpu_xdsl.transforms.matching import (
    attr,
    build,
    close,
    constant,
    has_fused_relu,
    other_operand,
    producer,
    replace_with,
    scalar,
    shape,
)
from tpu_xdsl.weights import create_weight


def trailing_mean_axis(reduce: Operation) -> int | None:
    """For a keepdims mean over the trailing axes of its input, the first of them."""
    if reduce.name != "top.reduce" or attr(reduce, "mode") != "mean":
        return None
    if not attr(reduce, "keepdims", True):
        return None
    rank = len(shape(reduce.operands[0]))
    axes = sorted({a % rank for a in attr(reduce, "axes", [])}) or list(range(rank))
    if axes != list(range(rank - len(axes), rank)):
        return None
    return axes[0]


def is_square_of(module: ModuleOp, value: SSAValue, d: SSAValue) -> bool:
    """value = d ** 2 or d * d."""
    if (square := producer(value, "mul")) is not None:
        return all(v is d for v in square.operands)
    power = producer(value, "pow")
    return power is not None and power.operands[0] is d and close(scalar(module, power.operands[1]), 2.0)


@dataclass
class FuseLayerNorm(RewritePattern):
    """n = (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) -> layer_norm(x),
    named as n; matched at n (a div, or a mul by reciprocal(sqrt(.)) or rsqrt(.))."""

    module: ModuleOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op.name not in ("top.div", "top.mul") or has_fused_relu(op):
            return
        for d, root in self.centered_and_root(op):
            match = self.normalized_input(d, root)
            if match is None:
                continue
            x, axis, epsilon = match
            if x.type != op.results[0].type:
                return
            none = rewriter.insert(build("none", [], NoneType()), InsertPoint.before(op)).results[0]
            replace_with(rewriter, op, build_layer_norm(x, none, none, axis, epsilon, op))
            return

    def centered_and_root(self, op: Operation) -> list[tuple[SSAValue, SSAValue]]:
        """Candidate (d, v + eps) pairs with op = d / sqrt(v + eps) or an equivalent."""
        if op.name == "top.div":
            sqrt = producer(op.operands[1], "sqrt")
            return [] if sqrt is None else [(op.operands[0], sqrt.operands[0])]
        pairs = []
        for d, factor in (op.operands, reversed(op.operands)):
            if (rsqrt := producer(factor, "rsqrt")) is not None:
                pairs.append((d, rsqrt.operands[0]))
            reciprocal = producer(factor, "reciprocal")
            sqrt = None if reciprocal is None else producer(reciprocal.operands[0], "sqrt")
            if sqrt is not None:
                pairs.append((d, sqrt.operands[0]))
        return pairs

    def normalized_input(self, d: SSAValue, root: SSAValue) -> tuple[SSAValue, int, float] | None:
        """(x, axis, eps) when d = x - mean(x) and root = mean(d^2) + eps over the
        same trailing axes starting at axis."""
        sub = producer(d, "sub")
        mean = None if sub is None else producer(sub.operands[1], "reduce")
        if sub is None or mean is None or mean.operands[0] is not sub.operands[0]:
            return None
        axis = trailing_mean_axis(mean)
        add = producer(root, "add")
        if axis is None or add is None:
            return None
        for variance_value in add.operands:
            variance = producer(variance_value, "reduce")
            eps = other_operand(add, variance_value)
            if variance is None or eps is None or (epsilon := scalar(self.module, eps)) is None:
                continue
            if trailing_mean_axis(variance) != axis:
                continue
            if is_square_of(self.module, variance.operands[0], d):
                # The shortest decimal of the f32 constant: 1e-05, not 9.99999974e-06.
                return sub.operands[0], axis, float(str(np.float32(epsilon)))
        return None


def build_layer_norm(
    x: SSAValue, scale: SSAValue, bias: SSAValue, axis: int, epsilon: float, replaced: Operation
) -> Operation:
    """layer_norm(x, scale, bias), typed and named as the op it replaces."""
    return build(
        "layer_norm",
        [x, scale, bias],
        replaced.results[0].type,
        {"axis": axis, "epsilon": epsilon},
        names_of(replaced),
    )


def as_normalized(array: np.ndarray, rank: int, axis: int, normalized: tuple[int, ...]) -> np.ndarray | None:
    """`array` (broadcasting against a rank-`rank` tensor) as a tensor of the
    normalized shape, or None when it varies along a dim before `axis`."""
    if array.ndim > rank:
        return None
    padded = array.reshape((1,) * (rank - array.ndim) + array.shape)
    if any(n != 1 for n in padded.shape[:axis]):
        return None
    try:
        return np.broadcast_to(padded.reshape(padded.shape[axis:]), normalized).astype(np.float32)
    except ValueError:
        return None


@dataclass
class AbsorbAffine(RewritePattern):
    """layer_norm(x) * gamma -> layer_norm(x, gamma), and layer_norm(x, [gamma]) + beta
    -> layer_norm(x, [gamma], beta), for constants varying only along the
    normalized dims, when nothing else uses the layer_norm."""

    module: ModuleOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op.name not in ("top.mul", "top.add") or has_fused_relu(op):
            return
        for value in op.operands:
            ln = producer(value, "layer_norm")
            if ln is None or not value.has_one_use() or value.type != op.results[0].type:
                continue
            x, scale, bias = ln.operands
            if not isinstance(bias.type, NoneType):
                continue
            if op.name == "top.mul" and not isinstance(scale.type, NoneType):
                continue
            other = other_operand(op, value)
            array = None if other is None else constant(self.module, other)
            rank = len(shape(x))
            axis = attr(ln, "axis", -1) % rank
            if array is None or (weight := as_normalized(array, rank, axis, shape(x)[axis:])) is None:
                continue
            tag = "scale" if op.name == "top.mul" else "bias"
            new = create_weight(self.module, f"{tensor_name(op)}_{tag}", weight, op)
            if op.name == "top.mul":
                scale = new
            else:
                bias = new
            epsilon = attr(ln, "epsilon", 1e-5)
            replace_with(rewriter, op, build_layer_norm(x, scale, bias, axis, epsilon, op))
            return


class TopFuseLayernorm(ModulePass):
    """Fuse the decomposed layer normalization (ReduceMean, Sub, Pow, ReduceMean,
    Add eps, Sqrt, Div, then optional Mul gamma and Add beta) into `top.layer_norm`."""

    name = "top-fuse-layernorm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = GreedyRewritePatternApplier([FuseLayerNorm(op), AbsorbAffine(op)])
        PatternRewriteWalker(patterns).rewrite_module(op)
