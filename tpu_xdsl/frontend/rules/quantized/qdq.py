"""QuantizeLinear and DequantizeLinear (QDQ models)."""

from __future__ import annotations

import numpy as np

from tpu_xdsl.calibration.model_scales import TensorScale
from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule
from tpu_xdsl.frontend.rules.quantized.common import (
    code_dtype,
    code_scale,
    emit_codes,
    is_graph_output,
    kept_relu,
    real_input,
)
from tpu_xdsl.frontend.rules.quantized.model import (
    CODE_TYPES,
    quantization,
)


@onnx_rule("QuantizeLinear", since=10)
def quantize_linear(ctx: NodeContext) -> None:
    """An activation's quantization: the float tensor goes on, its scale is recorded."""
    scale = ctx.require_const(1, "the scale")
    zero = ctx.const(2)
    if ctx.has_input(2) and zero is None:
        raise ctx.error("the zero point (input 2) must be a constant")
    dtype = code_dtype(ctx, zero)
    value = ctx.input(0)
    if is_graph_output(ctx, ctx.output_name(0)):  # the model's user reads the codes
        rank = len(ctx.shape(0))
        emit_codes(ctx, value, scale, zero, dtype, int(ctx.attr("axis", 1)) % max(rank, 1))
        return
    state = quantization(ctx.importer)
    found = TensorScale.of(scale, zero, dtype) if scale.size == 1 and dtype in CODE_TYPES else None
    value = kept_relu(ctx, value, zero, dtype, found, f"{ctx.node.input[0]}_relu")
    if found is not None:
        state.code_scales[ctx.output_name(0)] = found
        state.record(value, found, ctx.where)
    else:
        state.unscaled.append(ctx.node.name or ctx.output_name(0))
    state.real_values[ctx.output_name(0)] = float(np.asarray(scale).reshape(-1)[0])
    ctx.set_output(0, value)


@onnx_rule("DequantizeLinear", since=10)
def dequantize_linear(ctx: NodeContext) -> None:
    """Codes back to real values: a tensor a QuantizeLinear passed on is already real;
    other integer tensors are dequantized by TOP ops. (Constants are folded before.)"""
    ctx.require_const(1, "the scale")
    if code_scale(ctx.importer, ctx.node.input[0]) is not None:
        ctx.set_output(0, ctx.input(0))
        return
    rank = len(ctx.shape(0))
    real = ctx.importer.values[real_input(ctx, 0, 1, 2, int(ctx.attr("axis", 1)) % max(rank, 1))]
    if real.const is not None:  # constant codes the reference evaluator did not fold
        ctx.set_const(0, real.const)
        return
    ctx.set_output(0, real.ssa)  # type: ignore[arg-type]
