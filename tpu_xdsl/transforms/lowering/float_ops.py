"""The float pattern family: any TOP op as the TPU op of the same name in F32, F16 or BF16.

The same computation in the storage type: operands arrive in it (weights
converted into new weight entries, INT8 values dequantized by a `tpu.cast`),
float results take it (keeping their calibrated range), attributes are kept.
It also lowers the ops an INT8 pattern declined, in the chip's most precise
float mode, and the context records that fallback.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import FloatAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, VarOperandDef, VarResultDef
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from tpu_xdsl.dialects import op_class
from tpu_xdsl.feeds import HELD_AS
from tpu_xdsl.kernels.dtypes import element_type, numpy_dtype
from tpu_xdsl.transforms.lowering.context import (
    LoweringContext,
    LoweringError,
    describe,
    is_float_tensor,
    storage_dtype,
)
from tpu_xdsl.weights import is_weight

# Element types TPU tensors may hold.
_TPU_ELEMENTS = {"float32", "float16", "bfloat16", "int8", "uint8", "int16", "int32"}

# Ops whose bias weight stays f32 in the F16/BF16 modes. BM1684X's float convolutions
# take an f32 bias (TPU-MLIR's Conv and Deconv lowerings keep the bias f32 and assert
# "bias has to be f32"): the products are summed in f32 and the bias is added there before
# the one rounding to the storage type. Rounding the bias to bf16 first shifts a whole
# output channel by up to 2^-9 of the bias, the same for every pixel, so that error
# survives the averages (pooling, squeeze-and-excite gates) that wash out the rounding of
# each stored element; on the zoo's BatchNorm-folded convolutions it cost BF16 up to 0.015
# of mean output cosine.
# (TPU-MLIR's BM1684X MatMul keeps an f32 bias only on BM1688, so matmul is not here.)
F32_BIAS_KINDS = frozenset({"top.conv", "top.deconv"})

# Elementwise ops whose one-element (scalar) weight operand stays f32 in F16/BF16. TPU-MLIR
# imports x * c, x + c, x - c, max(x, c) and min(x, c) with a scalar c as MulConst, AddConst,
# SubConst, MaxConst and MinConst, and BM1684X's backend hands the constant to the chip in
# f32 (constbinary B_dtype = DTYPE_FP32 for float inputs), so it computes x * c in f32 and
# rounds once. Rounding c to bf16 first changes the gain or offset of the whole tensor by
# up to 2^-9, again an error every element shares; ppocr_rec's learnable affine blocks
# (a scalar scale and shift after each conv and activation) lost BF16 cosine to it
# (50 crops: mean 0.9957 -> 0.9979, smaller error on 38). DivConst takes the input's
# type, so div is not here.
F32_SCALAR_KINDS = frozenset({"top.add", "top.sub", "top.mul", "top.max", "top.min"})


def tpu_class(op: Operation) -> type[IRDLOperation]:
    target = f"tpu.{op.name.split('.', 1)[1]}"
    try:
        return op_class(target)
    except KeyError:
        raise LoweringError(f"{describe(op)} has no TPU counterpart") from None


class FloatOpLowering(RewritePattern):
    """TOP op -> TPU op in the op's float mode (the module's, the quantize table's, or
    the fallback mode of an op INT8 cannot run)."""

    def __init__(self, ctx: LoweringContext):
        self.ctx = ctx

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op in self.ctx.fused:
            return  # computed by its user's lookup table
        dtype = storage_dtype(self.ctx.float_mode_of(op))
        op_def = op.get_irdl_definition()  # type: ignore[attr-defined]
        target = tpu_class(op)
        top_fields = {name for name, _ in op_def.operands}
        operands: list[SSAValue | list[SSAValue]] = []
        # By the TPU op's fields: it may add optional operands the TOP op lacks
        # (tpu.cast's per-channel scales), which stay empty here.
        for field_name, field_def in target.get_irdl_definition().operands:  # type: ignore[attr-defined]
            if field_name not in top_fields:
                operands.append([])
                continue
            current = getattr(op, field_name)
            if field_name == "bias" and op.name in F32_BIAS_KINDS and is_weight(current):
                operands.append(current)  # f32, as the chip adds it (F32_BIAS_KINDS)
                continue
            if isinstance(field_def, VarOperandDef):
                operands.append([self.operand(v, dtype, op) for v in current])
            else:
                operands.append(self.operand(current, dtype, op))
        result_types: list[Attribute | list[Attribute]] = []
        index = 0
        for _, field_def in op_def.results:
            if isinstance(field_def, VarResultDef):
                count = len(op.results) - (len(op_def.results) - 1)
                result_types.append([self.result_type(r.type, dtype, op) for r in op.results[index : index + count]])
                index += count
            else:
                result_types.append(self.result_type(op.results[index].type, dtype, op))
                index += 1
        attributes = dict(op.attributes)
        if op.name == "top.clip":
            attributes.update(storable_bounds(op, dtype))
        new = target.build(
            operands=operands,
            result_types=result_types,
            attributes=attributes,
            properties=dict(op.properties),
        )
        rewriter.replace(op, new)

    def operand(self, value: SSAValue, dtype: np.dtype, op: Operation | None = None) -> SSAValue:
        if is_weight(value):
            if op is not None and op.name in F32_SCALAR_KINDS and _is_scalar(value):
                return value  # f32, as the chip takes the constant (F32_SCALAR_KINDS)
            t = value.type
            held = HELD_AS.get(numpy_dtype(t.element_type)) if isinstance(t, TensorType) else None
            if held is not None:
                return self.ctx.held_weight(value, held)
            return self.ctx.float_weight(value, dtype)
        return self.ctx.as_float(value, dtype)

    @staticmethod
    def result_type(t: Attribute, dtype: np.dtype, op: Operation) -> Attribute:
        if not isinstance(t, TensorType):
            return t
        if is_float_tensor(t):
            return TensorType(element_type(dtype), t.get_shape(), t.encoding)
        held = HELD_AS.get(numpy_dtype(t.element_type))
        if held is not None:
            return TensorType(element_type(held), t.get_shape(), t.encoding)
        if str(numpy_dtype(t.element_type)) not in _TPU_ELEMENTS:
            raise LoweringError(
                f"{describe(op)} holds {t.element_type} tensors, which TPU ops cannot hold; "
                "such ops (indices, masks, integer math) do not lower yet"
            )
        return t


def _is_scalar(value: SSAValue) -> bool:
    t = value.type
    return isinstance(t, TensorType) and is_float_tensor(t) and int(np.prod(t.get_shape())) == 1


def storable_bounds(op: Operation, dtype: np.dtype) -> dict[str, Attribute]:
    """A clip's nonzero bounds that round to 0 in the storage type (F.normalize's eps 1e-12
    in f16), as the type's smallest nonzero value of the same sign: a clip that keeps a
    denominator positive still does (x / 0 is inf or NaN where x / eps is what ONNX gives)."""
    import ml_dtypes

    changed: dict[str, Attribute] = {}
    for key in ("min", "max"):
        attr = op.attributes.get(key)
        if not isinstance(attr, FloatAttr):
            continue
        value = float(attr.value.data)
        if value == 0 or np.asarray(value, dtype=dtype) != 0:
            continue
        tiny = float(ml_dtypes.finfo(dtype).smallest_subnormal)
        changed[key] = FloatAttr(float(np.copysign(tiny, value)), attr.type)
    return changed
