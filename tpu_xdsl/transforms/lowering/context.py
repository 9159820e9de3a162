"""What the TOP -> TPU lowering patterns share: the options, the mode of each op, and the
conversions of values between float and INT8.

Patterns lower ops in program order, so the operands of the op being lowered
are already TPU values, and their types say how they are held: an int8/uint8
type with `#tpu.uniform<scale, zp>`, or a float type (keeping its
`#top.calibrated` range when calibrated). `as_int8` and `as_float` insert the
`tpu.cast` a consumer needs (once per value and type, right after the
producer), so mixed precision needs no separate pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.dialects import op_class
from tpu_xdsl.dialects.quant_types import (
    FLOAT_TYPES,
    calibration_of,
    qparams_of,
    quantized_type,
)
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.interp.dtypes import element_type, numpy_dtype
from tpu_xdsl.interp.runner import tensor_names
from tpu_xdsl.quant import QParams, activation_qparams
from tpu_xdsl.transforms.matching import attr
from tpu_xdsl.weights import create_weight, weight_name, weights_of

FLOAT_MODES = ("F32", "F16", "BF16")


class LoweringError(TpuXdslError):
    """A TOP module cannot be lowered as asked."""


def storage_dtype(mode: str) -> np.dtype:
    """The element type a float mode stores tensors in."""
    if mode == "BF16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype({"F32": np.float32, "F16": np.float16}[mode])


def describe(op: Operation) -> str:
    """'top.conv' (conv1): how messages name an op."""
    return f"'{op.name}' ({', '.join(tensor_names(op)) or 'unnamed'})"


def value_name(value: SSAValue, fallback: str = "tensor") -> str:
    """The tensor name of a value: its producer's name for that result."""
    owner = value.owner
    if isinstance(owner, Operation):
        names = tensor_names(owner)
        index = owner.results.index(value) if value in owner.results else 0
        if index < len(names):
            return names[index]
    return fallback


def is_float_tensor(t: Attribute) -> bool:
    return isinstance(t, TensorType) and isinstance(t.element_type, FLOAT_TYPES)


@dataclass(frozen=True)
class Fallback:
    """An op asked to run in INT8 that runs in a float mode instead, and why."""

    name: str
    op: str
    mode: str
    reason: str


