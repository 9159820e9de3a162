"""`top-fold-affine`: a multiply and an add by constants (x * a + b per channel) fold into
the conv, deconv or matmul that produces x, or into the conv or matmul that reads it.

Exporters write such affine steps as ops of their own: Paddle's learnable affine blocks
(a scalar scale and shift after every conv and activation of PP-LCNetV3), a Linear on a
3-d input as MatMul then Add, a conv without bias then an Add, tf2onnx's BatchNorm as Mul
and Add, ConvNeXt's layer scale. Left alone, each is one more pass over the tensor, one
more rounding to F16/BF16 and one more requantization in INT8.

Producer side, y = affine(op(x)): op's filter is scaled per output channel and its bias
becomes bias * a + b (as a BatchNorm folds, `top_fold_batchnorm`); the op takes the
affine op's tensor name and fused ReLU.

Consumer side, op(x * a + b) with a scalar `a` and a per-input-channel `b`: the filter is
scaled by a and the bias gains the filter's sums over b. A conv zero-pads its input; that
padding belongs to x * a + b, so a shift b != 0 folds only into a conv without padding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from tpu_xdsl.dialects.module import is_none, tensor_name
from tpu_xdsl.dialects.quant_types import calibration_of
from tpu_xdsl.transforms.matching import attr, constant, has_fused_relu, producer, replace_with, shape
from tpu_xdsl.transforms.top_fold_batchnorm import fold_into
from tpu_xdsl.weights import create_weight

_LINEAR = ("conv", "deconv", "matmul")


@dataclass(frozen=True)
class Affine:
    """y = x * scale + shift, both float64 arrays that broadcast against x."""

    x: SSAValue
    scale: np.ndarray
    shift: np.ndarray


def affine_of(module: ModuleOp, op: Operation) -> Affine | None:
    """`op` as x * a + b with constant a and b, when it is one: a mul, add, sub or div
    with one constant operand, or a scale. Its result must have x's shape (a constant
    that broadcasts x to a larger shape is not an affine step of x)."""
    kind = op.name.removeprefix("top.")
    if kind == "scale":
        x, a, b = op.operands
        found = constant(module, a), constant(module, b)
        if found[0] is None or found[1] is None:
            return None
        # top.scale's weights are per channel (axis 1)
        per_channel = (1, -1, *[1] * (len(shape(x)) - 2))
        affine = Affine(x, *(np.asarray(v, np.float64).reshape(per_channel) for v in found))
    elif kind in ("mul", "add", "sub", "div"):
        lhs, rhs = op.operands
        c, x = constant(module, rhs), lhs
        if c is None and kind in ("mul", "add", "sub"):
            c, x = constant(module, lhs), rhs
        if c is None or constant(module, x) is not None or c.dtype.kind != "f":
            return None
        c = np.asarray(c, np.float64)
        one, zero = np.ones_like(c), np.zeros_like(c)
        if kind == "mul":
            affine = Affine(x, c, zero)
        elif kind == "add":
            affine = Affine(x, one, c)
        elif kind == "sub":  # x - c, or c - x
            affine = Affine(x, one, -c) if x is lhs else Affine(x, -one, c)
        else:  # x / c
            if not np.all(c):
                return None
            affine = Affine(x, 1.0 / c, zero)
    else:
        return None
    if shape(x) != shape(op.results[0]):
        return None
    return affine


def along(values: np.ndarray, x_shape: tuple[int, ...], axis: int) -> np.ndarray | None:
    """`values`, broadcast against a tensor of `x_shape`, as one value per index of `axis`
    (a vector of x_shape[axis]); None when they vary along another axis."""
    rank = len(x_shape)
    if values.ndim > rank:
        return None
    full = (1,) * (rank - values.ndim) + values.shape
    axis %= rank
    if any(d != 1 for i, d in enumerate(full) if i != axis):
        return None
    return np.broadcast_to(values.reshape(-1), (x_shape[axis],)) if full[axis] in (1, x_shape[axis]) else None


def _float(weight: np.ndarray | None) -> TypeGuard[np.ndarray]:
    """A known float filter (not a pre-quantized model's integer codes)."""
    return weight is not None and weight.dtype.kind == "f"


def _uncalibrated(*values: SSAValue) -> bool:
    """A pre-quantized model rounds these tensors to their scales: nothing folds across them."""
    return all(calibration_of(v.type) is None for v in values)


@dataclass
class FoldIntoProducer(RewritePattern):
    """affine(conv(x)) -> conv(x) with the affine step in its filter and bias (likewise a
    deconv, and a matmul with a constant right operand), when nothing else reads the
    conv's result and the conv has no fused ReLU; the affine op's may come along."""

    module: ModuleOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        affine = affine_of(self.module, op)
        if affine is None or not affine.x.has_one_use() or not _uncalibrated(affine.x):
            return
        fused = producer(affine.x, *_LINEAR)
        if fused is None:
            return
        axis = -1 if fused.name == "top.matmul" else 1
        x_shape = shape(affine.x)
        s, t = along(affine.scale, x_shape, axis), along(affine.shift, x_shape, axis)
        w = constant(self.module, fused.operands[1])
        if s is None or t is None or not _float(w) or (fused.name == "top.matmul" and len(x_shape) < 2):
            return
        fold_into(self.module, rewriter, op, fused, w, s, t)


@dataclass
class FoldIntoConsumer(RewritePattern):
    """conv(x * a + b) -> conv(x) with a scalar `a` in its filter and the shift `b` (one
    value per input channel) in its bias; likewise a matmul with a constant right
    operand (b per contracted index). A conv with zero padding takes only b = 0."""

    module: ModuleOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        result = op.results[0] if len(op.results) == 1 else None
        if result is None or not result.has_one_use() or has_fused_relu(op):
            return
        user = result.first_use.operation  # type: ignore[union-attr]
        if user.name not in ("top.conv", "top.matmul") or user.operands[0] is not result:
            return
        affine = affine_of(self.module, op)
        if affine is None or not _uncalibrated(affine.x, result):
            return
        x_shape = shape(affine.x)
        if user.name == "top.matmul" and (len(x_shape) < 2 or attr(user, "left_transpose", False)):
            return
        a = np.unique(affine.scale)
        b = along(affine.shift, x_shape, -1 if user.name == "top.matmul" else 1)
        w = constant(self.module, user.operands[1])
        if a.size != 1 or b is None or not _float(w):
            return
        if user.name == "top.conv" and np.any(b) and any(attr(user, "pads", [])):
            return
        w = np.asarray(w, np.float64)
        sums = _input_sums(user, w, b)
        if sums is None:
            return
        bias = user.operands[2]
        old_bias = 0.0 if is_none(bias) else constant(self.module, bias)
        if old_bias is None:
            return
        new_b = np.asarray(old_bias, np.float64) + sums
        if new_b.ndim > 1:  # a matmul's bias must stay one value per output column
            return
        base = tensor_name(user)
        weight = create_weight(self.module, f"{base}_filter", (w * a[0]).astype(np.float32), user)
        new_bias = create_weight(self.module, f"{base}_bias", new_b.astype(np.float32), user)
        assert isinstance(user, IRDLOperation), "TOP ops are IRDL operations"
        new_op = type(user).build(
            operands=[affine.x, weight, new_bias], result_types=[user.results[0].type], attributes=dict(user.attributes)
        )
        replace_with(rewriter, user, new_op)


def _input_sums(op: Operation, w: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """What a constant input shift b (one value per input channel, or per contracted
    index of a matmul) adds to each output channel: the filter's sums weighted by b."""
    if op.name == "top.conv":
        group = attr(op, "group", 1)
        oc, per_group = w.shape[0], w.shape[1]
        if b.size != per_group * group:
            return None
        grouped = w.reshape(group, oc // group, per_group, -1)
        return np.einsum("gock,gc->go", grouped, b.reshape(group, per_group)).reshape(oc)
    if w.ndim != 2:
        return None
    matrix = w.T if attr(op, "right_transpose", False) else w  # [K, N]
    return b @ matrix if b.size == matrix.shape[0] else None


class TopFoldAffine(ModulePass):
    """Fold x * a + b by constants into the conv/deconv/matmul before it, or into the
    conv/matmul after it (new filter and bias weights)."""

    name = "top-fold-affine"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = GreedyRewritePatternApplier([FoldIntoProducer(op), FoldIntoConsumer(op)])
        PatternRewriteWalker(patterns).rewrite_module(op)
