"""`top-fold-batchnorm`: inference BatchNorm folds into the conv, deconv or matmul
before it, or becomes a per-channel `top.scale`.

batch_norm(x) = x * s + t with s = scale / sqrt(variance + epsilon) and
t = bias - mean * s, per channel (axis 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, NoneType
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from tpu_xdsl.dialects.module import names_of, tensor_name
from tpu_xdsl.dialects.quant_types import calibration_of
from tpu_xdsl.transforms.matching import (
    attr,
    build,
    constant,
    producer,
    replace_with,
    shape,
)
from tpu_xdsl.weights import create_weight


def scale_and_shift(module: ModuleOp, bn: Operation) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-channel (s, t) with batch_norm(x) = x * s + t, in float64; None when a
    statistic is not a known constant."""
    params = [constant(module, v) for v in bn.operands[1:]]
    if any(p is None for p in params):
        return None
    gamma, beta, mean, var = (np.asarray(p, np.float64).reshape(-1) for p in params)
    s = gamma / np.sqrt(var + attr(bn, "epsilon", 1e-5))
    return s, beta - mean * s


def folded_bias(module: ModuleOp, bias: SSAValue, s: np.ndarray, t: np.ndarray) -> np.ndarray | None:
    """The bias after the fold, b * s + t (b = 0 when the op has none); None when
    b is unknown or is not per channel."""
    if isinstance(bias.type, NoneType):
        return t
    b = constant(module, bias)
    per_channel = b is not None and (b.size == 1 or b.shape[-1] == b.size == s.size)
    if not per_channel:
        return None
    return np.asarray(b, np.float64).reshape(-1) * s + t


def folded_filter(op: Operation, w: np.ndarray, s: np.ndarray) -> np.ndarray | None:
    """The filter (or right matmul operand) with output channel c scaled by s[c]."""
    w = np.asarray(w, np.float64)
    if op.name == "top.conv":
        # [OC, C/group, k...]
        return w * s.reshape(-1, *[1] * (w.ndim - 1))
    if op.name == "top.deconv":
        # [C, OC/group, k...]: output channel g * OC/group + j is column j of group g's rows.
        group = attr(op, "group", 1)
        grouped = w.reshape(group, w.shape[0] // group, *w.shape[1:])
        return (grouped * s.reshape(group, 1, w.shape[1], *[1] * (w.ndim - 2))).reshape(w.shape)
    # matmul: the channels are the last dim of the product: w's columns, or its
    # rows when it is transposed.
    if w.ndim != 2:
        return None
    return w * (s[:, None] if attr(op, "right_transpose", False) else s[None, :])


def fold_into(module: ModuleOp, rewriter: PatternRewriter, op: Operation, fused: Operation, w: np.ndarray,
              s: np.ndarray, t: np.ndarray) -> None:
    """Replace `op`, y = fused(x) * s + t per output channel, by `fused` with filter `w`
    scaled and its bias b * s + t (new weights named after `op`); the new op takes op's tensor
    name and fused ReLU. Nothing changes when the filter or the bias cannot take the fold."""
    new_w = folded_filter(fused, w, s)
    new_b = folded_bias(module, fused.operands[2], s, t)
    if new_w is None or new_b is None:
        return
    base = tensor_name(op)
    weight = create_weight(module, f"{base}_filter", new_w.astype(np.float32), fused)
    bias = create_weight(module, f"{base}_bias", new_b.astype(np.float32), fused)
    attributes = dict(fused.attributes)
    for key in ("names", "do_relu", "relu_limit"):
        if key in op.attributes:
            attributes[key] = op.attributes[key]
    assert isinstance(fused, IRDLOperation), "TOP ops are IRDL operations"
    new_op = type(fused).build(
        operands=[fused.operands[0], weight, bias], result_types=[op.results[0].type], attributes=attributes
    )
    replace_with(rewriter, op, new_op)


@dataclass
class FoldBatchNorm(RewritePattern):
    """batch_norm(conv(x, w, b)) -> conv(x, w * s, b * s + t), likewise for deconv
    and for a 2-d matmul (channel axis 1 is its last dim) with a constant right
    operand; only when nothing else uses the producer and it has no fused ReLU.
    The folded op takes the BatchNorm's tensor name."""

    module: ModuleOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op.name != "top.batch_norm":
            return
        source = op.operands[0]
        fused = producer(source, "conv", "deconv", "matmul")
        if fused is None or not source.has_one_use():
            return
        if calibration_of(source.type) is not None:
            return  # a pre-quantized model rounds the output to its scale before the BatchNorm
        if fused.name == "top.matmul" and len(shape(source)) != 2:
            return
        st = scale_and_shift(self.module, op)
        w = constant(self.module, fused.operands[1])
        if st is None or w is None:
            return
        fold_into(self.module, rewriter, op, fused, w, *st)


@dataclass
class BatchNormToScale(RewritePattern):
    """batch_norm(x) -> scale(x, s, t): per-channel weights named after the tensor."""

    module: ModuleOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op.name != "top.batch_norm":
            return
        st = scale_and_shift(self.module, op)
        if st is None:
            return
        s, t = st
        base = tensor_name(op)
        scale = create_weight(self.module, f"{base}_scale", s.astype(np.float32), op)
        bias = create_weight(self.module, f"{base}_bias", t.astype(np.float32), op)
        new_op = build("scale", [op.operands[0], scale, bias], op.results[0].type, {}, names_of(op))
        replace_with(rewriter, op, new_op)


class TopFoldBatchnorm(ModulePass):
    """Fold inference BatchNorm into the conv/deconv/matmul before it (new filter and
    bias weights), else turn it into `top.scale`."""

    name = "top-fold-batchnorm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = GreedyRewritePatternApplier([FoldBatchNorm(op), BatchNormToScale(op)])
        PatternRewriteWalker(patterns).rewrite_module(op)
