"""A pre-quantized model's own scales and zero points as the project's calibration.

A QDQ or QOperator ONNX model (onnxruntime's `quantize_static`, QAT exporters)
says how each quantized activation is held: real = (q - zero_point) * scale,
q in int8 or uint8. `TensorScale.calibration` gives the calibrated range
(threshold, min, max) from which INT8 lowering (`quant.activation_qparams`)
derives exactly that scale and zero point again:

- int8, zero point 0: symmetric int8, threshold 128 S, range [-128 S, 127 S]
  (S = threshold / 128);
- uint8 with zero point 0, or int8 with zero point -128 (the same codes
  shifted): never negative, threshold 256 S, range [0, 255 S]
  (S = threshold / 256);
- any other zero point: asymmetric. Its uint8 zero point z (an int8 one plus
  128: the same real values) gives the range [-z S, (255 - z) S], which
  asymmetric lowering maps back to S = range / 255 and zero point z.

Every bound is a float32 scale times an integer below 2^9, exact in float64,
so the scale and zero point come back bit for bit. Symmetric and unsigned
tensors map back exactly in asymmetric mode too (int8 zero point 0 is uint8
zero point 128); asymmetric ones need it (`needs_asymmetric`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.dialects.quant_types import FLOAT_TYPES, Calibration, calibration_of

# The module attribute that says where a TOP module's calibration came from.
SOURCE_ATTR = "module.calibration"
MODEL_SOURCE = "model"


@dataclass(frozen=True)
class TensorScale:
    """How a pre-quantized model holds one activation: real = (q - zero_point) * scale."""

    scale: float
    zero_point: int
    dtype: np.dtype

    @classmethod
    def of(cls, scale: np.ndarray, zero_point: np.ndarray | None, dtype: np.dtype) -> TensorScale:
        """From a QuantizeLinear's scale and zero point inputs (one value each)."""
        s = float(np.float32(np.asarray(scale).reshape(-1)[0]))
        z = 0 if zero_point is None else int(np.asarray(zero_point).reshape(-1)[0])
        return cls(s, z, np.dtype(dtype))

    @property
    def unsigned_zero_point(self) -> int:
        """The uint8 code of real 0 (an int8 code plus 128 stands for the same value)."""
        return self.zero_point + 128 if self.dtype == np.int8 else self.zero_point

    @property
    def symmetric(self) -> bool:
        """Symmetric int8 or never-negative codes: exact in symmetric INT8."""
        return (self.dtype == np.int8 and self.zero_point == 0) or self.unsigned_zero_point == 0

    def calibration(self) -> Calibration:
        s = self.scale
        if self.dtype == np.int8 and self.zero_point == 0:
            return Calibration(128 * s, -128 * s, 127 * s)
        z = self.unsigned_zero_point
        if z == 0:
            return Calibration(256 * s, 0.0, 255 * s)
        low, high = -z * s, (255 - z) * s
        return Calibration(max(-low, high), low, high)


def needs_asymmetric(calibrations: Iterable[Calibration]) -> bool:
    """Whether ranges made by `TensorScale.calibration` include an asymmetric one (a zero
    point inside the codes): symmetric INT8 would change its scale."""
    return any(c.min < 0 and c.min != -c.threshold for c in calibrations)


def module_needs_asymmetric(module) -> bool:
    """`needs_asymmetric` over every calibrated tensor of @main of a TOP module."""
    found = (calibration_of(r.type) for op in main_func(module).body.block.ops for r in op.results)
    return needs_asymmetric(c for c in found if c is not None)


def is_model_calibrated(module) -> bool:
    """Whether a TOP module's calibration is the model's own scales (a pre-quantized ONNX)."""
    from xdsl.dialects.builtin import StringAttr

    source = module.attributes.get(SOURCE_ATTR)
    return isinstance(source, StringAttr) and source.data == MODEL_SOURCE


def model_float_ops(module) -> list[str]:
    """The first tensor name of each op of @main that the model computes in float: one with
    a float result or a float activation operand that has no scale of the model
    (onnxruntime runs such an op in float between DequantizeLinear and QuantizeLinear), and
    a BatchNorm kept apart from its conv (`top.scale`): onnxruntime computes it in float
    between its codes, and INT8's int32 bias steps would move a few codes that a BatchNorm's
    large gains amplify further on."""
    def unscaled(value) -> bool:
        t = value.type
        return isinstance(getattr(t, "element_type", None), FLOAT_TYPES) and calibration_of(t) is None

    kept = []
    for op in main_func(module).body.block.ops:
        if not op.name.startswith("top.") or op.name in ("top.input", "top.weight", "top.none"):
            continue
        activations = [v for v in op.operands if getattr(v.owner, "name", None) not in ("top.weight", "top.none")]
        names = tensor_names(op)
        if not names:
            continue
        if op.name == "top.scale" or any(unscaled(r) for r in op.results) or any(unscaled(v) for v in activations):
            kept.append(names[0])
    return kept
