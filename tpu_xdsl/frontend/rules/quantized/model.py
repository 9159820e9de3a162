"""What a pre-quantized model says as a whole: its tensors' scales, attached to the TOP module
as their calibration, and the names of tensors that hold codes."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import onnx
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import SSAValue
from xdsl.rewriter import Rewriter

from tpu_xdsl.calibration.model_scales import MODEL_SOURCE, SOURCE_ATTR, TensorScale
from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.dialects.quant_types import FLOAT_TYPES, Calibration, calibrated_type
from tpu_xdsl.frontend import registry
from tpu_xdsl.transforms.matching import sync_function_type

if TYPE_CHECKING:
    from tpu_xdsl.frontend.onnx_importer import OnnxImporter

F32 = np.dtype(np.float32)
MS = "com.microsoft"
CODE_TYPES = (np.dtype(np.int8), np.dtype(np.uint8))
# QuantizeLinear's output_dtype attribute (opset 21): the ONNX element types of int8/uint8.
OUTPUT_DTYPES = {2: np.dtype(np.uint8), 3: np.dtype(np.int8)}


@dataclass
class ModelQuantization:
    """What the quantization rules learned of one model while it is imported."""

    scales: dict[SSAValue, TensorScale] = field(default_factory=dict)
    # ONNX names of quantized tensors whose TOP value holds the real value, and the
    # scale of one code (1 for DynamicQuantizeLinear's pass-through).
    real_values: dict[str, float] = field(default_factory=dict)
    # The model's quantization of such tensors (data-movement results take their source's).
    code_scales: dict[str, TensorScale] = field(default_factory=dict)
    # ONNX names whose integers onnxruntime holds and TOP holds as real values: their
    # TOP ops are renamed `{name}_real`, so stages compare only tensors that agree.
    renamed: set[str] = field(default_factory=set)
    producers: dict[str, onnx.NodeProto] | None = None
    # Constants dequantized from codes with one scale (QOperator weights).
    one_scale_weights: set[str] = field(default_factory=set)
    conflicts: list[str] = field(default_factory=list)
    unscaled: list[str] = field(default_factory=list)
    # Weights whose codes have a zero point: TPU weights are symmetric int8.
    shifted_weights: list[str] = field(default_factory=list)
    dynamic: list[str] = field(default_factory=list)

    def record(self, value: SSAValue, scale: TensorScale, where: str) -> None:
        known = self.scales.setdefault(value, scale)
        if known != scale:
            self.conflicts.append(where)

    def notes(self, calibrated: int) -> list[str]:
        """What the user should know of the import; `calibrated` tensors got a model scale."""
        lines = []
        if self.dynamic:
            lines.append(
                f"{len(self.dynamic)} dynamically quantized node(s) ({_first(self.dynamic)}) compute their "
                "scales at run time: imported as a float model with the weights dequantized; calibrate it "
                "(tpu-xdsl calibrate) like any float model for INT8"
            )
        if calibrated:
            lines.append(
                f"the model's own scales and zero points calibrate {calibrated} tensor(s): "
                "deploy --quantize INT8 uses them without a calibration table; TOP rounds what "
                "each quantized tensor's readers get to those scales, as onnxruntime does"
            )
        if self.unscaled:
            lines.append(
                f"{len(self.unscaled)} quantization(s) per axis or to 16 bits ({_first(self.unscaled)}) "
                "give no calibration: the ops producing those tensors run in a float mode"
            )
        if self.shifted_weights:
            lines.append(
                f"{len(self.shifted_weights)} weight(s) ({_first(self.shifted_weights)}) have zero points; "
                "INT8 requantizes them to symmetric int8 per output channel (the TPU's weight format), "
                "so INT8 differs slightly from the model's; quantize weights as int8 (QuantType.QInt8) for "
                "the model's own weight codes"
            )
        if self.conflicts:
            lines.append(
                f"{len(self.conflicts)} tensor(s) are quantized twice with different scales "
                f"({_first(self.conflicts)}): the first scale is used"
            )
        return lines


def _first(items: list[str], count: int = 3) -> str:
    return ", ".join(items[:count]) + (f" and {len(items) - count} more" if len(items) > count else "")


def quantization(importer: OnnxImporter) -> ModelQuantization:
    """The importer's record of the model's quantization (made on first use)."""
    return importer.__dict__.setdefault("quantization", ModelQuantization())


@registry.after_import
def attach_model_scales(importer: OnnxImporter, module: ModuleOp) -> None:
    """Give every tensor of @main with a model scale its calibrated type; mark the module
    calibrated by the model. Prints the notes of the import."""
    found = importer.__dict__.get("quantization")
    if found is None:
        return
    main = main_func(module)
    found.shifted_weights.extend(_shifted_weights(importer.model))
    for name in found.renamed:  # moved codes keep their scale
        value = importer.values.get(name)
        if name in found.code_scales and value is not None and value.ssa is not None:
            found.scales.setdefault(value.ssa, found.code_scales[name])
    _rename_code_tensors(importer, main, found.renamed | _accumulator_tensors(importer.model, found.renamed))
    _name_passed_on_outputs(importer, main)
    _mark_one_scale_weights(importer, main, found.one_scale_weights | _qdq_one_scale_weights(importer))
    calibrated = 0
    for op in main.body.block.ops:
        for value in list(op.results):
            scale = found.scales.get(value)
            t = value.type
            if scale is None or not isinstance(getattr(t, "element_type", None), FLOAT_TYPES):
                continue
            Rewriter.replace_value_with_new_type(value, calibrated_type(t, scale.calibration()))  # type: ignore[arg-type]
            calibrated += 1
    for line in found.notes(calibrated):
        print(f"note: {line}", file=sys.stderr)
    if not calibrated:
        return
    sync_function_type(main)
    module.attributes[SOURCE_ATTR] = StringAttr(MODEL_SOURCE)
    module.attributes["module.state"] = StringAttr("TOP_CALIBRATED")


def _shifted_weights(model: onnx.ModelProto) -> list[str]:
    """Filters and matrices (input 1 of Conv, ConvTranspose, MatMul, Gemm) dequantized from
    int8/uint8 codes with a nonzero zero point."""
    inits = {t.name: t for t in model.graph.initializer}
    codes = {n for n, t in inits.items() if t.data_type in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)}
    weights = {
        n.input[1] for n in model.graph.node
        if n.op_type in ("Conv", "ConvTranspose", "MatMul", "Gemm") and len(n.input) > 1
    }
    found = []
    for node in model.graph.node:
        if node.op_type != "DequantizeLinear" or node.input[0] not in codes or len(node.input) < 3:
            continue
        if node.output[0] not in weights:
            continue
        zero = inits.get(node.input[2])
        if zero is not None and np.any(onnx.numpy_helper.to_array(zero) != 0):
            found.append(node.input[0])
    return found


def _name_passed_on_outputs(importer: OnnxImporter, main) -> None:
    """A graph output that a DequantizeLinear (or QuantizeLinear) passed on is its producer's
    value, under the producer's tensor name: that value takes the output's name, so the
    model's outputs keep their ONNX names (onnxruntime's QDQ models end in
    `y_QuantizeLinear_Input` -> Q -> DQ -> `y`)."""
    from xdsl.dialects.builtin import ArrayAttr
    from xdsl.ir import Operation

    passing = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}
    producers = {out: node for node in importer.model.graph.node for out in node.output if out}
    outputs = {v.name for v in importer.model.graph.output}
    taken = {n for op in main.body.block.ops for n in tensor_names(op)}
    ret = main.body.block.last_op
    for value, info in zip(ret.operands, importer.model.graph.output):
        node = producers.get(info.name)
        owner = value.owner
        if node is None or node.op_type not in passing or not isinstance(owner, Operation) or info.name in taken:
            continue
        names = tensor_names(owner)
        index = list(owner.results).index(value)
        if index >= len(names) or names[index] in outputs:
            continue
        names[index] = info.name
        owner.attributes["names"] = ArrayAttr([StringAttr(n) for n in names])
        taken.add(info.name)


def _accumulator_tensors(model: onnx.ModelProto, integer_outputs: set[str]) -> set[str]:
    """Tensors computed from ConvInteger/MatMulInteger results before the Mul by the scales
    (onnxruntime's bias Add, the Cast to float): in units of the accumulator there, of the
    weight scale alone in TOP (DynamicQuantizeLinear passes scale 1)."""
    found: set[str] = set()
    for node in model.graph.node:
        if node.op_type in ("Add", "Sub", "Cast") and any(n in integer_outputs or n in found for n in node.input):
            found.update(n for n in node.output if n)
    return found


def _rename_code_tensors(importer: OnnxImporter, main, names: set[str]) -> None:
    """TOP ops named after ONNX tensors that hold integers in onnxruntime get `{name}_real`."""
    from xdsl.dialects.builtin import ArrayAttr

    for op in main.body.block.ops:
        found = op.attributes.get("names")
        if not isinstance(found, ArrayAttr) or not any(n.data in names for n in found.data):  # type: ignore[union-attr]
            continue
        op.attributes["names"] = ArrayAttr([
            StringAttr(importer.unique_name(f"{n.data}_real") if n.data in names else n.data)  # type: ignore[union-attr]
            for n in found.data
        ])


def _qdq_one_scale_weights(importer: OnnxImporter) -> set[str]:
    """Outputs of DequantizeLinear nodes of constant int8/uint8 codes with one scale (an
    initializer, or a QAT export's QuantizeLinear of a float weight, folded)."""
    found = set()
    for node in importer.model.graph.node:
        if node.op_type != "DequantizeLinear" or len(node.input) < 2:
            continue
        codes, scale = importer.values.get(node.input[0]), importer.values.get(node.input[1])
        if codes is None or scale is None or codes.const is None or scale.const is None:
            continue
        if codes.const.dtype in CODE_TYPES and scale.const.size == 1:
            found.add(node.output[0])
    return found


def _mark_one_scale_weights(importer: OnnxImporter, main, names: set[str]) -> None:
    """A weight the model quantizes with one scale gets the calibrated type of its range
    [min, max] (threshold max |w|), so that INT8 lowering keeps one scale for it (it would
    give each output channel its own) and the model's codes come back exactly."""
    for op in main.body.block.ops:
        if op.name != "top.weight":
            continue
        name = op.attributes["names"].data[0].data  # type: ignore[union-attr]
        array = importer.weights.get(name)
        if name not in names or array is None or not array.size or array.dtype != F32:
            continue
        top = float(np.max(np.abs(array)))
        if top > 0:
            calibration = Calibration(top, float(array.min()), float(array.max()))
            Rewriter.replace_value_with_new_type(op.results[0], calibrated_type(op.results[0].type, calibration))  # type: ignore[arg-type]
