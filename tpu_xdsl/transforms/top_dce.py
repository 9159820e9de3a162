"""`top-dce`: TOP ops whose results nothing uses are removed (model inputs stay).

TOP ops have no side effects, but they carry no `Pure` trait, so xDSL's `dce`
keeps them.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern

from tpu_xdsl.transforms.matching import erase_unused


class RemoveUnusedTopOp(RewritePattern):
    """Erase an unused TOP op other than `top.input`, then producers left unused."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        erase_unused(rewriter, [op])


class TopDce(ModulePass):
    """Remove TOP ops (but `top.input`) whose results are unused."""

    name = "top-dce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(RemoveUnusedTopOp(), walk_reverse=True).rewrite_module(op)
