"""`top-fold-compare-cast`: a comparison read only as a float (1.0 or 0.0) yields
that float itself.

ONNX has no float-valued comparison, so exporters write `Cast(Equal(a, b))`
(one-hot encodings, masks that scale a tensor). The boolean between the two is
no type a TPU op holds; TPU-MLIR's Compare gives its result in the input's
type instead, and so does `top.compare` after this pass, under the cast's name.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern

from tpu_xdsl.dialects.module import names_of
from tpu_xdsl.kernels.dtypes import numpy_dtype
from tpu_xdsl.transforms.matching import attr, build, producer, replace_with


class FoldCompareIntoCast(RewritePattern):
    """cast<float>(compare(a, b)) -> compare(a, b) with the cast's float result type."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op.name != "top.cast":
            return
        compare = producer(op.operands[0], "compare")
        if compare is None:
            return
        result_type = op.results[0].type
        if not isinstance(result_type, TensorType) or numpy_dtype(result_type.element_type).kind != "f":
            return
        folded = build(
            "compare", list(compare.operands), result_type, {"mode": attr(compare, "mode")}, names_of(op)
        )
        replace_with(rewriter, op, folded)


class TopFoldCompareCast(ModulePass):
    """Comparisons cast to a float type produce the float (1.0/0.0) directly."""

    name = "top-fold-compare-cast"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(FoldCompareIntoCast()).rewrite_module(op)
