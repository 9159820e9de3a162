"""`top-fuse-hardswish`: x * hard_sigmoid(x) and x * relu6(x + 3) / 6 become `top.hard_swish`.

hard_swish(x) = x * max(0, min(1, x / 6 + 0.5)) = x * relu6(x + 3) / 6.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern

from tpu_xdsl.dialects.module import names_of
from tpu_xdsl.transforms.matching import (
    attr,
    build,
    close,
    has_fused_relu,
    producer,
    replace_with,
    scalar,
    split_constant,
)
from tpu_xdsl.transforms.top_fuse_relu import relu_limit_of


@dataclass
class FuseHardSwish(RewritePattern):
    """Anchored on the last op of the chain, in these forms (operands of mul and
    add in either order; / 6 also as * (1/6)):

    - mul(x, hard_sigmoid(x)) with alpha 1/6 and beta 0.5 (within 1e-6);
    - mul(x, relu6(add(x, 3))) / 6;
    - mul(x, relu6(add(x, 3)) / 6),

    where relu6 is clip(0, 6) or relu with relu_limit 6. The fused op takes the
    last op's tensor name."""

    module: ModuleOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op.name not in ("top.mul", "top.div") or has_fused_relu(op):
            return
        x = self.hard_swish_input(op)
        if x is None or x.type != op.results[0].type:
            return
        replace_with(rewriter, op, build("hard_swish", [x], op.results[0].type, {}, names_of(op)))

    def hard_swish_input(self, op: Operation) -> SSAValue | None:
        """x when op computes hard_swish(x) in one of the forms, else None."""
        if op.name == "top.mul":
            for x, factor in (op.operands, reversed(op.operands)):
                if self.is_hard_sigmoid_of(factor, x):
                    return x
                div = producer(factor, "div", "mul")
                if div is not None and self.is_relu6_plus_3_of(self.divided_by_6(div), x):
                    return x
        divided = self.divided_by_6(op)
        product = None if divided is None else producer(divided, "mul")
        if product is None:
            return None
        for x, factor in (product.operands, reversed(product.operands)):
            if self.is_relu6_plus_3_of(factor, x):
                return x
        return None

    def is_hard_sigmoid_of(self, value: SSAValue, x: SSAValue) -> bool:
        hs = producer(value, "hard_sigmoid")
        return (
            hs is not None
            and hs.operands[0] is x
            and abs(attr(hs, "alpha", 0.2) - 1 / 6) <= 1e-6
            and abs(attr(hs, "beta", 0.5) - 0.5) <= 1e-6
        )

    def is_relu6_plus_3_of(self, value: SSAValue | None, x: SSAValue) -> bool:
        relu6 = None if value is None else producer(value, "clip", "relu")
        if relu6 is None or relu_limit_of(relu6) != 6.0:
            return False
        add = producer(relu6.operands[0], "add")
        return add is not None and split_constant(self.module, add, 3.0) is x

    def divided_by_6(self, op: Operation) -> SSAValue | None:
        """v for op = v / 6 or v * (1/6) (without a fused ReLU), else None."""
        if has_fused_relu(op):
            return None
        if op.name == "top.div" and close(scalar(self.module, op.operands[1]), 6.0):
            return op.operands[0]
        if op.name == "top.mul":
            return split_constant(self.module, op, 1 / 6)
        return None


class TopFuseHardswish(ModulePass):
    """Fuse x * hard_sigmoid(x) (alpha 1/6, beta 0.5) and x * relu6(x + 3) / 6 into
    `top.hard_swish`."""

    name = "top-fuse-hardswish"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(FuseHardSwish(op)).rewrite_module(op)
