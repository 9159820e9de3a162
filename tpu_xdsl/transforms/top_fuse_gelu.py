"""`top-fuse-gelu`: the decomposed GELU exporters emit becomes `top.gelu`.

    exact: x * 0.5 * (1 + erf(x / sqrt(2)))
    tanh:  x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern

from tpu_xdsl.dialects.module import names_of
from tpu_xdsl.transforms.matching import (
    build,
    close,
    has_fused_relu,
    producer,
    replace_with,
    scalar,
    split_constant,
)

# Exporters write these constants with a few digits; 1e-4 accepts 1.4142 or 0.7979.
_LOOSE = 1e-4


def operand_orders(op: Operation) -> list[tuple[SSAValue, SSAValue]]:
    lhs, rhs = op.operands
    return [(lhs, rhs), (rhs, lhs)]


@dataclass
class FuseGelu(RewritePattern):
    """Anchored on the last op; the 0.5 (a * 0.5, 0.5 * a or a / 2) may come last,
    first (on x) or on (1 + ...); products and sums in either operand order:

    - ((x * (1 + f)) * 0.5), ((x * 0.5) * (1 + f)), (x * ((1 + f) * 0.5)),

    with f = erf(x / 1.4142135) or erf(x * 0.70710678) (exact), or
    f = tanh(0.7978845 * (x + 0.044715 * x^3)) with 0.044715 * x^3 any product of x's and
    constants (pow(x, 3), x * (x * x), x * (x * (0.044715 * x)) as JAX writes it; tanh
    approximation). The gelu takes the last op's tensor name."""

    module: ModuleOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op.name not in ("top.mul", "top.div") or has_fused_relu(op):
            return
        match = self.gelu_input(op)
        if match is None:
            return
        x, approximate = match
        if x.type != op.results[0].type:
            return
        gelu = build("gelu", [x], op.results[0].type, {"approximate": approximate}, names_of(op))
        replace_with(rewriter, op, gelu)

    def gelu_input(self, op: Operation) -> tuple[SSAValue, str] | None:
        """(x, approximate) when op computes gelu(x)."""
        # ((x * (1 + f)) * 0.5)
        halved = self.half_of(op)
        product = None if halved is None else producer(halved, "mul")
        if product is not None:
            for x, sum_ in operand_orders(product):
                if (kind := self.gelu_kind(sum_, x)) is not None:
                    return x, kind
        if op.name != "top.mul":
            return None
        for lhs, rhs in operand_orders(op):
            # ((x * 0.5) * (1 + f))
            half_x = producer(lhs, "mul", "div")
            x = None if half_x is None else self.half_of(half_x)
            if x is not None and (kind := self.gelu_kind(rhs, x)) is not None:
                return x, kind
            # (x * ((1 + f) * 0.5))
            half_sum = producer(rhs, "mul", "div")
            sum_ = None if half_sum is None else self.half_of(half_sum)
            if sum_ is not None and (kind := self.gelu_kind(sum_, lhs)) is not None:
                return lhs, kind
        return None

    def half_of(self, op: Operation) -> SSAValue | None:
        """v when op is v * 0.5, 0.5 * v or v / 2."""
        if op.name == "top.div":
            return op.operands[0] if close(scalar(self.module, op.operands[1]), 2.0) else None
        return split_constant(self.module, op, 0.5)

    def gelu_kind(self, sum_: SSAValue, x: SSAValue) -> str | None:
        """"none" when sum_ = 1 + erf(x / sqrt(2)), "tanh" when it is 1 + tanh(...)."""
        add = producer(sum_, "add")
        f = None if add is None else split_constant(self.module, add, 1.0)
        if f is None:
            return None
        if (erf := producer(f, "erf")) is not None and self.is_scaled_for_erf(erf.operands[0], x):
            return "none"
        if (tanh := producer(f, "tanh")) is not None and self.is_tanh_argument(tanh.operands[0], x):
            return "tanh"
        return None

    def is_scaled_for_erf(self, value: SSAValue, x: SSAValue) -> bool:
        """value = x / sqrt(2) or x * (1 / sqrt(2))."""
        op = producer(value, "div", "mul")
        if op is None:
            return False
        if op.name == "top.div":
            return op.operands[0] is x and close(scalar(self.module, op.operands[1]), math.sqrt(2), _LOOSE)
        return split_constant(self.module, op, math.sqrt(0.5), _LOOSE) is x

    def is_tanh_argument(self, value: SSAValue, x: SSAValue) -> bool:
        """value = sqrt(2 / pi) * (x + 0.044715 * x^3), the cubic term a product of x's and
        constants in any grouping (pow(x, 3) * c, c * (x * (x * x)), x * (x * (c * x)), ...)."""
        scaled = producer(value, "mul")
        inner = None if scaled is None else split_constant(self.module, scaled, math.sqrt(2 / math.pi), _LOOSE)
        add = None if inner is None else producer(inner, "add")
        if add is None:
            return False
        for lhs, rhs in operand_orders(add):
            term = self.monomial(rhs, x)
            if lhs is x and term is not None and term[1] == 3 and close(term[0], 0.044715, _LOOSE):
                return True
        return False

    def monomial(self, value: SSAValue, x: SSAValue, depth: int = 4) -> tuple[float, int] | None:
        """(c, k) when value = c * x^k through muls of x, scalar constants and pow(x, k)
        (at most `depth` deep); None otherwise."""
        if value is x:
            return 1.0, 1
        if depth == 0:
            return None
        if (power := producer(value, "pow")) is not None:
            exponent = scalar(self.module, power.operands[1])
            if power.operands[0] is x and exponent is not None and exponent in (2.0, 3.0):
                return 1.0, int(exponent)
            return None
        product = producer(value, "mul")
        if product is None:
            return None
        coefficient, degree = 1.0, 0
        for operand in product.operands:
            constant_factor = scalar(self.module, operand)
            factor = (constant_factor, 0) if constant_factor is not None else self.monomial(operand, x, depth - 1)
            if factor is None:
                return None
            coefficient, degree = coefficient * factor[0], degree + factor[1]
        return coefficient, degree


class TopFuseGelu(ModulePass):
    """Fuse x * 0.5 * (1 + erf(x / sqrt(2))) (and the tanh approximation) into `top.gelu`."""

    name = "top-fuse-gelu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(FuseGelu(op)).rewrite_module(op)
