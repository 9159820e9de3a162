"""Calibrated and quantized tensor types: the tensor encodings `#top.calibrated` and `#tpu.uniform`.

    tensor<1x16x8x8xf32, #top.calibrated<threshold, min, max>>   a calibrated float tensor
    tensor<1x16x8x8xi8, #tpu.uniform<scale, zero_point>>         an INT8 tensor: (q - zp) * scale

The element type says int8 (`i8`) or uint8 (`ui8`).
"""

from __future__ import annotations

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
    TensorType,
    f64,
    i64,
)
from xdsl.ir import Attribute

from tpu_xdsl.interp.dtypes import element_type, numpy_dtype
from tpu_xdsl.quant import QParams

FLOAT_TYPES = (Float32Type, Float16Type, BFloat16Type, Float64Type)


@dataclass(frozen=True)
class Calibration:
    """One row of a calibration table: the symmetric threshold, the observed min and max."""

    threshold: float
    min: float
    max: float


def _encoding(t: Attribute) -> Attribute | None:
    if not isinstance(t, TensorType):
        return None
    encoding = t.encoding
    return None if isinstance(encoding, NoneAttr) else encoding


def calibration_of(t: Attribute) -> Calibration | None:
    """The calibrated range a tensor type carries, if any."""
    from tpu_xdsl.dialects.top import CalibratedAttr  # type: ignore[attr-defined]

    encoding = _encoding(t)
    if not isinstance(encoding, CalibratedAttr):
        return None
    return Calibration(
        encoding.threshold.value.data, encoding.min.value.data, encoding.max.value.data  # type: ignore[attr-defined]
    )


def calibrated_type(t: TensorType, calibration: Calibration) -> TensorType:
    from tpu_xdsl.dialects.top import CalibratedAttr  # type: ignore[attr-defined]

    encoding = CalibratedAttr(
        FloatAttr(calibration.threshold, f64), FloatAttr(calibration.min, f64), FloatAttr(calibration.max, f64)
    )
    return TensorType(t.element_type, t.get_shape(), encoding)


def qparams_of(t: Attribute) -> QParams | None:
    """The quantization of an INT8 tensor type, if it is one."""
    from tpu_xdsl.dialects.tpu import UniformAttr  # type: ignore[attr-defined]

    encoding = _encoding(t)
    if not isinstance(encoding, UniformAttr):
        return None
    assert isinstance(t, TensorType)
    return QParams(
        encoding.scale.value.data,  # type: ignore[attr-defined]
        encoding.zero_point.value.data,  # type: ignore[attr-defined]
        numpy_dtype(t.element_type),
    )


def quantized_type(shape: tuple[int, ...] | list[int], qparams: QParams) -> TensorType:
    from tpu_xdsl.dialects.tpu import UniformAttr  # type: ignore[attr-defined]

    encoding = UniformAttr(FloatAttr(qparams.scale, f64), IntegerAttr(qparams.zero_point, i64))
    return TensorType(element_type(qparams.dtype), list(shape), encoding)


def plain_type(t: TensorType, dtype: np.dtype | None = None) -> TensorType:
    """The tensor type without encoding (in `dtype` when given)."""
    element = element_type(dtype) if dtype is not None else t.element_type
    return TensorType(element, t.get_shape())
