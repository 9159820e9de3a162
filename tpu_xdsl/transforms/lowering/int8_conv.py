"""INT8 pattern family of the ops with weights: conv, deconv, matmul, scale.

As TPU-MLIR's quantize_convlike_layer_int8: weights int8, symmetric per
output channel (scale max|w_c| / 127); bias int32 in accumulator units
(input scale x weight scale); per channel a multiplier and right shift
with m / 2^r ~ input scale x weight scale / output scale. A weight scale is
raised where the bias would not fit int32. A matmul of two activations
(attention) has one multiplier for the tensor.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.dialects.quant_types import qparams_of, quantized_type
from tpu_xdsl.quant import (
    QParams,
    quantize_bias,
    quantize_tensor,
    weight_scales,
)
from tpu_xdsl.transforms.lowering.context import describe, value_name
from tpu_xdsl.transforms.lowering.int8_common import (
    Int8Pattern,
    build_tpu,
    per_channel_multipliers,
    requant_attrs,
    zero_point_attrs,
)
from tpu_xdsl.transforms.matching import attr, shape

# Weight scales are at least |bias| / (input scale * 2^30): the bias then fits int32
# with a margin for the accumulation.
_BIAS_LIMIT = float(1 << 30)


def _is_none(value: SSAValue) -> bool:
    owner = value.owner
    return isinstance(owner, Operation) and owner.name == "top.none"


def _quantize_int8(w: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """w / scale (broadcast) to int8 in -127..127."""
    return np.maximum(quantize_tensor(w, scale, 0, np.int8), -127).astype(np.int8)


class _WeightedPattern(Int8Pattern):
    """What conv-like patterns share: quantizing filter and bias per channel."""

    def channel_rows(self, op: Operation, w: np.ndarray) -> np.ndarray:
        """The filter as [output channels, everything else]."""
        raise NotImplementedError

    def channel_shape(self, op: Operation, w: np.ndarray) -> tuple[int, ...]:
        """How a per-channel array broadcasts against the filter."""
        raise NotImplementedError

    def quantize(self, op: Operation, w: np.ndarray, bias: np.ndarray | None, si: QParams, so: QParams):
        rows = self.channel_rows(op, w)
        channels = rows.shape[0]
        floor = 0.0
        if bias is not None:
            b = np.broadcast_to(np.asarray(bias, np.float64).reshape(-1), (channels,))
            floor = np.abs(b) / (si.scale * _BIAS_LIMIT)
        scales = weight_scales(rows, 0, floor)
        q = _quantize_int8(w, scales.reshape(self.channel_shape(op, w)))
        q_bias = None
        if bias is not None:
            q_bias = quantize_bias(b, si.scale * scales)
        multipliers, rshifts = per_channel_multipliers(si.scale * scales / so.scale)
        return q, q_bias, multipliers, rshifts

    def lower_weighted(self, op: Operation, data: SSAValue, filter_: SSAValue, bias: SSAValue) -> Operation | None:
        w = self.ctx.weight_array(filter_)
        if w is None:
            self.ctx.decline(op, f"its filter '{value_name(filter_)}' is not a constant")
            return None
        b = None if _is_none(bias) else self.ctx.weight_array(bias)
        if b is None and not _is_none(bias):
            self.ctx.decline(op, f"its bias '{value_name(bias)}' is not a constant")
            return None
        x = self.ctx.as_int8(data, op)
        si = qparams_of(x.type)
        assert si is not None
        so = self.ctx.output_qparams(op)
        q, q_bias, multipliers, rshifts = self.quantize(op, w, b, si, so)
        name = value_name(op.results[0], "conv")
        weight = self.ctx.add_weight(f"{name}_filter_int8", q, op)
        bias_value = bias if q_bias is None else self.ctx.add_weight(f"{name}_bias_int32", q_bias, op)
        extra = {**requant_attrs(multipliers, rshifts), **zero_point_attrs([si], so)}
        return build_tpu(op, [x, weight, bias_value], [quantized_type(shape(op.results[0]), so)], extra)


class ConvInt8(_WeightedPattern):
    """top.conv -> INT8 tpu.conv: filter [OC, C/g, kh, kw], channels on axis 0."""

    kinds = ("conv",)

    def channel_rows(self, op, w):
        return w.reshape(w.shape[0], -1)

    def channel_shape(self, op, w):
        return (-1, *([1] * (w.ndim - 1)))

    def lower(self, op: Operation) -> Operation | None:
        return self.lower_weighted(op, op.input, op.filter, op.bias)  # type: ignore[attr-defined]


class DeconvInt8(_WeightedPattern):
    """top.deconv -> INT8 tpu.deconv: filter [C, OC/g, kh, kw]; output channel g*OCg + j
    is the slab [g*Cg:(g+1)*Cg, j], so channels are found in the grouped view
    [g, Cg, OCg, kh*kw]."""

    kinds = ("deconv",)

    def channel_rows(self, op, w):
        groups, _, per_group, _ = w.shape
        return w.transpose(0, 2, 1, 3).reshape(groups * per_group, -1)

    def channel_shape(self, op, w):
        return (w.shape[0], 1, -1, 1)

    def quantize(self, op, w, bias, si, so):
        group = int(attr(op, "group", 1))
        grouped = w.reshape(group, w.shape[0] // group, w.shape[1], -1)
        q, q_bias, multipliers, rshifts = super().quantize(op, grouped, bias, si, so)
        return q.reshape(w.shape), q_bias, multipliers, rshifts

    def lower(self, op: Operation) -> Operation | None:
        return self.lower_weighted(op, op.input, op.filter, op.bias)  # type: ignore[attr-defined]


class MatMulInt8(_WeightedPattern):
    """top.matmul -> INT8 tpu.matmul. A constant right operand is quantized per output
    column (the last axis of the result); two activations share one multiplier."""

    kinds = ("matmul",)

    def channel_rows(self, op, w):
        axis = -2 if attr(op, "right_transpose", False) else -1
        return np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)

    def channel_shape(self, op, w):
        shape_ = [1] * w.ndim
        shape_[-2 if attr(op, "right_transpose", False) else -1] = -1
        return tuple(shape_)

    def lower(self, op: Operation) -> Operation | None:
        if attr(op, "left_transpose", False):
            self.ctx.decline(op, "a transposed left operand has no INT8 kernel")
            return None
        right, bias = op.right, op.bias  # type: ignore[attr-defined]
        if self.ctx.weight_array(right) is not None:
            w = self.ctx.weight_array(right)
            columns = w.shape[-2 if attr(op, "right_transpose", False) else -1]
            b = None if _is_none(bias) else self.ctx.weight_array(bias)
            if b is not None and b.size not in (1, columns):
                self.ctx.decline(op, f"its bias has {b.size} values for {columns} output columns")
                return None
            return self.lower_weighted(op, op.input, right, bias)  # type: ignore[attr-defined]
        return self.lower_activations(op)

    def lower_activations(self, op: Operation) -> Operation | None:
        bias = op.bias  # type: ignore[attr-defined]
        b = None if _is_none(bias) else self.ctx.weight_array(bias)
        if b is None and not _is_none(bias):
            self.ctx.decline(op, f"its bias '{value_name(bias)}' is not a constant")
            return None
        a = self.ctx.as_int8(op.input, op)  # type: ignore[attr-defined]
        r = self.ctx.as_int8(op.right, op)  # type: ignore[attr-defined]
        sa, sr = qparams_of(a.type), qparams_of(r.type)
        assert sa is not None and sr is not None
        so = self.ctx.output_qparams(op)
        multipliers, rshifts = per_channel_multipliers([sa.scale * sr.scale / so.scale])
        bias_value = bias
        if b is not None:
            q_bias = quantize_bias(b, np.float64(sa.scale * sr.scale))
            bias_value = self.ctx.add_weight(f"{value_name(op.results[0])}_bias_int32", q_bias, op)
        extra = {**requant_attrs(multipliers, rshifts), **zero_point_attrs([sa, sr], so)}
        return build_tpu(op, [a, r, bias_value], [quantized_type(shape(op.results[0]), so)], extra)


class ScaleInt8(_WeightedPattern):
    """top.scale (x * s[c] + b[c], a BatchNorm that could not be folded) -> INT8 tpu.scale:
    s as int8 per channel, b as int32, per-channel requantization."""

    kinds = ("scale",)

    def channel_rows(self, op, w):
        return w.reshape(-1, 1)

    def channel_shape(self, op, w):
        return (-1,)

    def lower(self, op: Operation) -> Operation | None:
        s = self.ctx.weight_array(op.scale)  # type: ignore[attr-defined]
        if s is None:
            self.ctx.decline(op, f"its scale '{value_name(op.scale)}' is not a constant")  # type: ignore[attr-defined]
            return None
        if s.size != shape(op.input)[1]:  # type: ignore[attr-defined]
            self.ctx.decline(op, f"{describe(op)} has {s.size} scales for {shape(op.input)[1]} channels")  # type: ignore[attr-defined]
            return None
        return self.lower_weighted(op, op.input, op.scale, op.bias)  # type: ignore[attr-defined]
