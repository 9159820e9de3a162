"""`top-fold-reshape`: chains of reshapes become one reshape, and reshapes that keep
the shape (how Identity and Dropout import) disappear.

squeeze, unsqueeze and flatten only change the shape too, so they count as
reshapes in a chain.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from tpu_xdsl.dialects.module import names_of
from tpu_xdsl.kernels import op_kinds
from tpu_xdsl.transforms.matching import build, producer, replace_with, shape

_RESHAPES = tuple(sorted(op_kinds.RESHAPES))


class FoldReshapeChain(RewritePattern):
    """reshape(reshape(x)) -> reshape(x), named as the outer one; any mix of
    reshape, squeeze, unsqueeze and flatten."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op.name.removeprefix("top.") not in _RESHAPES:
            return
        inner = producer(op.operands[0], *_RESHAPES)
        if inner is None:
            return
        result_type = op.results[0].type
        reshape = build(
            "reshape",
            [inner.operands[0]],
            result_type,
            {"shape": list(shape(op.results[0]))},
            names_of(op),
        )
        replace_with(rewriter, op, reshape)


class RemoveIdentityReshape(RewritePattern):
    """A reshape to its input's own shape -> its input.

    The surviving producer keeps its tensor name. When the reshape's result is a
    graph output, its name is what the output is known by: the producer takes it
    when nothing else uses the producer, else the reshape stays.
    """

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op.name.removeprefix("top.") not in _RESHAPES:
            return
        source = op.operands[0]
        if source.type != op.results[0].type:
            return
        if any(not use.operation.name.startswith("top.") for use in op.results[0].uses):
            owner = source.owner
            names = names_of(op)
            if not isinstance(owner, Operation) or names is None:
                return
            renamable = (
                owner.name not in ("top.input", "top.weight")
                and len(owner.results) == 1
                and source.has_one_use()
            )
            if not renamable:
                return
            owner.attributes["names"] = names
            rewriter.notify_op_modified(owner)
        rewriter.replace(op, [], [source])


class TopFoldReshape(ModulePass):
    """Fold reshape chains (reshape, squeeze, unsqueeze, flatten) into one reshape
    and remove reshapes that keep the shape."""

    name = "top-fold-reshape"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = GreedyRewritePatternApplier([RemoveIdentityReshape(), FoldReshapeChain()])
        PatternRewriteWalker(patterns).rewrite_module(op)
