"""lower-top-to-tpu: TOP ops to their chip-level TPU counterparts in a float mode.

Modes F32, F16 and BF16 compute the same ops in the storage type: every f32
tensor becomes the mode's float type, weights are converted (new entries in
the weight table), inputs are cast in with `tpu.cast` and outputs cast back to
f32. Tensor names stay, so each TPU tensor compares with its TOP tensor by
name. The chip's capability table decides which modes exist. INT8 needs a
calibration table and is a separate pattern family (not here yet).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import VarOperandDef, VarResultDef
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tpu_xdsl.device.chip import check_mode, chip_config
from tpu_xdsl.dialects import op_class
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.interp.dtypes import element_type, numpy_dtype
from tpu_xdsl.weights import create_weight, weight_name, weights_of

FLOAT_MODES = {"F32": np.float32, "F16": np.float16, "BF16": "bfloat16"}
# Element types TPU tensors may hold.
_TPU_ELEMENTS = {"float32", "float16", "bfloat16", "int8", "uint8", "int16", "int32"}
_KEEP = {"top.input", "top.weight", "top.none"}


class LoweringError(TpuXdslError):
    """A TOP module cannot be lowered as asked."""


def _storage_dtype(mode: str) -> np.dtype:
    if mode == "BF16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(FLOAT_MODES[mode])


def _names(op: Operation) -> list[str]:
    names = op.attributes.get("names")
    return [n.data for n in names.data] if isinstance(names, ArrayAttr) else []  # type: ignore[union-attr]


@dataclass(frozen=True)
class LowerTopToTpuPass(ModulePass):
    """Rewrite every TOP op of @main into the TPU op of the same name in `mode`."""

    name = "lower-top-to-tpu"

    mode: str = "F32"
    chip: str = "bm1684x"
    asymmetric: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        chip = chip_config(self.chip)
        mode = check_mode(chip, self.mode)
        if mode == "INT8":
            raise LoweringError(
                "INT8 lowering is not implemented yet; use --quantize F32, F16 or BF16"
            )
        _FloatLowering(op, _storage_dtype(mode)).run()
        from tpu_xdsl.transforms.top_dce import TopDce

        TopDce().apply(ctx, op)  # the f32 weights that were converted
        op.attributes["module.state"] = StringAttr("TPU_LOWERED")
        op.attributes["module.chip"] = StringAttr(chip.name)
        op.attributes["module.mode"] = StringAttr(mode)


class _FloatLowering:
    def __init__(self, module: ModuleOp, dtype: np.dtype):
        self.module = module
        self.dtype = dtype
        self.float_type = element_type(dtype)
        self.converted_weights: dict[tuple[str, str], SSAValue] = {}

    def tensor_type(self, t: Attribute, where: str) -> Attribute:
        if not isinstance(t, TensorType):
            return t
        dtype = numpy_dtype(t.element_type)
        if dtype == np.float32:
            return TensorType(self.float_type, t.get_shape())
        if str(dtype) not in _TPU_ELEMENTS:
            raise LoweringError(
                f"{where} holds {t.element_type} tensors, which TPU ops cannot hold; "
                "such ops (indices, masks, integer math) do not lower yet"
            )
        return t

    def value_for(self, value: SSAValue, anchor: Operation) -> SSAValue:
        """The operand a TPU op reads: weights converted to the storage type."""
        owner = value.owner
        if not isinstance(owner, Operation) or owner.name != "top.weight":
            return value
        t = value.type
        assert isinstance(t, TensorType)
        if numpy_dtype(t.element_type) != np.float32 or self.dtype == np.float32:
            return value
        name = weight_name(owner)
        key = (name, str(self.dtype))
        if key not in self.converted_weights:
            array = np.asarray(weights_of(self.module)[name]).astype(self.dtype)
            self.converted_weights[key] = create_weight(
                self.module, f"{name}_{self.dtype}", array, insert_before=owner.next_op or owner
            )
        return self.converted_weights[key]

    def cast(self, value: SSAValue, to: Attribute, name: str, before: Operation) -> SSAValue:
        op = op_class("tpu.cast").build(
            operands=[value],
            result_types=[to],
            attributes={"names": ArrayAttr([StringAttr(name)])},
        )
        Rewriter.insert_op(op, InsertPoint.before(before))
        return op.results[0]

    def run(self) -> None:
        main = next(
            o for o in self.module.ops if isinstance(o, func.FuncOp) and o.sym_name.data == "main"
        )
        block = main.body.block
        for op in list(block.ops):
            if op.name in _KEEP or not op.name.startswith("top."):
                continue
            self.lower(op)
        if self.dtype != np.float32:
            self.cast_boundaries(block)

    def lower(self, op: Operation) -> None:
        names = _names(op)
        where = f"'{op.name}' ({', '.join(names) or 'unnamed'})"
        op_def = op.get_irdl_definition()  # type: ignore[attr-defined]
        operands: list[SSAValue | list[SSAValue]] = []
        for field_name, field_def in op_def.operands:
            current = getattr(op, field_name)
            if isinstance(field_def, VarOperandDef):
                operands.append([self.value_for(v, op) for v in current])
            else:
                operands.append(self.value_for(current, op))
        result_types: list[Attribute | list[Attribute]] = []
        index = 0
        for _, field_def in op_def.results:
            if isinstance(field_def, VarResultDef):
                count = len(op.results) - (len(op_def.results) - 1)
                result_types.append(
                    [self.tensor_type(r.type, where) for r in op.results[index : index + count]]
                )
                index += count
            else:
                result_types.append(self.tensor_type(op.results[index].type, where))
                index += 1
        target = f"tpu.{op.name.split('.', 1)[1]}"
        try:
            cls = op_class(target)
        except KeyError:
            raise LoweringError(f"{where} has no TPU counterpart") from None
        new = cls.build(
            operands=operands,
            result_types=result_types,
            attributes=dict(op.attributes),
            properties=dict(op.properties),
        )
        Rewriter.replace_op(op, new)

    def cast_boundaries(self, block) -> None:
        """Inputs in the storage type before their first use; outputs back to f32."""
        for op in list(block.ops):
            if op.name != "top.input":
                continue
            value = op.results[0]
            t = value.type
            if not isinstance(t, TensorType) or numpy_dtype(t.element_type) != np.float32:
                continue
            users = [u.operation for u in value.uses if u.operation.name.startswith("tpu.")]
            if not users:
                continue
            name = f"{_names(op)[0] if _names(op) else 'input'}_{self.dtype}"
            cast = self.cast(value, TensorType(self.float_type, t.get_shape()), name, op.next_op)
            for use in list(value.uses):
                if use.operation.name.startswith("tpu.") and use.operation is not cast.owner:
                    use.operation.operands[use.index] = cast
        ret = block.last_op
        assert ret is not None
        for i, value in enumerate(list(ret.operands)):
            t = value.type
            if isinstance(t, TensorType) and t.element_type == self.float_type:
                owner = value.owner
                base = _names(owner)[0] if isinstance(owner, Operation) and _names(owner) else f"output{i}"
                ret.operands[i] = self.cast(value, TensorType(element_type(np.float32), t.get_shape()), f"{base}_f32", ret)
