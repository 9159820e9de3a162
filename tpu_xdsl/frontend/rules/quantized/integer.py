"""Integer ops and dynamic quantization: DynamicQuantizeLinear, ConvInteger, MatMulInteger,
DynamicQuantizeMatMul, DynamicQuantizeLSTM."""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue

from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule
from tpu_xdsl.frontend.rules.nn import output_as
from tpu_xdsl.frontend.rules.quantized.common import (
    centered_input,
    code_scale,
    delegate,
    dequantize,
    is_graph_output,
    new_const,
    real_input,
)
from tpu_xdsl.frontend.rules.quantized.model import (
    F32,
    MS,
    quantization,
)


@onnx_rule("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(ctx: NodeContext) -> None:
    """The float tensor goes on as its own codes with scale 1 and zero point 0, so that
    integer consumers and the Mul by their scales compute the float result."""
    if any(ctx.has_output(i) and is_graph_output(ctx, ctx.output_name(i)) for i in range(3)):
        if 0 in ctx.shape(0):
            raise ctx.error(f"the input {list(ctx.shape(0))} is empty: it has no range to quantize")
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
        return new_const(ctx, dequantize(value.const, np.array(1.0, F32), zero, axis), f"in{i}centered_input"), 1.0
    scale = code_scale(ctx.importer, ctx.node.input[i])
    if scale is not None:
        return ctx.node.input[i], scale
    return centered_input(ctx, i, zero, axis), 1.0


def _integer_node(ctx: NodeContext, op_type: str, weight_axis: int, keep: tuple[str, ...] = ()) -> None:
    x, x_scale = _integer_operand(ctx, 0, 2, 1 if op_type == "Conv" else -1)
    w, w_scale = _integer_operand(ctx, 1, 3, weight_axis)
    factor = 1.0 / (x_scale * w_scale)
    quantization(ctx.importer).renamed.add(ctx.output_name(0))  # int32 in onnxruntime
    if factor == 1.0:
        delegate(ctx, op_type, [x, w], [ctx.output_name(0)], keep=keep)
        return
    raw = ctx.importer.unique_name(f"{ctx.output_name(0)}_unscaled", reserve=False)
    delegate(ctx, op_type, [x, w], [raw], keep=keep)
    delegate(ctx, "Mul", [raw, new_const(ctx, np.array(factor, F32), "code_scale")], [ctx.output_name(0)])


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
    b = real_input(ctx, 1, 2, 3 if ctx.has_input(3) else None, axis=-1)
    out = ctx.output_name(0)
    if not ctx.has_input(4):
        delegate(ctx, "MatMul", [ctx.node.input[0], b], [out])
        return
    product = ctx.importer.unique_name(f"{out}_matmul", reserve=False)
    delegate(ctx, "MatMul", [ctx.node.input[0], b], [product])
    delegate(ctx, "Add", [product, ctx.node.input[4]], [out])


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
        weights.append(new_const(ctx, np.ascontiguousarray(real.transpose(0, 2, 1)), f"{what}_real"))
    inputs = [ctx.node.input[0], *weights, *(ctx.node.input[i] if ctx.has_input(i) else "" for i in range(3, 8))]
    while inputs and not inputs[-1]:
        inputs.pop()
    keep = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "input_forget")
    delegate(ctx, "LSTM", inputs, list(ctx.node.output), keep=keep)
