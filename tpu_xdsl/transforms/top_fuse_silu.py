"""`top-fuse-silu`: x * sigmoid(x) becomes `top.silu` (SiLU / Swish)."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern

from tpu_xdsl.dialects.module import names_of
from tpu_xdsl.transforms.matching import build, has_fused_relu, producer, replace_with


class FuseSilu(RewritePattern):
    """mul(x, sigmoid(x)) or mul(sigmoid(x), x) -> silu(x), named as the mul."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op.name != "top.mul" or has_fused_relu(op):
            return
        for x, gate in (op.operands, reversed(op.operands)):
            sigmoid = producer(gate, "sigmoid")
            if sigmoid is None or sigmoid.operands[0] is not x:
                continue
            if x.type != op.results[0].type:
                return
            silu = build("silu", [x], op.results[0].type, {}, names_of(op))
            replace_with(rewriter, op, silu)
            return


class TopFuseSilu(ModulePass):
    """Fuse x * sigmoid(x) into `top.silu`."""

    name = "top-fuse-silu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(FuseSilu()).rewrite_module(op)
