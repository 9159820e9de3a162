"""Import rules for pre-quantized ONNX: QDQ, QOperator and dynamic quantization.

TOP holds real values, so a quantized tensor of the model is imported as the
float tensor its codes stand for, and the model's scale and zero point of it
become its calibration (`tpu_xdsl.calibration.model_scales`): INT8 lowering
then uses exactly the model's scales, and `deploy --quantize INT8` needs no
calibration table.

- QDQ (onnxruntime's `quantize_static` with QuantFormat.QDQ, QAT exporters):
  a QuantizeLinear of an activation records its scale on the float tensor and
  passes it on; a DequantizeLinear of such a tensor passes it on too. A
  DequantizeLinear of a constant (weights, int32 biases) is folded by the
  importer to the exact float32 values ONNX computes, (q - zero_point) * scale.
- QOperator (QLinearConv, QLinearMatMul, QGemm, com.microsoft QLinearAdd,
  QLinearMul, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax,
  QLinearAveragePool, QLinearGlobalAveragePool): the float op on the real
  values of the inputs (constants dequantized) under the derived name
  `{output}_real` (the ONNX name holds codes in onnxruntime), its output scale
  recorded.
- Dynamic quantization (DynamicQuantizeLinear, ConvInteger, MatMulInteger,
  com.microsoft DynamicQuantizeMatMul and DynamicQuantizeLSTM) computes scales
  at run time: the model is imported as a float model. DynamicQuantizeLinear
  passes the float tensor on with scale 1 and zero point 0, so ConvInteger /
  MatMulInteger become the float op on dequantized weights and the following
  Mul by the scales leaves the weight scale; a note says so, and the model is
  calibrated like any float one.

Tensors quantized along an axis, or to 16 bits, keep no calibration: the ops
producing them run in a float mode.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import SSAValue
from xdsl.rewriter import Rewriter

from tpu_xdsl.calibration.model_scales import MODEL_SOURCE, SOURCE_ATTR, TensorScale
from tpu_xdsl.frontend import registry
from tpu_xdsl.frontend.onnx_importer import NodeContext, OnnxImporter
from tpu_xdsl.frontend.registry import onnx_rule

F32 = np.dtype(np.float32)
MS = "com.microsoft"
_CODE_TYPES = (np.dtype(np.int8), np.dtype(np.uint8))
# QuantizeLinear's output_dtype attribute (opset 21): the ONNX element types of int8/uint8.
_OUTPUT_DTYPES = {2: np.dtype(np.uint8), 3: np.dtype(np.int8)}


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


def attach_model_scales(importer: OnnxImporter, module: ModuleOp) -> None:
    """Give every tensor of @main with a model scale its calibrated type; mark the module
    calibrated by the model. Prints the notes of the import."""
    from tpu_xdsl.dialects.module import main_func
    from tpu_xdsl.dialects.quant_types import FLOAT_TYPES, calibrated_type
    from tpu_xdsl.transforms.matching import sync_function_type

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

    from tpu_xdsl.dialects.module import tensor_names

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
        if codes.const.dtype in _CODE_TYPES and scale.const.size == 1:
            found.add(node.output[0])
    return found


def _mark_one_scale_weights(importer: OnnxImporter, main, names: set[str]) -> None:
    """A weight the model quantizes with one scale gets the calibrated type of its range
    [min, max] (threshold max |w|), so that INT8 lowering keeps one scale for it (it would
    give each output channel its own) and the model's codes come back exactly."""
    from tpu_xdsl.dialects.quant_types import Calibration, calibrated_type

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


# -- helpers ---------------------------------------------------------------------------

# Ops that move or select int8 codes without changing their scale: onnxruntime runs them
# on the codes of QOperator models, TOP on the real values they stand for.
_CODE_MOVING = {
    "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "MaxPool", "GlobalMaxPool", "Slice",
    "Gather", "Split", "Concat", "Identity", "Resize", "Pad", "Expand", "Tile", "DepthToSpace",
    "SpaceToDepth",
}


