"""INT8 pattern families of elementwise ops: rescaled add/sub/mul, and lookup tables.

- add, sub of two tensors: each input rescaled to the output scale by its own
  multiplier over one shared right shift; mul: one multiplier for the
  product of the two scales. A constant operand that is not a scalar is
  quantized per tensor (int8, max|c| / 127), or per channel when it is one
  value per channel of a per-channel op (a bias [C] along the last axis).
- Every function of one INT8 input (activations, unary math, and add, sub,
  mul, div, pow, max, min with a scalar constant) is a 256-entry table: for
  each input code, the TOP kernel of the op applied to its real value,
  quantized to the output. The chip looks the table up per element, so any
  such function costs the same and is exact to the output's quantization.

Both work per channel along any channel axis: the result's calibrated one (1,
or the last of a features-last tensor). Along an axis other than 1 the TPU op
says which in `channel_axis`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import Rewriter

from tpu_xdsl.dialects import op_class
from tpu_xdsl.dialects.attr_values import from_py, op_attrs
from tpu_xdsl.dialects.quant_types import calibration_of, is_quantized, quantized_type
from tpu_xdsl.kernels import ResultSpec, load_all, op_kinds
from tpu_xdsl.kernels.quant import (
    ChannelQParams,
    QParams,
    quantize_multipliers,
    weight_scales,
)
from tpu_xdsl.transforms.lowering.context import (
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
from tpu_xdsl.transforms.matching import shape

UNARY_LUT_KINDS = tuple(sorted(op_kinds.UNARY))
# Binary ops that are a function of one tensor when the other operand is a scalar constant.
BINARY_LUT_KINDS = tuple(sorted(op_kinds.BINARY))


def scalar_operand(ctx, op: Operation) -> tuple[int, np.ndarray] | None:
    """(index of the tensor operand, the scalar) when one operand of a binary op is a
    constant with one element and the result has the other operand's shape."""
    lhs, rhs = op.operands
    for index, (tensor, other) in enumerate(((lhs, rhs), (rhs, lhs))):
        constant = ctx.weight_array(other)
        if constant is not None and constant.size == 1 and shape(tensor) == shape(op.results[0]):
            return index, constant.reshape(())
    return None


@dataclass(frozen=True)
class OneTensorFunction:
    """An op seen as a function of one of its operands (the others are constants)."""

    op: Operation
    tensor: SSAValue
    index: int
    constant: np.ndarray | None

    def __call__(self, real: np.ndarray) -> np.ndarray:
        """The op's TOP kernel on float values (f32, as the TOP interpreter computes)."""
        kind = self.op.name.split(".", 1)[1]
        x = np.asarray(real, dtype=np.float32)
        if self.constant is None:
            inputs = [x]
        else:
            c = np.asarray(self.constant, dtype=np.float32)
            inputs = [x, c] if self.index == 0 else [c, x]
        (values,) = load_all()[kind](inputs, op_attrs(self.op), [ResultSpec(x.shape, np.dtype(np.float32))])
        return np.asarray(values, dtype=np.float32)


def one_tensor_function(ctx, op: Operation) -> OneTensorFunction | None:
    """`op` as a function of one tensor: a unary op, or a binary op with a scalar constant."""
    kind = op.name.split(".", 1)[1]
    if kind in UNARY_LUT_KINDS:
        return OneTensorFunction(op, op.operands[0], 0, None)
    if kind in BINARY_LUT_KINDS:
        found = scalar_operand(ctx, op)
        if found is not None:
            index, constant = found
            return OneTensorFunction(op, op.operands[index], index, constant)
    return None


