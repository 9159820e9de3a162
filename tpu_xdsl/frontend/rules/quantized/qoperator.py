"""QOperator models: QLinearConv, QLinearMatMul, QGemm and com.microsoft's QLinear ops."""

from __future__ import annotations

import numpy as np

from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule
from tpu_xdsl.frontend.rules.quantized.common import (
    new_const,
    quantized_output,
    real_input,
)
from tpu_xdsl.frontend.rules.quantized.model import (
    F32,
    MS,
)


@onnx_rule("QLinearConv", since=10)
def qlinear_conv(ctx: NodeContext) -> None:
    """x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B (int32,
    scale x_scale * w_scale): a float Conv on the dequantized filter and bias."""
    x = real_input(ctx, 0, 1, 2)
    w = real_input(ctx, 3, 4, 5, axis=0)
    inputs = [x, w]
    if ctx.has_input(8):
        bias_scale = ctx.require_const(1, "x_scale").astype(F32) * ctx.require_const(4, "w_scale").astype(F32)
        bias = ctx.require_const(8, "the bias").astype(F32) * bias_scale.reshape(-1)
        inputs.append(new_const(ctx, bias, "bias_real"))
    quantized_output(
        ctx, "Conv", inputs, 6, 7, keep=("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
    )


@onnx_rule("QLinearMatMul", since=10)
def qlinear_matmul(ctx: NodeContext) -> None:
    """a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point: a float
    MatMul (b's scales per column run along its last axis)."""
    a = real_input(ctx, 0, 1, 2, axis=-1)
    b = real_input(ctx, 3, 4, 5, axis=-1)
    quantized_output(ctx, "MatMul", [a, b], 6, 7)


@onnx_rule("QGemm", domain=MS)
def qgemm(ctx: NodeContext) -> None:
    """A, a_scale, a_zp, B, b_scale, b_zp, C (int32, scale alpha / beta * a_scale * b_scale),
    y_scale, y_zp: a float Gemm; without y_scale its output is float."""
    trans_b = int(ctx.attr("transB", 0))
    a = real_input(ctx, 0, 1, 2, axis=-1)
    b = real_input(ctx, 3, 4, 5, axis=0 if trans_b else 1)
    inputs = [a, b]
    if ctx.has_input(6):
        alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
        scale = ctx.require_const(1, "a_scale").astype(F32) * ctx.require_const(4, "b_scale").astype(F32)
        bias = ctx.require_const(6, "C").astype(F32) * (scale.reshape(-1) * np.float32(alpha / beta))
        inputs.append(new_const(ctx, bias, "bias_real"))
    y_scale = 7 if ctx.has_input(7) else None
    quantized_output(ctx, "Gemm", inputs, y_scale, 8, keep=("alpha", "beta", "transA", "transB"))


def _binary(op_type: str):
    def rule(ctx: NodeContext) -> None:
        """A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp: the float op."""
        quantized_output(ctx, op_type, [real_input(ctx, 0, 1, 2), real_input(ctx, 3, 4, 5)], 6, 7)

    return rule


onnx_rule("QLinearAdd", domain=MS)(_binary("Add"))
onnx_rule("QLinearMul", domain=MS)(_binary("Mul"))


def _unary(op_type: str, keep: tuple[str, ...] = ()):
    def rule(ctx: NodeContext) -> None:
        """X, X_scale, X_zp, Y_scale, Y_zp: the float op."""
        if ctx.attr("channels_last", 0):
            raise ctx.error("channels_last = 1 is not supported; export the model with NCHW tensors")
        quantized_output(ctx, op_type, [real_input(ctx, 0, 1, 2)], 3, 4, keep=keep)

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
    quantized_output(ctx, "Softmax", [real_input(ctx, 0, 1, 2)], 3, 4, keep=("axis",), opset=opset)


@onnx_rule("QLinearConcat", domain=MS)
def qlinear_concat(ctx: NodeContext) -> None:
    """Y_scale, Y_zp, then (X, X_scale, X_zp) per input: a float Concat."""
    if (ctx.num_inputs - 2) % 3:
        raise ctx.error(f"{ctx.num_inputs} inputs: expected Y_scale, Y_zero_point and triples of X, scale, zero point")
    inputs = [real_input(ctx, i, i + 1, i + 2) for i in range(2, ctx.num_inputs, 3)]
    quantized_output(ctx, "Concat", inputs, 0, 1, keep=("axis",))