class LoweringContext:
    """The options of one lowering and the state its patterns share."""

    def __init__(
        self,
        module: ModuleOp,
        chip: ChipConfig,
        mode: str,
        asymmetric: bool = False,
        qtable: dict[str, str] | None = None,
    ):
        self.module = module
        self.chip = chip
        self.mode = mode
        self.asymmetric = asymmetric
        self.qtable = qtable or {}
        # Ops without INT8 kernels run in the most precise float mode the chip has.
        self.fallback_mode = next(m for m in ("F32", "F16", "BF16") if chip.supports(m))
        self.fallbacks: list[Fallback] = []
        self._declined: dict[Operation, str] = {}
        self._conversions: dict[tuple[SSAValue, Attribute], SSAValue] = {}
        self._float_weights: dict[tuple[str, str], SSAValue] = {}

    # -- modes ---------------------------------------------------------------------

    def op_mode(self, op: Operation) -> str:
        """The mode the quantize table gives the op (by any of its tensor names), else the module's."""
        for name in tensor_names(op):
            if name in self.qtable:
                return self.qtable[name]
        return self.mode

    def decline(self, op: Operation, reason: str) -> None:
        """An INT8 pattern cannot lower `op`: it falls back to a float mode, for `reason`."""
        self._declined[op] = reason

    def float_mode_of(self, op: Operation) -> str:
        """The float mode `op` runs in, recording a fallback when it was asked to run in INT8."""
        mode = self.op_mode(op)
        if mode in FLOAT_MODES:
            return mode
        reason = self._declined.get(op, "no INT8 implementation")
        self.fallbacks.append(Fallback(", ".join(tensor_names(op)) or "unnamed", op.name, self.fallback_mode, reason))
        return self.fallback_mode

    # -- quantization parameters -------------------------------------------------

    def calibrated_qparams(self, value: SSAValue, user: Operation) -> QParams:
        calibration = calibration_of(value.type)
        if calibration is None:
            raise LoweringError(
                f"tensor '{value_name(value)}' has no calibrated range, but INT8 {describe(user)} needs one: "
                "the calibration table has no row for it; use the table made for this model, "
                "or run the op in a float mode with a quantize table"
            )
        return activation_qparams(calibration.threshold, calibration.min, calibration.max, self.asymmetric)

    def output_qparams(self, op: Operation, index: int = 0) -> QParams:
        """The quantization of a TOP op's result from its calibrated range (a fused
        ReLU's limit clips the range)."""
        value = op.results[index]
        calibration = calibration_of(value.type)
        if calibration is None:
            raise LoweringError(
                f"tensor '{value_name(value)}' of {describe(op)} has no calibrated range: the calibration "
                "table has no row for it; use the table made for this model, or run the op in a float mode "
                "with a quantize table"
            )
        low, high = calibration.min, calibration.max
        if attr(op, "do_relu", False):
            low = max(low, 0.0)
            limit = attr(op, "relu_limit")
            if limit is not None and limit > 0:
                high = min(high, float(limit))
        return activation_qparams(calibration.threshold, low, high, self.asymmetric)

    # -- conversions ------------------------------------------------------------------

    def as_int8(self, value: SSAValue, user: Operation) -> SSAValue:
        """`value` as an INT8 tensor: itself, or a quantizing `tpu.cast` of it."""
        if qparams_of(value.type) is not None:
            return value
        if not is_float_tensor(value.type):
            raise LoweringError(f"INT8 {describe(user)} reads '{value_name(value)}' of type {value.type}")
        qparams = self.calibrated_qparams(value, user)
        target = quantized_type(value.type.get_shape(), qparams)  # type: ignore[attr-defined]
        suffix = "int8" if qparams.dtype == np.int8 else "uint8"
        return self._convert(value, target, f"{value_name(value)}_{suffix}", qparams)

    def as_float(self, value: SSAValue, dtype: np.dtype) -> SSAValue:
        """`value` in the float type `dtype`: itself, or a converting `tpu.cast`."""
        t = value.type
        if not isinstance(t, TensorType):
            return value
        qparams = qparams_of(t)
        if qparams is None and (not is_float_tensor(t) or numpy_dtype(t.element_type) == dtype):
            return value
        target = TensorType(element_type(dtype), t.get_shape(), t.encoding if qparams is None else _no_encoding())
        return self._convert(value, target, f"{value_name(value)}_{dtype}", qparams)

    def _convert(self, value: SSAValue, target: TensorType, name: str, qparams: QParams | None) -> SSAValue:
        key = (value, target)
        if key in self._conversions:
            return self._conversions[key]
        attributes: dict[str, Attribute] = {"names": ArrayAttr([StringAttr(name)])}
        if qparams is not None:
            from tpu_xdsl.dialects.attr_values import from_py

            attributes["scale"] = from_py(qparams.scale)
            if qparams.zero_point:
                attributes["zero_point"] = from_py(qparams.zero_point)
        cast = op_class("tpu.cast").build(operands=[value], result_types=[target], attributes=attributes)
        owner = value.owner
        point = InsertPoint.after(owner) if isinstance(owner, Operation) else InsertPoint.at_start(owner)  # type: ignore[arg-type]
        Rewriter.insert_op(cast, point)
        self._conversions[key] = cast.results[0]
        return cast.results[0]

    # -- weights -------------------------------------------------------------------------

    def weight_array(self, value: SSAValue) -> np.ndarray | None:
        """The float array of a `top.weight` operand, else None."""
        owner = value.owner
        if not isinstance(owner, Operation) or owner.name != "top.weight":
            return None
        return np.asarray(weights_of(self.module)[weight_name(owner)])

    def add_weight(self, base_name: str, array: np.ndarray, before: Operation) -> SSAValue:
        return create_weight(self.module, base_name, array, insert_before=before)

    def float_weight(self, value: SSAValue, dtype: np.dtype) -> SSAValue:
        """A float `top.weight` operand in the storage type (a new, converted weight)."""
        owner = value.owner
        assert isinstance(owner, Operation)
        t = value.type
        assert isinstance(t, TensorType)
        if not isinstance(t.element_type, FLOAT_TYPES) or numpy_dtype(t.element_type) == dtype:
            return value
        name = weight_name(owner)
        key = (name, str(dtype))
        if key not in self._float_weights:
            array = np.asarray(weights_of(self.module)[name]).astype(dtype)
            self._float_weights[key] = create_weight(
                self.module, f"{name}_{dtype}", array, insert_before=owner.next_op or owner
            )
        return self._float_weights[key]


def _no_encoding() -> Attribute:
    from xdsl.dialects.builtin import NoneAttr

    return NoneAttr()


def main_block(module: ModuleOp) -> Block:
    from tpu_xdsl.interp.runner import main_func

    return main_func(module).body.block