class LutInt8(Int8Pattern):
    """A function of one INT8 tensor -> tpu.lut with a 256-entry table of the output type
    ([C, 256], a table per channel of the channel axis, when the input or output has
    per-channel scales).

    A chain of such functions whose inner results have no other use (an activation,
    then a learnable scale and bias, say) becomes one table of the composed function:
    the inner results are never quantized (and, fused away, are not compared)."""

    kinds = UNARY_LUT_KINDS + BINARY_LUT_KINDS

    def lower(self, op: Operation) -> Operation | None:
        function = one_tensor_function(self.ctx, op)
        if function is None:
            kind = op.name.split(".", 1)[1]
            if kind not in EltwiseInt8.kinds:
                self.ctx.decline(op, f"{kind} of two tensors has no INT8 kernel")
            return None  # two tensors: EltwiseInt8 lowers add, sub and mul
        if self.fuses_into_its_user(op):
            self.ctx.fused.add(op)
            return None
        chain = [function]
        while (owner := chain[0].tensor.owner) in self.ctx.fused:
            inner = one_tensor_function(self.ctx, owner)  # type: ignore[arg-type]
            assert inner is not None
            chain.insert(0, inner)
        axis = self.ctx.preferred_axis(op, chain[0].tensor)
        channels = axis is not None
        x = self.ctx.as_int8(chain[0].tensor, op, channels=channels, axis=axis or 1)
        si = self.ctx.qparams(x)
        so = self.ctx.output_qparams(op, channels=channels, axis=axis)
        count = shape(op.results[0])[axis] if channels else 1
        table = lookup_table(chain, si, so, count)
        kind = op.name.split(".", 1)[1]
        table_value = self.ctx.add_weight(f"{value_name(op.results[0], kind)}_lut", table, op)

        attributes = {"names": op.attributes["names"]} if "names" in op.attributes else {}
        if table.ndim == 2 and axis != 1:
            attributes["channel_axis"] = from_py(axis)
        return op_class("tpu.lut").build(
            operands=[x, table_value],
            result_types=[self.ctx.result_type(op, so)],
            attributes=attributes,
        )

    def fuses_into_its_user(self, op: Operation) -> bool:
        """Whether `op`'s only use is the tensor operand of another INT8 one-tensor function
        with the same shape (so one table can compute both)."""
        result = op.results[0]
        uses = list(result.uses)
        if len(uses) != 1:
            return False
        user = uses[0].operation
        if not user.name.startswith("top.") or self.ctx.op_mode(user) != "INT8":
            return False
        outer = one_tensor_function(self.ctx, user)
        return outer is not None and outer.tensor is result and shape(user.results[0]) == shape(result)


def lookup_table(chain: list[OneTensorFunction], si: AnyQParams, so: AnyQParams, channels: int = 1) -> np.ndarray:
    """The table of the composed functions of `chain` for input quantization `si` and output
    `so`: entry b is the output code of the input code whose byte is b; one row of 256 per
    channel when either quantization has per-channel scales."""
    codes = np.arange(256, dtype=np.uint8).view(si.dtype).astype(np.float64)
    per_channel = isinstance(si, ChannelQParams) or isinstance(so, ChannelQParams)
    if per_channel:
        real = (codes[None, :] - si.zero_point) * scale_vector(si, channels)[:, None]
    else:
        real = (codes - si.zero_point) * si.scale  # type: ignore[union-attr]
    values = np.asarray(real, dtype=np.float32)
    for function in chain:
        values = function(values)
    values = np.asarray(values, dtype=np.float64)
    if not per_channel:
        return so.quantize(values)
    out = QParams(1.0, so.zero_point, so.dtype)
    return out.quantize(values / scale_vector(so, channels)[:, None])


