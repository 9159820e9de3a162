"""INT8 pattern families that keep scales coherent: pooling, reductions, concat, data movement.

- max_pool, reduce max/min and the data-movement ops (reshape, permute,
  slice, pad, nearest resize, ...) move or compare codes: their output keeps
  the input's quantization (and its per-channel scales while the op keeps
  the channel axis whole, wherever it moves it: a permute of [N, C, L] to
  [N, L, C] gives scales along the last axis; a slice or split along the
  channel axis keeps the scales of the channels it keeps), whatever the table
  says of the output (it was calibrated on the same values).
- avg_pool and reduce mean/sum: the sum of the window (or axes) in int32,
  times a multiplier holding input scale / (output scale x count), per
  channel with per-channel scales. Averages over windows of different sizes
  (padding not counted, ceil_mode) fall back to float.
- concat: each input requantized to the output's quantization by its own
  multiplier and shift; along the channel axis with per-channel scales (axis 1,
  or the last axis of features-last tensors), the output's scales are the
  inputs' side by side and nothing is requantized; along another axis with a
  per-channel output, each input is requantized per channel.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.kernels import op_kinds
from tpu_xdsl.kernels.conv_pool import tap_counts
from tpu_xdsl.kernels.quant import ChannelQParams
from tpu_xdsl.kernels.tensor import slice_bounds
from tpu_xdsl.transforms.lowering.context import (
    CHANNEL_RANKS,
    AnyQParams,
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

# Ops that move elements and keep each channel's values whole (concat and gather have their
# own patterns), nearest interpolation among them.
DATA_MOVEMENT_KINDS = tuple(sorted((op_kinds.MOVEMENT - {"concat", "gather"}) | op_kinds.RESIZE))


def moved_axis(op: Operation, axis: int | None) -> int | None:
    """Where a data-movement op puts the channels of its input's `axis` (1 or the last):
    the axis of each result that holds channel c of the input as channel c (1 or the
    result's last axis), or None when the op mixes, cuts or pads the channels."""
    source = shape(op.operands[0])
    if axis is None or len(source) not in CHANNEL_RANKS:
        return None
    kind = op.name.split(".", 1)[1]
    last = len(source) - 1
    found: set[int] = set()
    for result in op.results:
        target = shape(result)
        if len(target) not in CHANNEL_RANKS:
            return None
        if kind == "permute":
            moved = [a % len(source) for a in attr(op, "order")].index(axis)
        elif kind in op_kinds.RESHAPES:
            # Row-major order keeps channel c of the last axis while the last dimension
            # stays, and of axis 1 while the first two dimensions stay.
            if axis == last and target[-1] == source[-1]:
                moved = len(target) - 1
            elif axis == 1 and target[:2] == source[:2]:
                moved = 1
            else:
                return None
        elif len(target) != len(source) or target[axis] != source[axis]:
            return None
        else:
            moved = axis
        if moved not in (1, len(target) - 1):
            return None
        found.add(moved)
    match kind:
        case "slice" | "split":
            axes = attr(op, "axes") if kind == "slice" else [attr(op, "axis", 0)]
            if axis in [a % len(source) for a in (axes or [])]:
                return None
        case "pad":
            pads = list(attr(op, "pads"))
            if pads[axis] or pads[axis + len(source)] or float(attr(op, "value", 0.0)) != 0.0:
                return None
        case "depth2space":
            return None
        case "interp" | "upsample" if axis != 1:
            return None
    return found.pop() if len(found) == 1 else None


def picked_channels(op: Operation, axis: int | None) -> list[np.ndarray] | None:
    """For a slice or split along the channel `axis` of its input (and no other change of
    rank): the input channels each result keeps, in order; None otherwise."""
    source = shape(op.operands[0])
    if axis is None or len(source) not in CHANNEL_RANKS or any(len(shape(r)) != len(source) for r in op.results):
        return None
    channels = np.arange(source[axis])
    if op.name == "top.slice":
        axes = [a % len(source) for a in attr(op, "axes") or range(len(source))]
        if axis not in axes:
            return None
        at = axes.index(axis)
        steps = attr(op, "steps") or [1] * len(axes)
        return [channels[slice_bounds(source[axis], attr(op, "starts")[at], attr(op, "ends")[at], steps[at])]]
    if op.name == "top.split" and attr(op, "axis", 0) % len(source) == axis:
        return list(np.split(channels, np.cumsum(attr(op, "split"))[:-1]))
    return None


def _int8_input(pattern: Int8Pattern, op: Operation, channels: bool = False) -> tuple[SSAValue, AnyQParams]:
    x = pattern.ctx.as_int8(op.operands[0], op, channels=channels)
    return x, pattern.ctx.qparams(x)


class DataMovementInt8(Int8Pattern):
    """Ops that only move elements: the same op on the codes, the input's quantization."""

    kinds = DATA_MOVEMENT_KINDS

    def lower(self, op: Operation) -> Operation | None:
        if op.name == "top.interp" and attr(op, "mode", "nearest") != "nearest":
            self.ctx.decline(op, f"{attr(op, 'mode')} interpolation mixes values: no INT8 kernel")
            return None
        axis = self.ctx.value_axis(op.operands[0])
        picked = picked_channels(op, axis)
        moved = axis if picked is not None else moved_axis(op, axis)
        x = self.ctx.as_int8(op.operands[0], op, channels=moved is not None, axis=axis or 1)
        qparams = self.ctx.qparams(x)
        extra = {}
        if isinstance(qparams, ChannelQParams) and picked is not None:  # each result its channels' scales
            result_types = [
                self.ctx.result_type(op, ChannelQParams(qparams.scales[kept], qparams.dtype, axis=qparams.axis), i)
                for i, kept in enumerate(picked)
            ]
        else:
            if (
                op.name == "top.pad"
                and attr(op, "mode", "constant") == "constant"
                and not isinstance(qparams, ChannelQParams)
            ):
                extra["value"] = float(qparams.quantized_value(float(attr(op, "value", 0.0))))
            if isinstance(qparams, ChannelQParams) and moved is not None:
                qparams = ChannelQParams(qparams.scales, qparams.dtype, axis=moved)
            result_types = [self.ctx.result_type(op, qparams, i, like=x) for i in range(len(op.results))]
        if op.name == "top.split":
            result_types = [result_types]  # type: ignore[list-item]
        return build_tpu(op, [x], result_types, extra)


class MaxPoolInt8(Int8Pattern):
    """top.max_pool -> INT8 tpu.max_pool on the codes (the input's quantization)."""

    kinds = ("max_pool",)

    def lower(self, op: Operation) -> Operation | None:
        x, qparams = _int8_input(self, op, channels=True)
        extra = zero_point_attrs([], qparams)
        return build_tpu(op, [x], [self.ctx.result_type(op, qparams, like=x)], extra)


class AvgPoolInt8(Int8Pattern):
    """top.avg_pool -> INT8 tpu.avg_pool: window sum times si / (so x window size)."""

    kinds = ("avg_pool",)

    def lower(self, op: Operation) -> Operation | None:
        in_shape, out_shape = shape(op.operands[0]), shape(op.results[0])
        spatial = len(in_shape) - 2
        kernel_shape = list(attr(op, "kernel_shape"))
        pads = list(attr(op, "pads") or [0] * (2 * spatial))
        counts = tap_counts(
            in_shape[2:], out_shape[2:], kernel_shape, list(attr(op, "strides") or [1] * spatial),
            pads, [1] * spatial, bool(attr(op, "count_include_pad", False)),
        )
        # Padding left out of the count, or ceil_mode's overhang, make windows differ.
        if counts.size and counts.min() != counts.max():
            self.ctx.decline(op, "its windows cover different numbers of input pixels")
            return None
        count = float(counts.reshape(-1)[0]) if counts.size else 1.0
        return _rescaled(self, op, count, channels=len(in_shape) in CHANNEL_RANKS)


class ReduceInt8(Int8Pattern):
    """top.reduce mean/sum -> the axis sum times a multiplier; max/min -> on the codes."""

    kinds = ("reduce",)

    def lower(self, op: Operation) -> Operation | None:
        mode = attr(op, "mode")
        in_shape, out_shape = shape(op.operands[0]), shape(op.results[0])
        axes = [a % len(in_shape) for a in (attr(op, "axes") or range(len(in_shape)))]
        channels = (
            len(in_shape) in CHANNEL_RANKS and len(out_shape) in CHANNEL_RANKS
            and 0 not in axes and 1 not in axes and out_shape[:2] == in_shape[:2]
        )
        if mode in ("max", "min"):
            x, qparams = _int8_input(self, op, channels=channels)
            return build_tpu(op, [x], [self.ctx.result_type(op, qparams, like=x)])
        if mode not in ("mean", "sum"):
            self.ctx.decline(op, f"reduce {mode} has no INT8 kernel")
            return None
        count = float(np.prod([in_shape[a] for a in axes])) if mode == "mean" else 1.0
        return _rescaled(self, op, count, channels)


def _rescaled(pattern: Int8Pattern, op: Operation, count: float, channels: bool) -> Operation:
    """An op summing `count` input values per output, then scaled to the output."""
    x, si = _int8_input(pattern, op, channels=channels)
    so = pattern.ctx.output_qparams(op, channels=channels, axis=1)
    width = shape(op.results[0])[1] if isinstance(si, ChannelQParams) or isinstance(so, ChannelQParams) else 1
    ratios = scale_vector(si, width) / (scale_vector(so, width) * count)
    multipliers, rshifts = per_channel_multipliers(ratios)
    extra = {**requant_attrs(multipliers, rshifts), **zero_point_attrs([si], so)}
    return build_tpu(op, [x], [pattern.ctx.result_type(op, so)], extra)


class ConcatInt8(Int8Pattern):
    """top.concat -> INT8 tpu.concat, each input requantized to the output; along the
    channel axis with per-channel scales (1, or the last), the inputs' scales side by side;
    along another axis, per channel to the output's per-channel scales."""

    kinds = ("concat",)

    def lower(self, op: Operation) -> Operation | None:
        for value in op.operands:
            if self.ctx.weight_array(value) is not None:
                self.ctx.decline(op, f"its input '{value_name(value)}' is a constant")
                return None
        out = shape(op.results[0])
        axis = int(attr(op, "axis")) % len(out)
        if len(out) in CHANNEL_RANKS and axis in (1, len(out) - 1):
            inputs = [self.ctx.as_int8(v, op, channels=True, axis=axis) for v in op.operands]
            params = [self.ctx.qparams(v) for v in inputs]
            dtypes = {p.dtype for p in params}
            if any(isinstance(p, ChannelQParams) for p in params) and len(dtypes) == 1:
                scales = np.concatenate([scale_vector(p, shape(v)[axis]) for p, v in zip(params, inputs)])
                so = ChannelQParams(scales.astype(np.float32), dtypes.pop(), axis=axis)
                return build_tpu(op, [inputs], [self.ctx.result_type(op, so)])
        channel = self.ctx.channel_axis(op.results[0])
        if channel is not None and channel != axis:
            return self.lower_per_channel(op, channel)
        inputs = [self.ctx.as_int8(v, op) for v in op.operands]
        params = [self.ctx.qparams(v) for v in inputs]
        so = self.ctx.output_qparams(op)
        extra = {}
        if any(p != so for p in params):
            multipliers, rshifts = per_channel_multipliers([p.scale / so.scale for p in params])  # type: ignore[union-attr]
            extra = {**requant_attrs(multipliers, rshifts), **zero_point_attrs(params, so)}
        return build_tpu(op, [inputs], [self.ctx.result_type(op, so)], extra)

    def lower_per_channel(self, op: Operation, channel: int) -> Operation:
        """Along another axis than the channels (a detector's levels joined along its
        anchors): each input requantized per channel to the output's per-channel scales,
        one multiplier and shift per input and channel (the first input's C, then the
        next's), so small channels stay small in every input."""
        inputs = [self.ctx.as_int8(v, op, channels=True, axis=channel) for v in op.operands]
        params = [self.ctx.qparams(v) for v in inputs]
        so = self.ctx.output_qparams(op, channels=True, axis=channel)
        count = shape(op.results[0])[channel]
        ratios = np.concatenate([scale_vector(p, count) / scale_vector(so, count) for p in params])
        multipliers, rshifts = per_channel_multipliers(ratios)
        extra = {**requant_attrs(multipliers, rshifts), **zero_point_attrs(params, so)}  # type: ignore[arg-type]
        if channel != 1:
            extra["channel_axis"] = channel
        return build_tpu(op, [inputs], [self.ctx.result_type(op, so)], extra)