def _casts_codes(node: onnx.NodeProto) -> bool:
    """A Cast to an 8-bit integer type moves codes unchanged (torch's quantized export
    writes QuantizeLinear -> Cast(UINT8) -> DequantizeLinear)."""
    if node.op_type != "Cast":
        return False
    to = next((a.i for a in node.attribute if a.name == "to"), None)
    return to in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)


def passes_codes(ctx: NodeContext) -> bool:
    """Whether `ctx`'s node is a Cast of a tensor TOP holds as real values (codes in
    ONNX) to an 8-bit integer type: the same codes, so TOP's real values go on."""
    return _casts_codes(ctx.node) and code_scale(ctx.importer, ctx.node.input[0]) is not None


def code_scale(importer: OnnxImporter, name: str) -> float | None:
    """The scale of one code when ONNX tensor `name` holds integer codes that TOP holds as
    real values (passed on by a quantization op, or moved by a data-movement op), else None."""
    state = quantization(importer)
    if name in state.real_values:
        return state.real_values[name]
    if state.producers is None:
        state.producers = {out: node for node in importer.model.graph.node for out in node.output if out}
    node = state.producers.get(name)
    if node is None or node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type not in _CODE_MOVING and not _casts_codes(node):
        return None
    for source in node.input[:1] if node.op_type != "Concat" else node.input:
        scale = code_scale(importer, source) if source else None
        if scale is not None:
            state.real_values[name] = scale
            state.renamed.add(name)
            if source in state.code_scales:
                state.code_scales[name] = state.code_scales[source]
            return scale
    return None



def _code_dtype(ctx: NodeContext, zero_point: np.ndarray | None) -> np.dtype:
    if zero_point is not None:
        return np.dtype(zero_point.dtype)
    return _OUTPUT_DTYPES.get(int(ctx.attr("output_dtype", 0)), np.dtype(np.uint8))


def _broadcast(param: np.ndarray, rank: int, axis: int) -> np.ndarray:
    """A per-axis scale or zero point shaped to broadcast along `axis` of a rank-`rank`
    tensor (a single value stays a scalar)."""
    param = np.asarray(param)
    if param.size == 1:
        return param.reshape(())
    shape = [1] * rank
    shape[axis] = -1
    return param.reshape(shape)


def dequantize(codes: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, axis: int = 1) -> np.ndarray:
    """(codes - zero_point) * scale in float32, as ONNX's DequantizeLinear computes it
    (per tensor, or per `axis` for 1-d scales)."""
    codes = np.asarray(codes)
    rank = codes.ndim
    axis = axis % rank if rank else 0
    shifted = codes.astype(np.int64)
    if zero_point is not None:
        shifted = shifted - _broadcast(zero_point, rank, axis).astype(np.int64)
    return shifted.astype(F32) * _broadcast(scale, rank, axis).astype(F32)


def _is_graph_output(ctx: NodeContext, name: str) -> bool:
    return any(v.name == name for v in ctx.importer.model.graph.output)


def _emit_codes(ctx: NodeContext, real: SSAValue, scale: np.ndarray, zero: np.ndarray | None,
                dtype: np.dtype, axis: int) -> None:
    """Output 0 as the model's integer codes of `real`, sat(round(real / scale) + zero_point)
    (a graph output that holds codes; the importer casts it to the output's type)."""
    rank = len(real.type.get_shape())  # type: ignore[attr-defined]
    (codes,) = ctx.emit("div", [real, ctx.constant(_broadcast(scale, rank, axis).astype(F32), "scale")])
    (codes,) = ctx.emit("round", [codes])
    if zero is not None and np.any(zero != 0):
        (codes,) = ctx.emit("add", [codes, ctx.constant(_broadcast(zero, rank, axis).astype(F32), "zero_point")])
    info = np.iinfo(dtype) if dtype.kind in "iu" else np.iinfo(np.int8)
    ctx.output("clip", [codes], {"min": float(info.min), "max": float(info.max)})


def _new_const(ctx: NodeContext, array: np.ndarray, tag: str) -> str:
    """A constant under a fresh name the importer knows (for a delegated node's input)."""
    name = ctx.importer.unique_name(f"{ctx.output_name(0)}_{tag}", reserve=False)
    ctx.importer.define_const(name, np.asarray(array))
    return name


