"""What the TOP -> TPU lowering patterns share: the options, the mode of each op, and the
conversions of values between float and INT8.

Patterns lower ops in program order, so the operands of the op being lowered
are already TPU values, and their types say how they are held: an int8/uint8
type with `#tpu.uniform<scale, zp>` (or, with per-channel activation scales,
`#tpu.channel_uniform<"entry", axis>`), or a float type (keeping its
`#top.calibrated` range when calibrated). `as_int8` and `as_float` insert the
`tpu.cast` (or `tpu.requant`, per channel to per tensor) a consumer needs, once
per value and type, right after the producer, so mixed precision needs no
separate pass.

Per-channel scales run along the axis the calibration table gives a tensor's
ranges (1 for [N, C, ...], the last for features-last [N, L, C]); a consumer
takes a per-channel operand as it is only along the axis it computes per
channel, and reads any other through a `tpu.requant` to one scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.dialects import op_class
from tpu_xdsl.dialects.attr_values import from_py
from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.dialects.quant_types import (
    FLOAT_TYPES,
    Calibration,
    calibration_of,
    is_quantized,
    qparams_of,
    quantized_type,
)
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.kernels.dtypes import element_type, numpy_dtype
from tpu_xdsl.kernels.quant import (
    ChannelQParams,
    QParams,
    activation_qparams,
    channel_qparams,
    quantize_multiplier,
)
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


def on_integers(op: Operation) -> bool:
    """Whether `op` reads and writes integer or boolean tensors only (byte codes, indices,
    masks): nothing of it is quantized, in any mode it computes as it is."""
    values = [v.type for v in (*op.operands, *op.results) if isinstance(v.type, TensorType)]
    return bool(values) and not any(is_float_tensor(t) or is_quantized(t) for t in values)


AnyQParams = QParams | ChannelQParams
# Ranks that have a channel axis per-channel activation scales run along: axis 1 of
# [N, C], [N, C, L], [N, C, H, W], [N, C, D, H, W], or the last of features-last tensors.
CHANNEL_RANKS = (2, 3, 4, 5)


def scale_vector(qparams: AnyQParams, channels: int) -> np.ndarray:
    """One scale per channel, broadcast from a per-tensor or one-channel quantization."""
    if isinstance(qparams, ChannelQParams):
        return np.broadcast_to(qparams.scales, (channels,)).astype(np.float64)
    return np.full(channels, qparams.scale)


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
        per_channel: bool = False,
    ):
        self.module = module
        self.chip = chip
        self.mode = mode
        self.asymmetric = asymmetric
        self.qtable = qtable or {}
        self.per_channel = per_channel
        self.weights = weights_of(module)
        # For per-channel values: the per-tensor quantization a consumer that needs one gets.
        self._per_tensor: dict[SSAValue, QParams] = {}
        # Ops without INT8 kernels run in the most precise float mode the chip has.
        self.fallback_mode = next(m for m in ("F32", "F16", "BF16") if chip.supports(m))
        self.fallbacks: list[Fallback] = []
        self._declined: dict[Operation, str] = {}
        # One-tensor functions fused into the lookup table of their user; they lower to nothing.
        self.fused: set[Operation] = set()
        self._conversions: dict[tuple[SSAValue, Attribute], SSAValue] = {}
        self._channel_casts: dict[SSAValue, SSAValue] = {}  # float values cast per channel
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
        if mode in FLOAT_MODES or on_integers(op):
            return mode if mode in FLOAT_MODES else self.fallback_mode
        reason = self._declined.get(op, "no INT8 implementation")
        self.fallbacks.append(Fallback(", ".join(tensor_names(op)) or "unnamed", op.name, self.fallback_mode, reason))
        return self.fallback_mode

    # -- quantization parameters -------------------------------------------------

    def qparams(self, value: SSAValue) -> AnyQParams:
        found = qparams_of(value.type, self.weights)
        assert found is not None, f"{value_name(value)} is not INT8"
        return found

    def _calibration(self, value: SSAValue, what: str) -> Calibration:
        calibration = calibration_of(value.type)
        if calibration is None:
            raise LoweringError(
                f"tensor '{value_name(value)}' {what} has no calibrated range: the calibration table has no "
                "row for it; use the table made for this model, or run the op in a float mode with a "
                "quantize table"
            )
        return calibration

    def calibrated_qparams(self, value: SSAValue, user: Operation) -> QParams:
        calibration = self._calibration(value, f"read by INT8 {describe(user)}")
        return activation_qparams(calibration.threshold, calibration.min, calibration.max, self.asymmetric)

    def channel_axis(self, value: SSAValue) -> int | None:
        """The axis per-channel scales of TOP result `value` run along: the axis of its
        calibrated per-channel ranges; None when it has none or scales are per tensor."""
        calibration = calibration_of(value.type)
        rank = len(value.type.get_shape()) if isinstance(value.type, TensorType) else 0
        if not (self.per_channel and calibration is not None and calibration.ranges and rank in CHANNEL_RANKS):
            return None
        return calibration.axis

    def value_axis(self, value: SSAValue) -> int | None:
        """The axis of an INT8 value's per-channel scales; None when it has one scale or
        is not INT8."""
        if not is_quantized(value.type):
            return None
        qparams = self.qparams(value)
        return qparams.axis if isinstance(qparams, ChannelQParams) else None

    def preferred_axis(self, op: Operation, *inputs: SSAValue) -> int | None:
        """The axis an op that can compute along any channel axis (elementwise ops, tables)
        works along: its result's calibrated axis, else that of the first per-channel
        input of the result's shape (whose scales it then keeps)."""
        axis = self.channel_axis(op.results[0])
        if axis is not None:
            return axis
        out = op.results[0].type.get_shape()  # type: ignore[attr-defined]
        for value in inputs:
            found = self.value_axis(value)
            if found is not None and value.type.get_shape() == out:  # type: ignore[attr-defined]
                return found
        return None

    def output_qparams(
        self, op: Operation, index: int = 0, channels: bool = False, axis: int | None = None
    ) -> AnyQParams:
        """The quantization of a TOP op's result from its calibrated range (a fused ReLU
        clips the range). Per channel when asked (`channels`), enabled, and the table
        has the result's per-channel ranges (along `axis`, when given)."""
        value = op.results[index]
        calibration = self._calibration(value, f"of {describe(op)}")
        low, high = calibration.min, calibration.max
        relu = bool(attr(op, "do_relu", False))
        limit = attr(op, "relu_limit") if relu else None
        if relu:
            low = max(low, 0.0)
            if limit is not None and limit > 0:
                high = min(high, float(limit))
        per_tensor = activation_qparams(calibration.threshold, low, high, self.asymmetric)
        found_axis = self.channel_axis(value)
        if not channels or found_axis is None or (axis is not None and found_axis != axis):
            return per_tensor
        assert calibration.ranges, "channel_axis finds an axis only for calibrated per-channel ranges"
        ranges = np.asarray(self.weights[calibration.ranges], np.float64)
        lows, highs = ranges[0], ranges[1]
        if relu:
            lows = np.maximum(lows, 0.0)
            if limit is not None and limit > 0:
                highs = np.minimum(highs, float(limit))
        found = channel_qparams(lows, highs, calibration.threshold)
        # Scales are stored as float32 (the weight entry): use exactly what is stored.
        return ChannelQParams(found.scales.astype(np.float32), found.dtype, axis=found_axis)

    def result_type(
        self, op: Operation, qparams: AnyQParams, index: int = 0, like: SSAValue | None = None
    ) -> TensorType:
        """The INT8 type of `op`'s result `index`. Per-channel scales go to a new weight
        entry (or the entry of `like`, a value with the same scales); the per-tensor
        quantization a consumer may need instead is remembered."""
        value = op.results[index]
        shape = value.type.get_shape()  # type: ignore[attr-defined]
        if not isinstance(qparams, ChannelQParams):
            return quantized_type(shape, qparams)
        if like is not None and is_quantized(like.type):
            entry = like.type.encoding.scales.data  # type: ignore[attr-defined]
        else:
            entry = self.weights.unique_name(f"{value_name(value)}_scales")
            self.weights[entry] = qparams.scales.astype(np.float32)
        return quantized_type(shape, qparams, entry)

    def remember_per_tensor(
        self, new_value: SSAValue, op: Operation, index: int = 0, like: SSAValue | None = None
    ) -> None:
        """Record the per-tensor quantization of a per-channel result: from the TOP
        result's own calibrated range, else that of `like`."""
        if not isinstance(qparams_of(new_value.type, self.weights), ChannelQParams):
            return
        calibration = calibration_of(op.results[index].type)
        if calibration is not None:
            self._per_tensor[new_value] = activation_qparams(
                calibration.threshold, calibration.min, calibration.max, self.asymmetric
            )
        elif like is not None and like in self._per_tensor:
            self._per_tensor[new_value] = self._per_tensor[like]

    # -- conversions ------------------------------------------------------------------

    def as_int8(self, value: SSAValue, user: Operation, channels: bool = False, axis: int = 1) -> SSAValue:
        """`value` as an INT8 tensor: itself, a quantizing `tpu.cast` of it, or (for a
        per-channel value read by an op that needs one scale, `channels` False, or that
        computes per channel along another axis than `axis`) a `tpu.requant` to its
        per-tensor quantization."""
        t = value.type
        if is_quantized(t):
            qparams = self.qparams(value)
            if not isinstance(qparams, ChannelQParams):
                return value
            rank = len(t.get_shape())  # type: ignore[attr-defined]
            if channels and qparams.axis == axis % max(rank, 1):
                return value
            return self._to_per_tensor(value, qparams)
        if not is_float_tensor(t):
            raise LoweringError(f"INT8 {describe(user)} reads '{value_name(value)}' of type {t}")
        rank = len(t.get_shape())  # type: ignore[attr-defined]
        found_axis = self.channel_axis(value)
        owner = value.owner
        computed = isinstance(owner, Operation) and owner.name != "top.input"
        if channels and computed and found_axis is not None and found_axis == axis % max(rank, 1):
            # A float op's result (mixed precision, a fallback) read by an op that takes
            # per-channel scales is quantized per channel, as an INT8 producer of it would
            # give it: one scale for a tensor whose channels differ by orders of magnitude
            # loses the small ones. The model's input keeps one scale, as TPU-MLIR casts
            # it (and a stem conv folds its taps into channels only on one scale).
            return self._quantized_per_channel(value)
        per_tensor = self.calibrated_qparams(value, user)
        target = quantized_type(t.get_shape(), per_tensor)  # type: ignore[attr-defined]
        suffix = "int8" if per_tensor.dtype == np.int8 else "uint8"
        return self._convert(value, target, f"{value_name(value)}_{suffix}", per_tensor)

    def _quantized_per_channel(self, value: SSAValue) -> SSAValue:
        """A quantizing `tpu.cast` of float op result `value` with the per-channel scales an
        INT8 op computing it would give its result (`output_qparams`, `result_type`); one
        cast per value, whoever reads it."""
        if value in self._channel_casts:
            return self._channel_casts[value]
        owner, index = value.owner, value.index  # type: ignore[attr-defined]
        assert isinstance(owner, Operation), "as_int8 casts per channel only the results of ops"
        qparams = self.output_qparams(owner, index, channels=True)
        target = self.result_type(owner, qparams, index)
        suffix = "int8" if qparams.dtype == np.int8 else "uint8"
        cast = self.cast_op(value, target, f"{value_name(value)}_{suffix}", qparams)
        converted = self._insert_after_producer(value, cast, (value, target), *cast.operands[1:])
        self._channel_casts[value] = converted
        self.remember_per_tensor(converted, owner, index)
        return converted

    def _to_per_tensor(self, value: SSAValue, qparams: ChannelQParams) -> SSAValue:
        target_qparams = self._per_tensor[value]
        target = quantized_type(value.type.get_shape(), target_qparams)  # type: ignore[attr-defined]
        key = (value, target)
        if key in self._conversions:
            return self._conversions[key]
        pairs = [quantize_multiplier(float(s / target_qparams.scale)) for s in qparams.scales]

        attributes = {
            "names": ArrayAttr([StringAttr(f"{value_name(value)}_per_tensor")]),
            "multiplier": from_py([m for m, _ in pairs]),
            "rshift": from_py([r for _, r in pairs]),
            "axis": from_py(qparams.axis),
            "round_mode": from_py("half_away_from_zero"),
        }
        if target_qparams.zero_point:
            attributes["zero_point"] = from_py(target_qparams.zero_point)
        op = op_class("tpu.requant").build(operands=[value], result_types=[target], attributes=attributes)
        return self._insert_after_producer(value, op, key)

    def erase_unused_conversions(self) -> int:
        """Erase the conversions made for a reader that then was lowered another way
        (a concatenation asks for its inputs on one scale, then takes them per channel):
        each is an op the device would run for nothing. How many were erased."""
        erased = 0
        changed = True
        while changed:
            changed = False
            for key, value in list(self._conversions.items()):
                owner = value.owner
                if isinstance(owner, Operation) and owner.parent is not None and value.first_use is None:
                    owner.detach()
                    owner.erase()
                    del self._conversions[key]
                    erased += 1
                    changed = True
        return erased

    def as_float(self, value: SSAValue, dtype: np.dtype) -> SSAValue:
        """`value` in the float type `dtype`: itself, or a converting `tpu.cast`."""
        t = value.type
        if not isinstance(t, TensorType):
            return value
        qparams = qparams_of(t, self.weights)
        if qparams is None and (not is_float_tensor(t) or numpy_dtype(t.element_type) == dtype):
            return value
        target = TensorType(element_type(dtype), t.get_shape(), t.encoding if qparams is None else _no_encoding())
        return self._convert(value, target, f"{value_name(value)}_{dtype}", qparams)

    def _convert(self, value: SSAValue, target: TensorType, name: str, qparams: AnyQParams | None) -> SSAValue:
        key = (value, target)
        if key in self._conversions:
            return self._conversions[key]
        cast = self.cast_op(value, target, name, qparams)
        return self._insert_after_producer(value, cast, key, *cast.operands[1:])

    def cast_op(self, value: SSAValue, target: TensorType, name: str, qparams: AnyQParams | None) -> Operation:
        """A detached `tpu.cast` of `value` to `target`; per-channel scales are read by a
        `top.weight` of their entry (the cast's second operand; the entry of whichever of
        the two is INT8), inserted before the cast."""
        attributes: dict[str, Attribute] = {"names": ArrayAttr([StringAttr(name)])}
        scales: list[SSAValue] = []
        if isinstance(qparams, QParams):
            attributes["scale"] = from_py(qparams.scale)
            if qparams.zero_point:
                attributes["zero_point"] = from_py(qparams.zero_point)
        elif isinstance(qparams, ChannelQParams):
            quantized = target if is_quantized(target) else value.type
            entry = quantized.encoding.scales.data  # type: ignore[attr-defined]
            reader = op_class("top.weight").build(
                result_types=[TensorType(element_type(np.float32), [qparams.scales.size])],
                attributes={"names": ArrayAttr([StringAttr(entry)])},
            )
            scales.append(reader.results[0])
            if qparams.axis != 1:
                attributes["channel_axis"] = from_py(qparams.axis)
        return op_class("tpu.cast").build(operands=[value, scales], result_types=[target], attributes=attributes)

    def _insert_after_producer(self, value: SSAValue, op: Operation, key, *readers: SSAValue) -> SSAValue:
        owner = value.owner
        point = InsertPoint.after(owner) if isinstance(owner, Operation) else InsertPoint.at_start(owner)  # type: ignore[arg-type]
        for reader in readers:
            Rewriter.insert_op(reader.owner, point)  # type: ignore[arg-type]
            point = InsertPoint.after(reader.owner)  # type: ignore[arg-type]
        Rewriter.insert_op(op, point)
        self._conversions[key] = op.results[0]
        return op.results[0]

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
            array = np.asarray(weights_of(self.module)[name])
            largest = float(ml_dtypes.finfo(dtype).max)
            if array.dtype.kind == "f" and largest < float(np.finfo(array.dtype).max):
                # A value beyond the storage type's range (the dynamo exporter's attention mask
                # of -FLT_MAX) saturates to its largest finite value instead of becoming inf.
                array = np.clip(array, -largest, largest)
            array = array.astype(dtype)
            self._float_weights[key] = create_weight(
                self.module, f"{name}_{dtype}", array, insert_before=owner.next_op or owner
            )
        return self._float_weights[key]

    def held_weight(self, value: SSAValue, dtype: np.dtype) -> SSAValue:
        """An integer `top.weight` operand in the type TPU ops hold it in (`feeds.HELD_AS`:
        a mask's bool as int8, int64 as int32; a new, converted weight)."""
        owner = value.owner
        assert isinstance(owner, Operation)
        name = weight_name(owner)
        key = (name, str(dtype))
        if key not in self._float_weights:
            array = np.asarray(weights_of(self.module)[name])
            info = np.iinfo(dtype)
            if array.size and (array.min() < info.min or array.max() > info.max):
                raise LoweringError(f"constant '{name}' holds values beyond {dtype}, the type TPU ops hold "
                                    f"{array.dtype} in; keep the op that reads it out of the model")
            self._float_weights[key] = create_weight(
                self.module, f"{name}_{dtype}", array.astype(dtype), insert_before=owner.next_op or owner
            )
        return self._float_weights[key]


def _no_encoding() -> Attribute:
    from xdsl.dialects.builtin import NoneAttr

    return NoneAttr()


def main_block(module: ModuleOp) -> Block:
    return main_func(module).body.block
