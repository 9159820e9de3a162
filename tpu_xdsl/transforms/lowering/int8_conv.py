"""INT8 pattern family of the ops with weights: conv, deconv, matmul, scale.

As TPU-MLIR's quantize_convlike_layer_int8: weights int8, symmetric per
output channel; bias int32 in accumulator units; per channel a multiplier and
right shift with m / 2^r ~ accumulator scale / output scale.

The input's scale is folded into the weights before they are quantized:
w'[oc, ic] = w[oc, ic] * S_in[ic], quantized per output channel with
S_w'[oc] = max|w'[oc]| / 127, so acc[oc] = sum q_w'[oc, ic] * q_x[ic] stands
for y[oc] / S_w'[oc]. With one input scale this is TPU-MLIR's S_in * S_w;
with per-channel input scales (one per input channel) it is exact as well, so
per-channel activations cost nothing here. A weight scale is raised where the
bias would not fit int32. A matmul of two activations (attention) has one
multiplier for the tensor.

Convolutions and scales take and give channels along axis 1; a matmul with a
constant right operand takes them along its input's last axis (K, the axis the
input scales fold into) and gives them along its result's last axis (a
features-last [N, L, C] tensor), where it requantizes per output column anyway.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.dialects.module import is_none
from tpu_xdsl.dialects.quant_types import calibration_of
from tpu_xdsl.kernels.quant import (
    QParams,
    quantize_bias,
    quantize_tensor,
    weight_scales,
)
from tpu_xdsl.transforms.lowering.context import (
    AnyQParams,
    describe,
    scale_vector,
    value_name,
)
from tpu_xdsl.transforms.lowering.int8_common import (
    Int8Pattern,
    build_tpu,
    per_channel_multipliers,
    requant_attrs,
    zero_point_attrs,
)
from tpu_xdsl.transforms.matching import attr, shape

# Weight scales are at least |bias| / 2^30: the int32 bias then leaves room for the sum.
_BIAS_LIMIT = float(1 << 30)


def _quantize_int8(w: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """w / scale (broadcast) to int8 in -127..127."""
    return np.maximum(quantize_tensor(w, scale, 0, np.int8), -127).astype(np.int8)


class _WeightedPattern(Int8Pattern):
    """What conv-like patterns share: folding the input scales into the filter and
    quantizing filter and bias per output channel."""

    def fold(self, op: Operation, w: np.ndarray, in_scales: np.ndarray) -> np.ndarray:
        """The float filter times the scale of the input channel each weight reads."""
        raise NotImplementedError

    def channel_rows(self, op: Operation, w: np.ndarray) -> np.ndarray:
        """The (folded) filter as [output channels, everything else]."""
        raise NotImplementedError

    def channel_shape(self, op: Operation, w: np.ndarray) -> tuple[int, ...]:
        """How a per-output-channel array broadcasts against the filter."""
        raise NotImplementedError

    def input_channels(self, op: Operation, data: SSAValue) -> int:
        return shape(data)[1]

    def quantize(self, op: Operation, folded: np.ndarray, bias: np.ndarray | None, so: AnyQParams,
                 one_scale: bool = False):
        """Int8 filter, int32 bias and per-channel (multiplier, rshift) of a folded filter
        (with `one_scale`, one weight scale for all channels, as a pre-quantized model's)."""
        rows = self.channel_rows(op, folded)
        channels = rows.shape[0]
        floor: np.ndarray | float = np.max(np.abs(rows)) / 127 if one_scale and rows.size else 0.0
        b = None
        if bias is not None:
            b = np.broadcast_to(np.asarray(bias, np.float64).reshape(-1), (channels,))
            floor = np.maximum(floor, np.abs(b) / _BIAS_LIMIT)
        scales = weight_scales(rows, 0, floor)  # the accumulator's scale per output channel
        q = _quantize_int8(folded, scales.reshape(self.channel_shape(op, folded)))
        q_bias = None if b is None else quantize_bias(b, scales)
        multipliers, rshifts = per_channel_multipliers(scales / scale_vector(so, channels))
        return q, q_bias, multipliers, rshifts

    def lower_weighted(self, op: Operation, data: SSAValue, filter_: SSAValue, bias: SSAValue) -> Operation | None:
        w = self.ctx.weight_array(filter_)
        if w is None:
            self.ctx.decline(op, f"its filter '{value_name(filter_)}' is not a constant")
            return None
        b = None if is_none(bias) else self.ctx.weight_array(bias)
        if b is None and not is_none(bias):
            self.ctx.decline(op, f"its bias '{value_name(bias)}' is not a constant")
            return None
        x = self.ctx.as_int8(data, op, channels=True, axis=self.input_axis(op, data))
        si = self.ctx.qparams(x)
        so = self.ctx.output_qparams(op, channels=True, axis=self.output_axis(op))
        in_scales = scale_vector(si, self.input_channels(op, data))
        folded = self.fold(op, np.asarray(w, np.float64), in_scales)
        # A pre-quantized model's filter with one scale (its type carries the range) keeps
        # it when the input has one scale too: the model's own codes come back exactly.
        one_scale = calibration_of(filter_.type) is not None and bool(np.all(in_scales == in_scales[0]))
        q, q_bias, multipliers, rshifts = self.quantize(op, folded, b, so, one_scale)
        name = value_name(op.results[0], "conv")
        weight = self.ctx.add_weight(f"{name}_filter_int8", q, op)
        bias_value = bias if q_bias is None else self.ctx.add_weight(f"{name}_bias_int32", q_bias, op)
        extra = {**requant_attrs(multipliers, rshifts), **zero_point_attrs([si], so)}
        return build_tpu(op, [x, weight, bias_value], [self.ctx.result_type(op, so)], extra)

    def input_axis(self, op: Operation, data: SSAValue) -> int:
        """The axis of the input whose per-channel scales fold into the filter."""
        return 1

    def output_axis(self, op: Operation) -> int:
        """The axis the result is requantized per channel along."""
        return 1


class ConvInt8(_WeightedPattern):
    """top.conv -> INT8 tpu.conv: filter [OC, C/g, kh, kw]; output channel oc of group
    g = oc // OCg reads input channels g*Cg .. g*Cg + Cg - 1."""

    kinds = ("conv",)

    def fold(self, op, w, in_scales):
        group = int(attr(op, "group", 1))
        oc, cg = w.shape[:2]
        per_output = in_scales.reshape(group, cg)[np.arange(oc) // (oc // group)]  # [OC, Cg]
        return w * per_output.reshape(oc, cg, *([1] * (w.ndim - 2)))

    def channel_rows(self, op, w):
        return w.reshape(w.shape[0], -1)

    def channel_shape(self, op, w):
        return (-1, *([1] * (w.ndim - 1)))

    def lower(self, op: Operation) -> Operation | None:
        return self.lower_weighted(op, op.input, op.filter, op.bias)  # type: ignore[attr-defined]


class DeconvInt8(_WeightedPattern):
    """top.deconv -> INT8 tpu.deconv: filter [C, OC/g, kh, kw] (input channels first);
    output channel g*OCg + j is the slab [g*Cg:(g+1)*Cg, j], so channels are found in
    the grouped view [g, Cg, OCg, kh*kw]."""

    kinds = ("deconv",)

    def fold(self, op, w, in_scales):
        return w * in_scales.reshape(-1, *([1] * (w.ndim - 1)))

    def channel_rows(self, op, w):
        groups, _, per_group, _ = w.shape
        return w.transpose(0, 2, 1, 3).reshape(groups * per_group, -1)

    def channel_shape(self, op, w):
        return (w.shape[0], 1, -1, 1)

    def quantize(self, op, folded, bias, so, one_scale=False):
        group = int(attr(op, "group", 1))
        grouped = folded.reshape(group, folded.shape[0] // group, folded.shape[1], -1)
        q, q_bias, multipliers, rshifts = super().quantize(op, grouped, bias, so, one_scale)
        return q.reshape(folded.shape), q_bias, multipliers, rshifts

    def lower(self, op: Operation) -> Operation | None:
        return self.lower_weighted(op, op.input, op.filter, op.bias)  # type: ignore[attr-defined]


class MatMulInt8(_WeightedPattern):
    """top.matmul -> INT8 tpu.matmul. A constant right operand [.., K, N] is quantized per
    output column (the last axis of the result), with the scales of a per-channel
    [M, K] input folded into its rows; two activations share one multiplier."""

    kinds = ("matmul",)

    def _k_axis(self, op) -> int:
        return -1 if attr(op, "right_transpose", False) else -2

    def fold(self, op, w, in_scales):
        shape_ = [1] * w.ndim
        shape_[self._k_axis(op)] = -1
        return w * in_scales.reshape(shape_)

    def channel_rows(self, op, w):
        axis = -2 if attr(op, "right_transpose", False) else -1
        return np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)

    def channel_shape(self, op, w):
        shape_ = [1] * w.ndim
        shape_[-2 if attr(op, "right_transpose", False) else -1] = -1
        return tuple(shape_)

    def input_channels(self, op, data):
        return shape(data)[-1]

    def input_axis(self, op, data):
        return len(shape(data)) - 1

    def output_axis(self, op):
        return len(shape(op.results[0])) - 1

    def lower(self, op: Operation) -> Operation | None:
        if attr(op, "left_transpose", False):
            self.ctx.decline(op, "a transposed left operand has no INT8 kernel")
            return None
        right, bias = op.right, op.bias  # type: ignore[attr-defined]
        w = self.ctx.weight_array(right)
        if w is not None:
            columns = w.shape[-2 if attr(op, "right_transpose", False) else -1]
            b = None if is_none(bias) else self.ctx.weight_array(bias)
            if b is not None and b.size not in (1, columns):
                self.ctx.decline(op, f"its bias has {b.size} values for {columns} output columns")
                return None
            return self.lower_weighted(op, op.input, right, bias)  # type: ignore[attr-defined]
        return self.lower_activations(op)

    def lower_activations(self, op: Operation) -> Operation | None:
        bias = op.bias  # type: ignore[attr-defined]
        b = None if is_none(bias) else self.ctx.weight_array(bias)
        if b is None and not is_none(bias):
            self.ctx.decline(op, f"its bias '{value_name(bias)}' is not a constant")
            return None
        a = self.ctx.as_int8(op.input, op)  # type: ignore[attr-defined]
        r = self.ctx.as_int8(op.right, op)  # type: ignore[attr-defined]
        sa, sr = self.ctx.qparams(a), self.ctx.qparams(r)
        assert isinstance(sa, QParams) and isinstance(sr, QParams)
        so = self.ctx.output_qparams(op)
        assert isinstance(so, QParams)
        multipliers, rshifts = per_channel_multipliers([sa.scale * sr.scale / so.scale])
        bias_value = bias
        if b is not None:
            q_bias = quantize_bias(b, np.float64(sa.scale * sr.scale))
            bias_value = self.ctx.add_weight(f"{value_name(op.results[0])}_bias_int32", q_bias, op)
        extra = {**requant_attrs(multipliers, rshifts), **zero_point_attrs([sa, sr], so)}
        return build_tpu(op, [a, r, bias_value], [self.ctx.result_type(op, so)], extra)


class ScaleInt8(_WeightedPattern):
    """top.scale (x * s[c] + b[c], a BatchNorm that could not be folded) -> INT8 tpu.scale:
    s (times the input scale) as int8 per channel, b as int32, per-channel requantization."""

    kinds = ("scale",)

    def fold(self, op, w, in_scales):
        return w.reshape(-1) * in_scales

    def channel_rows(self, op, w):
        return w.reshape(-1, 1)

    def channel_shape(self, op, w):
        return (-1,)

    def lower(self, op: Operation) -> Operation | None:
        s = self.ctx.weight_array(op.scale)  # type: ignore[attr-defined]
        if s is None:
            self.ctx.decline(op, f"its scale '{value_name(op.scale)}' is not a constant")  # type: ignore[attr-defined]
            return None
        channels = shape(op.input)[1]  # type: ignore[attr-defined]
        if s.size != channels:
            self.ctx.decline(op, f"{describe(op)} has {s.size} scales for {channels} channels")
            return None
        return self.lower_weighted(op, op.input, op.scale, op.bias)  # type: ignore[attr-defined]
