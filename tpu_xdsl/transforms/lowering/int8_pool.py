"""INT8 pattern families that keep scales coherent: pooling, reductions, concat, data movement.

- max_pool, reduce max/min and the data-movement ops (reshape, permute,
  slice, pad, nearest resize, ...) move or compare codes: their output keeps
  the input's quantization, whatever the table says of the output (it was
  calibrated on the same values).
- avg_pool and reduce mean/sum: the sum of the window (or axes) in int32,
  times one multiplier holding input scale / (output scale x count).
  Averages over windows of different sizes (padding not counted, ceil_mode)
  fall back to float.
- concat: each input requantized to the output's quantization by its own
  multiplier and shift.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpu_xdsl.dialects.quant_types import qparams_of, quantized_type
from tpu_xdsl.interp.kernels.conv_pool import tap_counts
from tpu_xdsl.quant import QParams
from tpu_xdsl.transforms.lowering.context import value_name
from tpu_xdsl.transforms.lowering.int8_common import (
    Int8Pattern,
    build_tpu,
    per_channel_multipliers,
    requant_attrs,
    zero_point_attrs,
)
from tpu_xdsl.transforms.matching import attr, shape

DATA_MOVEMENT_KINDS = (
    "reshape", "flatten", "squeeze", "unsqueeze", "permute", "slice", "split", "tile", "expand",
    "depth2space", "upsample", "pad", "interp",
)


def _int8_input(pattern: Int8Pattern, op: Operation) -> tuple[object, QParams]:
    x = pattern.ctx.as_int8(op.operands[0], op)
    qparams = qparams_of(x.type)
    assert qparams is not None
    return x, qparams


class DataMovementInt8(Int8Pattern):
    """Ops that only move elements: the same op on the codes, the input's quantization."""

    kinds = DATA_MOVEMENT_KINDS

    def lower(self, op: Operation) -> Operation | None:
        if op.name == "top.interp" and attr(op, "mode", "nearest") != "nearest":
            self.ctx.decline(op, f"{attr(op, 'mode')} interpolation mixes values: no INT8 kernel")
            return None
        x, qparams = _int8_input(self, op)
        extra = {}
        if op.name == "top.pad" and attr(op, "mode", "constant") == "constant":
            extra["value"] = float(qparams.quantized_value(float(attr(op, "value", 0.0))))
        result_types = [quantized_type(shape(r), qparams) for r in op.results]
        if op.name == "top.split":
            result_types = [result_types]  # type: ignore[list-item]
        return build_tpu(op, [x], result_types, extra)


class MaxPoolInt8(Int8Pattern):
    """top.max_pool -> INT8 tpu.max_pool on the codes (the input's quantization)."""

    kinds = ("max_pool",)

    def lower(self, op: Operation) -> Operation | None:
        x, qparams = _int8_input(self, op)
        extra = zero_point_attrs([], qparams)
        return build_tpu(op, [x], [quantized_type(shape(op.results[0]), qparams)], extra)


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
        return _rescaled(self, op, count)


class ReduceInt8(Int8Pattern):
    """top.reduce mean/sum -> the axis sum times a multiplier; max/min -> on the codes."""

    kinds = ("reduce",)

    def lower(self, op: Operation) -> Operation | None:
        mode = attr(op, "mode")
        in_shape = shape(op.operands[0])
        if mode in ("max", "min"):
            x, qparams = _int8_input(self, op)
            return build_tpu(op, [x], [quantized_type(shape(op.results[0]), qparams)])
        if mode not in ("mean", "sum"):
            self.ctx.decline(op, f"reduce {mode} has no INT8 kernel")
            return None
        axes = attr(op, "axes") or list(range(len(in_shape)))
        count = float(np.prod([in_shape[a % len(in_shape)] for a in axes])) if mode == "mean" else 1.0
        return _rescaled(self, op, count)


def _rescaled(pattern: Int8Pattern, op: Operation, count: float) -> Operation:
    """An op summing `count` input values per output, then scaled to the output."""
    x, si = _int8_input(pattern, op)
    so = pattern.ctx.output_qparams(op)
    multipliers, rshifts = per_channel_multipliers([si.scale / (so.scale * count)])
    extra = {**requant_attrs(multipliers, rshifts), **zero_point_attrs([si], so)}
    return build_tpu(op, [x], [quantized_type(shape(op.results[0]), so)], extra)


class ConcatInt8(Int8Pattern):
    """top.concat -> INT8 tpu.concat, each input requantized to the output."""

    kinds = ("concat",)

    def lower(self, op: Operation) -> Operation | None:
        for value in op.operands:
            if self.ctx.weight_array(value) is not None:
                self.ctx.decline(op, f"its input '{value_name(value)}' is a constant")
                return None
        inputs = [self.ctx.as_int8(v, op) for v in op.operands]
        params = [qparams_of(v.type) for v in inputs]
        so = self.ctx.output_qparams(op)
        extra = {}
        if any(p != so for p in params):
            multipliers, rshifts = per_channel_multipliers([p.scale / so.scale for p in params])  # type: ignore[union-attr]
            extra = {**requant_attrs(multipliers, rshifts), **zero_point_attrs(params, so)}  # type: ignore[arg-type]
        return build_tpu(op, [inputs], [quantized_type(shape(op.results[0]), so)], extra)
