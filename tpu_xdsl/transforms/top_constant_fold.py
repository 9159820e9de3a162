"""`top-constant-fold`: an op whose operands are all weights (or none) is computed
once, with the interpreter's kernels, and replaced by new weights; x * 1, x / 1, x + 0
and x - 0 by constants are x (as MLIR's arith folders fold them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, NoneType
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from tpu_xdsl.dialects.attr_values import op_attrs
from tpu_xdsl.dialects.quant_types import calibration_of
from tpu_xdsl.interp.top_interpreter import InterpretError, result_specs
from tpu_xdsl.kernels import load_all
from tpu_xdsl.transforms.matching import constant, erase_unused, has_fused_relu, scalar
from tpu_xdsl.weights import create_weight

# The importer's limit on folded results: bigger constants stay computed at run time.
FOLD_LIMIT = 1 << 24

_NOT_FOLDED = ("top.input", "top.weight", "top.none")


@dataclass
class FoldConstantOp(RewritePattern):
    """op(weights...) -> weight(s) holding its results, named after its tensors."""

    module: ModuleOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if not op.name.startswith("top.") or op.name in _NOT_FOLDED or op.regions:
            return
        kernel = load_all().get(op.name.removeprefix("top."))
        if kernel is None or not op.results:
            return
        if any(isinstance(r.type, NoneType) for r in op.results):
            return
        inputs = []
        for operand in op.operands:
            if isinstance(operand.type, NoneType):
                inputs.append(None)
                continue
            value = constant(self.module, operand)
            if value is None:
                return
            inputs.append(value)
        specs = result_specs(op)
        if sum(int(np.prod(s.shape)) for s in specs) > FOLD_LIMIT:
            return
        outputs = kernel(inputs, op_attrs(op), specs)
        names = _result_names(op)
        weights = []
        for out, spec, name in zip(outputs, specs, names, strict=True):
            out = np.asarray(out)
            if out.shape != spec.shape:
                raise InterpretError(
                    f"'{op.name}' ({name}): kernel produced shape {out.shape}, IR says {spec.shape}"
                )
            weights.append(create_weight(self.module, name, out.astype(spec.dtype, copy=False), op))
        producers = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
        rewriter.replace(op, [], weights)
        erase_unused(rewriter, producers)


# The constant c for which x <op> c is x, and whether c may come first (c * x, c + x).
_IDENTITIES = {"top.mul": (1.0, True), "top.div": (1.0, False), "top.add": (0.0, True), "top.sub": (0.0, False)}


@dataclass
class FoldIdentity(RewritePattern):
    """x * 1, 1 * x, x / 1, x + 0, 0 + x, x - 0 -> x, where the constant does not broadcast x
    to a larger shape or another type. Paddle writes swish as x * sigmoid(1 * x): the 1 * x
    kept top-fuse-silu from seeing x * sigmoid(x). An op whose result @main returns keeps
    its tensor name, so it stays; so does one with a fused ReLU or a pre-quantized scale."""

    module: ModuleOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op.name not in _IDENTITIES or has_fused_relu(op):
            return
        neutral, commutes = _IDENTITIES[op.name]
        lhs, rhs = op.operands
        candidates = [(lhs, rhs), (rhs, lhs)] if commutes else [(lhs, rhs)]
        result = op.results[0]
        if calibration_of(result.type) is not None or any(use.operation.name == "func.return" for use in result.uses):
            return
        for x, c in candidates:
            if x.type == result.type and constant(self.module, x) is None and scalar(self.module, c) == neutral:
                producers = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
                rewriter.replace(op, [], [x])
                erase_unused(rewriter, producers)
                return


def _result_names(op: Operation) -> list[str]:
    names = op.attributes.get("names")
    given = [n.data for n in names.data] if names is not None else []  # type: ignore[union-attr]
    kind = op.name.removeprefix("top.")
    return [given[i] if i < len(given) else f"{kind}_{i}" for i in range(len(op.results))]


class TopConstantFold(ModulePass):
    """Replace ops whose operands are all constants by weights holding their results, and
    arithmetic by a neutral constant by its other operand."""

    name = "top-constant-fold"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier([FoldConstantOp(op), FoldIdentity(op)])).rewrite_module(op)