def _delegate(
    ctx: NodeContext, op_type: str, inputs: list[str], outputs: list[str], *,
    attrs: dict | None = None, keep: tuple[str, ...] = (), opset: int | None = None,
) -> None:
    """Import a float ONNX node in place of this one: `op_type` on `inputs` (names the
    importer knows) giving `outputs`, with this node's attributes named in `keep`
    and `attrs`."""
    importer = ctx.importer
    node = helper.make_node(op_type, inputs, outputs, name=ctx.node.name or ctx.output_name(0), **(attrs or {}))
    node.attribute.extend(a for a in ctx.node.attribute if a.name in keep)
    opset = opset if opset is not None else importer.opsets.get("", 1)
    rule = registry.find_rule(op_type, opset)
    if rule is None:  # the registry covers every op type delegated to at ONNX's own opsets
        raise ctx.error(f"no import rule for the float {op_type} it stands for at opset {opset}")
    rule(NodeContext(importer, node, opset))


def _real_input(ctx: NodeContext, i: int, scale_at: int, zero_at: int | None, axis: int = 1) -> str:
    """The name of a value holding the real values of quantized input i (codes with the
    scale and zero point of inputs `scale_at`, `zero_at`)."""
    name = ctx.node.input[i]
    scale = ctx.require_const(scale_at, "the scale")
    zero = ctx.const(zero_at) if zero_at is not None else None
    value = ctx.value(i)
    if value.const is not None:
        real = _new_const(ctx, dequantize(value.const, scale, zero, axis), f"in{i}_real")
        if scale.size == 1 and value.const.dtype in _CODE_TYPES:
            quantization(ctx.importer).one_scale_weights.add(real)
        return real
    if code_scale(ctx.importer, name) is not None:
        return name
    # Codes from elsewhere (an integer model input): (q - zero_point) * scale in TOP ops.
    centered = ctx.importer.values[_centered(ctx, i, zero, axis)].ssa
    rank = len(value.shape)
    (real,) = ctx.emit("mul", [centered, ctx.constant(_broadcast(scale, rank, axis).astype(F32), f"in{i}_scale")])
    real_name = ctx.importer.unique_name(f"{name}_real", reserve=False)
    ctx.importer.define(real_name, real)
    return real_name


def _centered(ctx: NodeContext, i: int, zero: np.ndarray | None, axis: int) -> str:
    """The name of input i (a run-time integer tensor) less its zero point, in f32."""
    value = ctx.input(i)
    if zero is None or not np.any(zero != 0):
        name = ctx.importer.unique_name(f"{ctx.node.input[i]}_f32", reserve=False)
        ctx.importer.define(name, value)
        return name
    rank = len(ctx.shape(i))
    (centered,) = ctx.emit("sub", [value, ctx.constant(_broadcast(zero, rank, axis).astype(F32), f"in{i}_zero_point")])
    name = ctx.importer.unique_name(f"{ctx.node.input[i]}_centered", reserve=False)
    ctx.importer.define(name, centered)
    return name


def _quantized_output(ctx: NodeContext, op_type: str, inputs: list[str], scale_at: int | None,
                      zero_at: int | None, **kwargs) -> None:
    """The float `op_type` as this node's output 0 under `{output}_real`, its codes'
    scale and zero point (inputs `scale_at`, `zero_at`) recorded as its calibration."""
    out = ctx.output_name(0)
    if scale_at is None or not ctx.has_input(scale_at):  # a float output (QGemm without y_scale)
        _delegate(ctx, op_type, inputs, [out], **kwargs)
        return
    real_name = ctx.importer.unique_name(f"{out}_real", reserve=False)
    _delegate(ctx, op_type, inputs, [real_name], **kwargs)
    real = ctx.importer.values[real_name]
    scale = ctx.require_const(scale_at, "the output scale")
    zero = ctx.const(zero_at) if zero_at is not None else None
    state = quantization(ctx.importer)
    dtype = _code_dtype(ctx, zero)
    if _is_graph_output(ctx, out) and real.ssa is not None:
        _emit_codes(ctx, real.ssa, scale, zero, dtype, 1)
        return
    if scale.size == 1 and dtype in _CODE_TYPES and real.ssa is not None:
        state.code_scales[out] = TensorScale.of(scale, zero, dtype)
        state.record(real.ssa, state.code_scales[out], ctx.where)
    state.real_values[out] = float(np.asarray(scale).reshape(-1)[0])
    ctx.importer.values[out] = real


