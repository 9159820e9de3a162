"""`top-fuse-relu`: a ReLU (or a Clip from 0) folds into the op before it as `do_relu`."""

from __future__ import annotations

import math

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern

from tpu_xdsl.dialects.attr_values import from_py
from tpu_xdsl.dialects.module import names_of
from tpu_xdsl.kernels import op_kinds
from tpu_xdsl.transforms.matching import attr

# Ops with a fused ReLU but no limit (op_kinds.FUSES_RELU clip at `relu_limit`, see
# irdl/top.irdl).
_UNLIMITED = ("concat",)


def relu_limit_of(op: Operation) -> float | None:
    """The clip limit of a ReLU-like op (-1: none), or None when `op` is not one.

    `relu_limit` <= 0 means "no limit" for the fused ReLU, so a Clip(0, 0) (all
    zeros) is not a ReLU here.
    """
    if op.name == "top.relu":
        limit = attr(op, "relu_limit", -1.0)
        return limit if limit > 0 else -1.0
    if op.name != "top.clip" or attr(op, "min", -math.inf) != 0.0:
        return None
    high = attr(op, "max", math.inf)
    if math.isinf(high) and high > 0:
        return -1.0
    return high if high > 0 else None


def combined_limit(a: float, b: float) -> float:
    """relu_a(relu_b(x)) = relu with the smaller limit (-1: none)."""
    limits = [x for x in (a, b) if x > 0]
    return min(limits) if limits else -1.0


class FuseRelu(RewritePattern):
    """relu(op(...)) -> op(...) {do_relu, relu_limit} when nothing else uses op's result;
    the fused op takes the ReLU's tensor name (the tensor it now produces)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        limit = relu_limit_of(op)
        if limit is None:
            return
        source = op.operands[0]
        fused = source.owner
        if not isinstance(fused, Operation) or not source.has_one_use():
            return
        kind = fused.name.removeprefix("top.")
        if kind not in op_kinds.FUSES_RELU and kind not in _UNLIMITED:
            return
        if source.type != op.results[0].type:
            return
        if attr(fused, "do_relu", False):
            limit = combined_limit(limit, attr(fused, "relu_limit", -1.0))
        if kind in _UNLIMITED and limit > 0:
            return
        fused.attributes["do_relu"] = from_py(True)
        if kind in op_kinds.FUSES_RELU:
            fused.attributes["relu_limit"] = from_py(float(limit))
        names = names_of(op)
        if names is not None:
            fused.attributes["names"] = names
        rewriter.notify_op_modified(fused)
        rewriter.replace(op, [], [source])


class TopFuseRelu(ModulePass):
    """Fuse Relu, and Clip with min 0 (max becomes `relu_limit`), into a preceding
    conv, deconv, matmul, add, sub, mul, scale, max/avg pool or (unlimited) concat."""

    name = "top-fuse-relu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(FuseRelu()).rewrite_module(op)