class EltwiseInt8(Int8Pattern):
    """add, sub, mul of two tensors -> INT8 tpu.add/sub/mul with rescaling multipliers:
    per input (add, sub: one shared shift) or per channel and input (2C multipliers,
    first input's then the second's) when scales are per channel (along `channel_axis`
    when that is not 1)."""

    kinds = ("add", "sub", "mul")

    def lower(self, op: Operation) -> Operation | None:
        out = op.results[0]
        problem = self._unquantizable(op)
        if problem is not None:
            self.ctx.decline(op, problem)
            return None
        # Constants are quantized per tensor, so only the tensors' ranks matter.
        tensors = [v for v in op.operands if self.ctx.weight_array(v) is None]
        axis = self.ctx.preferred_axis(op, *tensors)
        channels = axis is not None and all(len(shape(v)) == len(shape(out)) for v in tensors)
        operands = [self.operand(v, op, channels, axis or 1) for v in op.operands]
        sa, sb = (self.ctx.qparams(v) for v in operands)
        so = self.ctx.output_qparams(op, channels=channels, axis=axis)
        per_channel = any(isinstance(q, ChannelQParams) for q in (sa, sb, so))
        count = shape(out)[axis] if per_channel and axis is not None else 1
        va, vb, vo = (scale_vector(q, count) for q in (sa, sb, so))
        if op.name == "top.mul":
            multipliers, rshifts = per_channel_multipliers(va * vb / vo)
        else:
            sign = -1.0 if op.name == "top.sub" else 1.0
            multipliers, shift = quantize_multipliers([*(va / vo), *(sign * vb / vo)])
            rshifts = [shift]
        extra = {**requant_attrs(multipliers, rshifts), **zero_point_attrs([sa, sb], so)}
        if per_channel and axis != 1:
            extra["channel_axis"] = axis
        return build_tpu(op, operands, [self.ctx.result_type(op, so)], extra)

    def _unquantizable(self, op: Operation) -> str | None:
        """Why the op cannot be INT8 without losing an operand (None: it can): a constant
        holding infinities or NaNs, which no code stands for (an attention mask's -inf); or,
        in a sum, an operand whose largest value is below one step of the output's codes, as
        attention scores next to a mask of -1e4 or -FLT_MAX: the sum's scale is set by the
        mask, and the scores would round to zero (the softmax would see the mask alone)."""
        largest: list[tuple[SSAValue, float]] = []
        for value in op.operands:
            constant = self.ctx.weight_array(value)
            if constant is not None and not np.isfinite(constant).all():
                return f"its constant '{value_name(value)}' holds infinities or NaNs, which no INT8 code stands for"
            calibration = calibration_of(value.type) if constant is None else None
            if constant is not None and constant.size:
                largest.append((value, float(np.abs(constant).max())))
            elif calibration is not None:
                largest.append((value, float(calibration.threshold)))
            elif constant is None and is_quantized(value.type):  # its producer is lowered already
                q = self.ctx.qparams(value)
                scales = q.scales if isinstance(q, ChannelQParams) else np.asarray([q.scale])
                largest.append((value, float(scales.max()) * 127))
        calibration = calibration_of(op.results[0].type)
        if op.name == "top.mul" or calibration is None:
            return None
        step = float(calibration.threshold) / 127  # int8's largest code (a uint8 sum has twice the codes)
        for value, top in largest:
            if 0 < top < step:
                return (f"its operand '{value_name(value)}' (up to {top:.3g}) is below one step of the sum's INT8 "
                        f"codes ({step:.3g}, set by the other operand): it would be lost")
        return None

    def operand(self, value: SSAValue, op: Operation, channels: bool, axis: int) -> SSAValue:
        constant = self.ctx.weight_array(value)
        if constant is None:
            return self.ctx.as_int8(value, op, channels=channels, axis=axis)
        out = shape(op.results[0])
        own_axis = axis - (len(out) - constant.ndim)  # the channel axis in the constant's dims
        along_channels = (
            channels and 0 <= own_axis < constant.ndim and constant.shape[own_axis] == out[axis] > 1
            and constant.size == out[axis]
        )
        qparams: AnyQParams
        if along_channels:  # a bias per channel: one scale per channel, as a filter's
            scales = weight_scales(constant, own_axis).astype(np.float32)
            qparams = ChannelQParams(scales, np.int8, axis=own_axis)
        else:
            (scale,) = weight_scales(constant, None)
            qparams = QParams(scale, 0, np.int8)
        q = np.maximum(qparams.quantize(constant), -127).astype(np.int8)
        weight = self.ctx.add_weight(f"{value_name(value)}_int8", q, op)
        entry = None
        if isinstance(qparams, ChannelQParams):
            entry = self.ctx.weights.unique_name(f"{value_name(value)}_scales")
            self.ctx.weights[entry] = qparams.scales.astype(np.float32)
        return Rewriter.replace_value_with_new_type(weight, quantized_type(shape(value), qparams, entry))