# -- QDQ ------------------------------------------------------------------------------


@onnx_rule("QuantizeLinear", since=10)
def quantize_linear(ctx: NodeContext) -> None:
    """An activation's quantization: the float tensor goes on, its scale is recorded."""
    scale = ctx.require_const(1, "the scale")
    zero = ctx.const(2)
    if ctx.has_input(2) and zero is None:
        raise ctx.error("the zero point (input 2) must be a constant")
    dtype = _code_dtype(ctx, zero)
    value = ctx.input(0)
    if _is_graph_output(ctx, ctx.output_name(0)):  # the model's user reads the codes
        rank = len(ctx.shape(0))
        _emit_codes(ctx, value, scale, zero, dtype, int(ctx.attr("axis", 1)) % max(rank, 1))
        return
    state = quantization(ctx.importer)
    if scale.size == 1 and dtype in _CODE_TYPES:
        found = state.code_scales[ctx.output_name(0)] = TensorScale.of(scale, zero, dtype)
        if found.unsigned_zero_point == 0 and not _never_negative(value):
            # onnxruntime removes a ReLU before a quantization whose codes start at 0 (the
            # zero point clamps): TOP keeps it, so float stages compute what the model does.
            # The producer shares the range, so that top-fuse-relu can fuse the two.
            state.record(value, found, ctx.where)
            (value,) = ctx.emit("relu", [value], name=f"{ctx.node.input[0]}_relu")
        state.record(value, found, ctx.where)
    else:
        state.unscaled.append(ctx.node.name or ctx.output_name(0))
    state.real_values[ctx.output_name(0)] = float(np.asarray(scale).reshape(-1)[0])
    ctx.set_output(0, value)


def _never_negative(value: SSAValue) -> bool:
    owner = value.owner
    name = getattr(owner, "name", "")
    if name in ("top.relu", "top.sigmoid", "top.hard_sigmoid", "top.softmax", "top.exp", "top.abs"):
        return True
    attrs = getattr(owner, "attributes", {})
    return "do_relu" in attrs and bool(getattr(attrs["do_relu"], "value", None) and attrs["do_relu"].value.data)


@onnx_rule("DequantizeLinear", since=10)
def dequantize_linear(ctx: NodeContext) -> None:
    """Codes back to real values: a tensor a QuantizeLinear passed on is already real;
    other integer tensors are dequantized by TOP ops. (Constants are folded before.)"""
    ctx.require_const(1, "the scale")
    if code_scale(ctx.importer, ctx.node.input[0]) is not None:
        ctx.set_output(0, ctx.input(0))
        return
    rank = len(ctx.shape(0))
    real = ctx.importer.values[_real_input(ctx, 0, 1, 2, int(ctx.attr("axis", 1)) % max(rank, 1))]
    if real.const is not None:  # constant codes the reference evaluator did not fold
        ctx.set_const(0, real.const)
        return
    ctx.set_output(0, real.ssa)  # type: ignore[arg-type]


# -- QOperator ---------------------------------------------------------------------------


