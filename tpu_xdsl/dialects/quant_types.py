"""Calibrated and quantized tensor types: the tensor encodings `#top.calibrated` and `#tpu.uniform`.

    tensor<1x16x8x8xf32, #top.calibrated<threshold, min, max>>   a calibrated float tensor
    tensor<1x16x8x8xf32, #top.channel_calibrated<threshold, min, max, "entry", axis>>
                                                                 ... with per-channel ranges
    tensor<1x16x8x8xi8, #tpu.uniform<scale, zero_point>>         an INT8 tensor: (q - zp) * scale
    tensor<1x16x8x8xi8, #tpu.channel_uniform<"entry", axis>>     q * scales[c] along `axis`

The element type says int8 (`i8`) or uint8 (`ui8`). Per-channel arrays live in
the weight file under the entry the encoding names, so the IR stays small.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    NoneAttr,
    StringAttr,
    TensorType,
    f64,
    i64,
)
from xdsl.ir import Attribute

from tpu_xdsl.kernels.dtypes import element_type, numpy_dtype
from tpu_xdsl.kernels.quant import ChannelQParams, QParams

FLOAT_TYPES = (Float32Type, Float16Type, BFloat16Type, Float64Type)


@dataclass(frozen=True)
class Calibration:
    """One row of a calibration table: the symmetric threshold, the observed min and max;
    `ranges` names the weight entry [2, C] of per-channel min and max, if any, with the
    channels along `axis`."""

    threshold: float
    min: float
    max: float
    ranges: str | None = None
    axis: int = 1


def _encoding(t: Attribute) -> Attribute | None:
    if not isinstance(t, TensorType):
        return None
    encoding = t.encoding
    return None if isinstance(encoding, NoneAttr) else encoding


def calibration_of(t: Attribute) -> Calibration | None:
    """The calibrated range a tensor type carries, if any."""
    from tpu_xdsl.dialects.top import CalibratedAttr, ChannelCalibratedAttr  # type: ignore[attr-defined]

    encoding = _encoding(t)
    if isinstance(encoding, CalibratedAttr):
        return Calibration(
            encoding.threshold.value.data, encoding.min.value.data, encoding.max.value.data  # type: ignore[attr-defined]
        )
    if isinstance(encoding, ChannelCalibratedAttr):
        return Calibration(
            encoding.threshold.value.data,  # type: ignore[attr-defined]
            encoding.min.value.data,  # type: ignore[attr-defined]
            encoding.max.value.data,  # type: ignore[attr-defined]
            encoding.ranges.data,  # type: ignore[attr-defined]
            encoding.axis.value.data,  # type: ignore[attr-defined]
        )
    return None


def calibrated_type(t: TensorType, calibration: Calibration) -> TensorType:
    from tpu_xdsl.dialects.top import CalibratedAttr, ChannelCalibratedAttr  # type: ignore[attr-defined]

    values = (FloatAttr(calibration.threshold, f64), FloatAttr(calibration.min, f64), FloatAttr(calibration.max, f64))
    if calibration.ranges is None:
        encoding = CalibratedAttr(*values)
    else:
        encoding = ChannelCalibratedAttr(*values, StringAttr(calibration.ranges), IntegerAttr(calibration.axis, i64))
    return TensorType(t.element_type, t.get_shape(), encoding)


def qparams_of(t: Attribute, weights: Mapping[str, np.ndarray] | None = None) -> QParams | ChannelQParams | None:
    """The quantization of an INT8 tensor type, if it is one (per-channel scales are read
    from `weights`, the module's weight table)."""
    from tpu_xdsl.dialects.tpu import ChannelUniformAttr, UniformAttr  # type: ignore[attr-defined]

    encoding = _encoding(t)
    if isinstance(encoding, UniformAttr):
        assert isinstance(t, TensorType)
        return QParams(
            encoding.scale.value.data,  # type: ignore[attr-defined]
            encoding.zero_point.value.data,  # type: ignore[attr-defined]
            numpy_dtype(t.element_type),
        )
    if isinstance(encoding, ChannelUniformAttr):
        assert isinstance(t, TensorType)
        if weights is None:
            raise ValueError("per-channel quantization: the scales are in the weight table; pass it")
        return ChannelQParams(
            np.asarray(weights[encoding.scales.data]),  # type: ignore[attr-defined]
            numpy_dtype(t.element_type),
            axis=encoding.axis.value.data,  # type: ignore[attr-defined]
        )
    return None


def is_quantized(t: Attribute) -> bool:
    """Whether a type is an INT8 tensor type (per tensor or per channel)."""
    from tpu_xdsl.dialects.tpu import ChannelUniformAttr, UniformAttr  # type: ignore[attr-defined]

    return isinstance(_encoding(t), UniformAttr | ChannelUniformAttr)


def quantized_type(
    shape: tuple[int, ...] | list[int], qparams: QParams | ChannelQParams, scales_entry: str | None = None
) -> TensorType:
    """The INT8 tensor type; per-channel quantization names the weight entry of its scales."""
    from tpu_xdsl.dialects.tpu import ChannelUniformAttr, UniformAttr  # type: ignore[attr-defined]

    if isinstance(qparams, ChannelQParams):
        if scales_entry is None:
            raise ValueError("a per-channel quantized type needs the weight entry of its scales")
        encoding = ChannelUniformAttr(StringAttr(scales_entry), IntegerAttr(qparams.axis, i64))
        return TensorType(element_type(qparams.dtype), list(shape), encoding)
    encoding = UniformAttr(FloatAttr(qparams.scale, f64), IntegerAttr(qparams.zero_point, i64))
    return TensorType(element_type(qparams.dtype), list(shape), encoding)


def plain_type(t: TensorType, dtype: np.dtype | None = None) -> TensorType:
    """The tensor type without encoding (in `dtype` when given)."""
    element = element_type(dtype) if dtype is not None else t.element_type
    return TensorType(element, t.get_shape())
