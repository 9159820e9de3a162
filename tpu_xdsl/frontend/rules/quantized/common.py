"""What the quantized rules share: codes, their scales and zero points, real values of inputs."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import onnx
from onnx import helper
from xdsl.ir import SSAValue

from tpu_xdsl.calibration.model_scales import TensorScale
from tpu_xdsl.frontend import registry
from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.rules.quantized.model import (
    CODE_TYPES,
    F32,
    OUTPUT_DTYPES,
    quantization,
)

if TYPE_CHECKING:
    from tpu_xdsl.frontend.onnx_importer import OnnxImporter

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


def code_dtype(ctx: NodeContext, zero_point: np.ndarray | None) -> np.dtype:
    if zero_point is not None:
        return np.dtype(zero_point.dtype)
    return OUTPUT_DTYPES.get(int(ctx.attr("output_dtype", 0)), np.dtype(np.uint8))


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


def is_graph_output(ctx: NodeContext, name: str) -> bool:
    return any(v.name == name for v in ctx.importer.model.graph.output)


def emit_codes(ctx: NodeContext, real: SSAValue, scale: np.ndarray, zero: np.ndarray | None,
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


def new_const(ctx: NodeContext, array: np.ndarray, tag: str) -> str:
    """A constant under a fresh name the importer knows (for a delegated node's input)."""
    name = ctx.importer.unique_name(f"{ctx.output_name(0)}_{tag}", reserve=False)
    ctx.importer.define_const(name, np.asarray(array))
    return name


def delegate(
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


def real_input(ctx: NodeContext, i: int, scale_at: int, zero_at: int | None, axis: int = 1) -> str:
    """The name of a value holding the real values of quantized input i (codes with the
    scale and zero point of inputs `scale_at`, `zero_at`)."""
    name = ctx.node.input[i]
    scale = ctx.require_const(scale_at, "the scale")
    zero = ctx.const(zero_at) if zero_at is not None else None
    value = ctx.value(i)
    if value.const is not None:
        real = new_const(ctx, dequantize(value.const, scale, zero, axis), f"in{i}_real")
        if scale.size == 1 and value.const.dtype in CODE_TYPES:
            quantization(ctx.importer).one_scale_weights.add(real)
        return real
    if code_scale(ctx.importer, name) is not None:
        return name
    # Codes from elsewhere (an integer model input): (q - zero_point) * scale in TOP ops.
    centered = ctx.importer.ssa(centered_input(ctx, i, zero, axis), None)
    rank = len(value.shape)
    (real,) = ctx.emit("mul", [centered, ctx.constant(_broadcast(scale, rank, axis).astype(F32), f"in{i}_scale")])
    real_name = ctx.importer.unique_name(f"{name}_real", reserve=False)
    ctx.importer.define(real_name, real)
    return real_name


def centered_input(ctx: NodeContext, i: int, zero: np.ndarray | None, axis: int) -> str:
    """The name of input i (a run-time integer tensor) less its zero point, in f32."""
    value = ctx.input(i)
    if zero is None or not np.any(zero != 0):
        name = ctx.importer.unique_name(f"{ctx.node.input[i]}_f32", reserve=False)
        ctx.importer.define(name, value)
        return name
    rank = len(ctx.shape(i))
    (centered,) = ctx.emit("sub", [value, ctx.constant(_broadcast(zero, rank, axis).astype(F32), f"in{i}_zero_point")])
    name = ctx.importer.unique_name(f"{ctx.node.input[i]}centered_input", reserve=False)
    ctx.importer.define(name, centered)
    return name


def never_negative(value: SSAValue) -> bool:
    """Whether the op that computes `value` gives no negative number (a fused ReLU, a sigmoid, ...)."""
    owner = value.owner
    name = getattr(owner, "name", "")
    if name in ("top.relu", "top.sigmoid", "top.hard_sigmoid", "top.softmax", "top.exp", "top.abs"):
        return True
    attrs = getattr(owner, "attributes", {})
    return "do_relu" in attrs and bool(getattr(attrs["do_relu"], "value", None) and attrs["do_relu"].value.data)


def kept_relu(ctx: NodeContext, value: SSAValue, zero: np.ndarray | None, dtype: np.dtype,
              found: TensorScale | None, name: str) -> SSAValue:
    """`value` through the ReLU onnxruntime drops where a quantization's codes start at 0
    (the zero point is the code type's lowest, 8 or 16 bits, per tensor or per axis: the
    codes clamp), before a QuantizeLinear or fused into a QLinear op: TOP keeps it, so float
    stages compute what the model does. The producer shares the range `found` (when the
    codes are recorded), so that top-fuse-relu can fuse the two."""
    lowest = np.iinfo(dtype).min if dtype.kind in "iu" else None  # not float8's codes
    if lowest is None or not np.all((0 if zero is None else np.asarray(zero)) == lowest) or never_negative(value):
        return value
    if found is not None:
        quantization(ctx.importer).record(value, found, ctx.where)
    (relu,) = ctx.emit("relu", [value], name=name)
    return relu


def quantized_output(ctx: NodeContext, op_type: str, inputs: list[str], scale_at: int | None,
                      zero_at: int | None, **kwargs) -> None:
    """The float `op_type` as this node's output 0 under `{output}_real`, its codes'
    scale and zero point (inputs `scale_at`, `zero_at`) recorded as its calibration."""
    out = ctx.output_name(0)
    if scale_at is None or not ctx.has_input(scale_at):  # a float output (QGemm without y_scale)
        delegate(ctx, op_type, inputs, [out], **kwargs)
        return
    real_name = ctx.importer.unique_name(f"{out}_real", reserve=False)
    delegate(ctx, op_type, inputs, [real_name], **kwargs)
    real = ctx.importer.values[real_name]
    scale = ctx.require_const(scale_at, "the output scale")
    zero = ctx.const(zero_at) if zero_at is not None else None
    state = quantization(ctx.importer)
    dtype = code_dtype(ctx, zero)
    if is_graph_output(ctx, out) and real.ssa is not None:
        emit_codes(ctx, real.ssa, scale, zero, dtype, 1)
        return
    if scale.size == 1 and dtype in CODE_TYPES and real.ssa is not None:
        state.code_scales[out] = found = TensorScale.of(scale, zero, dtype)
        value = kept_relu(ctx, real.ssa, zero, dtype, found, f"{out}_relu")
        state.record(value, found, ctx.where)
        real = replace(real, ssa=value)
    state.real_values[out] = float(np.asarray(scale).reshape(-1)[0])
    ctx.importer.values[out] = real