@onnx_rule("QLinearConv", since=10)
def qlinear_conv(ctx: NodeContext) -> None:
    """x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B (int32,
    scale x_scale * w_scale): a float Conv on the dequantized filter and bias."""
    x = _real_input(ctx, 0, 1, 2)
    w = _real_input(ctx, 3, 4, 5, axis=0)
    inputs = [x, w]
    if ctx.has_input(8):
        bias_scale = ctx.require_const(1, "x_scale").astype(F32) * ctx.require_const(4, "w_scale").astype(F32)
        bias = ctx.require_const(8, "the bias").astype(F32) * bias_scale.reshape(-1)
        inputs.append(_new_const(ctx, bias, "bias_real"))
    _quantized_output(ctx, "Conv", inputs, 6, 7, keep=("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))


@onnx_rule("QLinearMatMul", since=10)
def qlinear_matmul(ctx: NodeContext) -> None:
    """a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point: a float
    MatMul (b's scales per column run along its last axis)."""
    a = _real_input(ctx, 0, 1, 2, axis=-1)
    b = _real_input(ctx, 3, 4, 5, axis=-1)
    _quantized_output(ctx, "MatMul", [a, b], 6, 7)


@onnx_rule("QGemm", domain=MS)
def qgemm(ctx: NodeContext) -> None:
    """A, a_scale, a_zp, B, b_scale, b_zp, C (int32, scale alpha / beta * a_scale * b_scale),
    y_scale, y_zp: a float Gemm; without y_scale its output is float."""
    trans_b = int(ctx.attr("transB", 0))
    a = _real_input(ctx, 0, 1, 2, axis=-1)
    b = _real_input(ctx, 3, 4, 5, axis=0 if trans_b else 1)
    inputs = [a, b]
    if ctx.has_input(6):
        alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
        scale = ctx.require_const(1, "a_scale").astype(F32) * ctx.require_const(4, "b_scale").astype(F32)
        bias = ctx.require_const(6, "C").astype(F32) * (scale.reshape(-1) * np.float32(alpha / beta))
        inputs.append(_new_const(ctx, bias, "bias_real"))
    y_scale = 7 if ctx.has_input(7) else None
    _quantized_output(ctx, "Gemm", inputs, y_scale, 8, keep=("alpha", "beta", "transA", "transB"))


def _binary(op_type: str):
    def rule(ctx: NodeContext) -> None:
        """A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp: the float op."""
        _quantized_output(ctx, op_type, [_real_input(ctx, 0, 1, 2), _real_input(ctx, 3, 4, 5)], 6, 7)

    return rule


onnx_rule("QLinearAdd", domain=MS)(_binary("Add"))
onnx_rule("QLinearMul", domain=MS)(_binary("Mul"))


def _unary(op_type: str, keep: tuple[str, ...] = ()):
    def rule(ctx: NodeContext) -> None:
        """X, X_scale, X_zp, Y_scale, Y_zp: the float op."""
        if ctx.attr("channels_last", 0):
            raise ctx.error("channels_last = 1 is not supported; export the model with NCHW tensors")
        _quantized_output(ctx, op_type, [_real_input(ctx, 0, 1, 2)], 3, 4, keep=keep)

    return rule


onnx_rule("QLinearSigmoid", domain=MS)(_unary("Sigmoid"))
onnx_rule("QLinearLeakyRelu", domain=MS)(_unary("LeakyRelu", ("alpha",)))
onnx_rule("QLinearGlobalAveragePool", domain=MS)(_unary("GlobalAveragePool"))
onnx_rule("QLinearAveragePool", domain=MS)(
    _unary("AveragePool", ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"))
)


@onnx_rule("QLinearSoftmax", domain=MS)
def qlinear_softmax(ctx: NodeContext) -> None:
    """X, X_scale, X_zp, Y_scale, Y_zp: a float Softmax with the semantics of the
    ONNX opset its `opset` attribute names."""
    opset = int(ctx.attr("opset", ctx.importer.opsets.get("", 13)))
    _quantized_output(ctx, "Softmax", [_real_input(ctx, 0, 1, 2)], 3, 4, keep=("axis",), opset=opset)


@onnx_rule("QLinearConcat", domain=MS)
def qlinear_concat(ctx: NodeContext) -> None:
    """Y_scale, Y_zp, then (X, X_scale, X_zp) per input: a float Concat."""
    if (ctx.num_inputs - 2) % 3:
        raise ctx.error(f"{ctx.num_inputs} inputs: expected Y_scale, Y_zero_point and triples of X, scale, zero point")
    inputs = [_real_input(ctx, i, i + 1, i + 2) for i in range(2, ctx.num_inputs, 3)]
    _quantized_output(ctx, "Concat", inputs, 0, 1, keep=("axis",))


# -- integer ops and dynamic quantization -----------------------------------------------


@onnx_rule("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(ctx: NodeContext) -> None:
    """The float tensor goes on as its own codes with scale 1 and zero point 0, so that
    integer consumers and the Mul by their scales compute the float result."""
    if any(ctx.has_output(i) and _is_graph_output(ctx, ctx.output_name(i)) for i in range(3)):
        _dynamic_codes(ctx)  # the model's user reads the codes or scale: compute them
        return
    state = quantization(ctx.importer)
    state.dynamic.append(ctx.node.name or ctx.output_name(0))
    ctx.set_output(0, ctx.input(0))
    state.real_values[ctx.output_name(0)] = 1.0
    if ctx.has_output(1):
        ctx.set_const(1, np.array(1.0, F32))
    if ctx.has_output(2):
        ctx.set_const(2, np.array(0, np.uint8))


def _dynamic_codes(ctx: NodeContext) -> None:
    """DynamicQuantizeLinear as ONNX defines it, in TOP ops: scale = (max(x, 0) - min(x, 0))
    / 255, zero point = sat(round(-min(x, 0) / scale)), y = sat(round(x / scale) + zero point)."""
    from tpu_xdsl.frontend.rules.nn import output_as

    shape = ctx.shape(0)
    rank = len(shape)
    ones = [1] * rank
    x = ctx.input(0)

    def const(value: float, tag: str) -> SSAValue:
        return ctx.constant(np.full(ones, value, F32), tag)

    every = {"axes": list(range(rank)), "keepdims": True}
    (high,) = ctx.emit("reduce", [x], {"mode": "max", **every}, shapes_=[ones])
    (low,) = ctx.emit("reduce", [x], {"mode": "min", **every}, shapes_=[ones])
    (high,) = ctx.emit("max", [high, const(0.0, "zero")])
    (low,) = ctx.emit("min", [low, const(0.0, "zero")])
    (span,) = ctx.emit("sub", [high, low])
    (scale,) = ctx.emit("div", [span, const(255.0, "levels")])
    (zero,) = ctx.emit("div", [low, scale])
    (zero,) = ctx.emit("neg", [zero])
    (zero,) = ctx.emit("clip", [zero], {"min": 0.0, "max": 255.0})
    (zero,) = ctx.emit("round", [zero])
    (codes,) = ctx.emit("div", [x, scale])
    (codes,) = ctx.emit("round", [codes])
    (codes,) = ctx.emit("add", [codes, zero])
    output_as(ctx, 0, "clip", [codes], {"min": 0.0, "max": 255.0}, shape=shape)
    if ctx.has_output(1):
        output_as(ctx, 1, "reshape", [scale], {"shape": []}, shape=[])
    if ctx.has_output(2):
        output_as(ctx, 2, "reshape", [zero], {"shape": []}, shape=[])


def _integer_operand(ctx: NodeContext, i: int, zero_at: int, axis: int) -> tuple[str, float]:
    """Operand i of ConvInteger/MatMulInteger less its zero point, as a float value, and
    the factor the result is off by: a constant becomes (q - zero_point) exactly; a
    tensor passed on as real values stands for codes of scale s (1 after
    DynamicQuantizeLinear), so the result is divided by s."""
    value = ctx.value(i)
    zero = ctx.const(zero_at)
    if ctx.has_input(zero_at) and zero is None:
        raise ctx.error(f"the zero point (input {zero_at}) must be a constant")
    if value.const is not None:
        return _new_const(ctx, dequantize(value.const, np.array(1.0, F32), zero, axis), f"in{i}_centered"), 1.0
    scale = code_scale(ctx.importer, ctx.node.input[i])
    if scale is not None:
        return ctx.node.input[i], scale
    return _centered(ctx, i, zero, axis), 1.0


def _integer_node(ctx: NodeContext, op_type: str, weight_axis: int, keep: tuple[str, ...] = ()) -> None:
    x, x_scale = _integer_operand(ctx, 0, 2, 1 if op_type == "Conv" else -1)
    w, w_scale = _integer_operand(ctx, 1, 3, weight_axis)
    factor = 1.0 / (x_scale * w_scale)
    quantization(ctx.importer).renamed.add(ctx.output_name(0))  # int32 in onnxruntime
    if factor == 1.0:
        _delegate(ctx, op_type, [x, w], [ctx.output_name(0)], keep=keep)
        return
    raw = ctx.importer.unique_name(f"{ctx.output_name(0)}_unscaled", reserve=False)
    _delegate(ctx, op_type, [x, w], [raw], keep=keep)
    _delegate(ctx, "Mul", [raw, _new_const(ctx, np.array(factor, F32), "code_scale")], [ctx.output_name(0)])


@onnx_rule("ConvInteger", since=10)
def conv_integer(ctx: NodeContext) -> None:
    """x, w, x_zero_point, w_zero_point -> the int32 sum of (x - zx)(w - zw): a float Conv
    (w's zero points per output channel)."""
    _integer_node(ctx, "Conv", 0, keep=("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))


@onnx_rule("MatMulInteger", since=10)
def matmul_integer(ctx: NodeContext) -> None:
    """A, B, a_zero_point, b_zero_point -> (A - za) @ (B - zb) in int32: a float MatMul
    (B's zero points per column)."""
    _integer_node(ctx, "MatMul", -1)


@onnx_rule("DynamicQuantizeMatMul", domain=MS)
def dynamic_quantize_matmul(ctx: NodeContext) -> None:
    """A (float), B (int8/uint8), b_scale, b_zero_point, bias: A @ dequantized B + bias."""
    state = quantization(ctx.importer)
    state.dynamic.append(ctx.node.name or ctx.output_name(0))
    b = _real_input(ctx, 1, 2, 3 if ctx.has_input(3) else None, axis=-1)
    out = ctx.output_name(0)
    if not ctx.has_input(4):
        _delegate(ctx, "MatMul", [ctx.node.input[0], b], [out])
        return
    product = ctx.importer.unique_name(f"{out}_matmul", reserve=False)
    _delegate(ctx, "MatMul", [ctx.node.input[0], b], [product])
    _delegate(ctx, "Add", [product, ctx.node.input[4]], [out])


@onnx_rule("DynamicQuantizeLSTM", domain=MS)
def dynamic_quantize_lstm(ctx: NodeContext) -> None:
    """X, W, R, B, sequence_lens, initial_h, initial_c, P, W_scale, W_zero_point, R_scale,
    R_zero_point: W [directions, input, 4 hidden] and R [directions, hidden, 4 hidden]
    are int8/uint8 with scales per direction (and gate column); a float LSTM on them
    dequantized and transposed to ONNX's [directions, 4 hidden, input]."""
    state = quantization(ctx.importer)
    state.dynamic.append(ctx.node.name or ctx.output_name(0))
    weights = []
    for i, scale_at, zero_at, what in ((1, 8, 9, "W"), (2, 10, 11, "R")):
        codes = ctx.require_const(i, what)
        scale = ctx.require_const(scale_at, f"{what}_scale")
        zero = ctx.const(zero_at)
        directions = codes.shape[0]
        # Scales are [directions] or [directions, 4 hidden]: broadcast over [d, in, 4h].
        s = np.asarray(scale, F32).reshape(directions, 1, -1)
        z = np.zeros((1, 1, 1), np.int64) if zero is None else np.asarray(zero, np.int64).reshape(directions, 1, -1)
        real = (codes.astype(np.int64) - z).astype(F32) * s
        weights.append(_new_const(ctx, np.ascontiguousarray(real.transpose(0, 2, 1)), f"{what}_real"))
    inputs = [ctx.node.input[0], *weights, *(ctx.node.input[i] if ctx.has_input(i) else "" for i in range(3, 8))]
    while inputs and not inputs[-1]:
        inputs.pop()
    keep = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "input_forget")
    _delegate(ctx, "LSTM", inputs, list(ctx.node.output), keep=keep)
