"""The base of the INT8 pattern families and the attributes they share.

An INT8 pattern matches the TOP ops of its kinds whose mode is INT8. When it
cannot lower one (a filter that is not a constant, an average over windows of
different sizes, ...) it declines with a reason, and the float pattern lowers
the op in the fallback mode instead (reported).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from tpu_xdsl.dialects.attr_values import from_py
from tpu_xdsl.dialects.quant_types import is_quantized
from tpu_xdsl.kernels.quant import quantize_multiplier
from tpu_xdsl.transforms.lowering.context import AnyQParams, LoweringContext, on_integers
from tpu_xdsl.transforms.lowering.float_ops import tpu_class
from tpu_xdsl.weights import is_weight

ROUND_MODE = "half_away_from_zero"
# Attributes of TOP ops that have no INT8 meaning: a fused ReLU's limit is the
# upper end of the calibrated output range, where INT8 saturates anyway.
_FLOAT_ONLY = ("relu_limit",)


class Int8Pattern(RewritePattern):
    """Lowers the TOP ops of `kinds` whose mode is INT8; `lower` returns the TPU op whose
    results replace the TOP op's, or None after `ctx.decline`."""

    kinds: tuple[str, ...] = ()

    def __init__(self, ctx: LoweringContext):
        self.ctx = ctx

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op.name.split(".", 1)[1] not in self.kinds or self.ctx.op_mode(op) != "INT8":
            return
        if on_integers(op):
            return  # integer data (codes, indices, masks): the float lowering keeps its types
        if op in self.ctx.fused:
            return  # computed by its user's lookup table
        new = self.lower(op)
        if new is None:
            return
        data = next((v for v in new.operands if is_quantized(v.type) and not is_weight(v)), None)
        for index, result in enumerate(new.results):
            self.ctx.remember_per_tensor(result, op, index, like=data)
        rewriter.replace(op, new)

    def lower(self, op: Operation) -> Operation | None:
        raise NotImplementedError


def build_tpu(
    op: Operation,
    operands: Sequence[SSAValue | None | Sequence[SSAValue]],
    result_types: Sequence[Attribute | Sequence[Attribute]],
    extra: Mapping[str, Any] | None = None,
    drop: Sequence[str] = (),
) -> Operation:
    """The TPU op of `op`'s kind with `op`'s attributes (less float-only ones and `drop`)
    and `extra` (Python values; None removes)."""
    attributes = {k: v for k, v in op.attributes.items() if k not in _FLOAT_ONLY and k not in drop}
    for key, value in (extra or {}).items():
        if value is None:
            attributes.pop(key, None)
        else:
            attributes[key] = from_py(value)
    return tpu_class(op).build(operands=list(operands), result_types=list(result_types), attributes=attributes)


def requant_attrs(multipliers: Sequence[int], rshifts: Sequence[int]) -> dict[str, Any]:
    return {
        "multiplier": [int(m) for m in multipliers],
        "rshift": [int(r) for r in rshifts],
        "round_mode": ROUND_MODE,
        "quant_mode": "multiplier_shift",
    }


def zero_point_attrs(inputs: Sequence[AnyQParams], output: AnyQParams | None) -> dict[str, Any]:
    """input_zero_points / output_zero_point, present only when some are not 0."""
    attrs: dict[str, Any] = {}
    if any(q.zero_point for q in inputs):
        attrs["input_zero_points"] = [q.zero_point for q in inputs]
    if output is not None and output.zero_point:
        attrs["output_zero_point"] = output.zero_point
    return attrs


def per_channel_multipliers(ratios: Sequence[float] | np.ndarray) -> tuple[list[int], list[int]]:
    """One (multiplier, rshift) per rescale factor."""
    pairs = [quantize_multiplier(float(r)) for r in ratios]
    return [m for m, _ in pairs], [r for _, r in pairs]
