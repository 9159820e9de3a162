"""Import rules for activations: one TOP op where TOP has one, else a short
decomposition into TOP ops (Selu, Celu, Softsign, Swish, ThresholdedRelu).
Attributes take ONNX's defaults; integer inputs (Relu, PRelu, Clip) go
through f32 and are cast back (`output_as`)."""

from __future__ import annotations

import numpy as np

from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule
from tpu_xdsl.frontend.rules.elementwise import constant, emit1, output_as

_UNARY = {
    "Relu": "relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Softplus": "softplus",
    "Mish": "mish",
    "HardSwish": "hard_swish",
}


@onnx_rule(*_UNARY)
def unary(ctx: NodeContext) -> None:
    output_as(ctx, _UNARY[ctx.op_type], [ctx.input(0)], dtype=ctx.dtype(0))


@onnx_rule("LeakyRelu")
def leaky_relu(ctx: NodeContext) -> None:
    ctx.output("leaky_relu", [ctx.input(0)], {"alpha": float(ctx.attr("alpha", 0.01))})


@onnx_rule("Elu")
def elu(ctx: NodeContext) -> None:
    ctx.output("elu", [ctx.input(0)], {"alpha": float(ctx.attr("alpha", 1.0))})


@onnx_rule("Selu")
def selu(ctx: NodeContext) -> None:
    """gamma * elu(x, alpha)."""
    alpha = float(ctx.attr("alpha", 1.67326319217681884765625))
    gamma = float(ctx.attr("gamma", 1.05070102214813232421875))
    y = emit1(ctx, "elu", [ctx.input(0)], {"alpha": alpha})
    ctx.output("mul", [y, constant(ctx, gamma, "gamma", rank=ctx.rank(0))])


@onnx_rule("Celu", since=12)
def celu(ctx: NodeContext) -> None:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) = alpha * elu(x / alpha, 1)."""
    alpha = float(ctx.attr("alpha", 1.0))
    if alpha == 0:
        raise ctx.error("alpha must not be 0")
    if alpha == 1:
        ctx.output("elu", [ctx.input(0)], {"alpha": 1.0})
        return
    scaled = emit1(
        ctx, "div", [ctx.input(0), constant(ctx, alpha, "alpha", rank=ctx.rank(0))]
    )
    y = emit1(ctx, "elu", [scaled], {"alpha": 1.0})
    ctx.output("mul", [y, constant(ctx, alpha, "alpha", rank=ctx.rank(0))])


@onnx_rule("PRelu")
def prelu(ctx: NodeContext) -> None:
    """slope * x for x < 0. Before opset 7 a 1-D slope of C values (Caffe2's
    form) is per channel; it is reshaped to [C, 1, ...] for numpy broadcasting."""
    x_shape, slope_shape = ctx.shape(0), ctx.shape(1)
    slope = ctx.input(1)
    per_channel = (
        ctx.opset < 7 and ctx.rank(0) > 2 and len(slope_shape) == 1
        and slope_shape[0] == x_shape[1] != 1 and slope_shape[0] != x_shape[-1]
    )  # fmt: skip
    if per_channel:
        aligned = [x_shape[1]] + [1] * (len(x_shape) - 2)
        (slope,) = ctx.emit("reshape", [slope], {"shape": aligned}, shapes_=[aligned])
    output_as(ctx, "prelu", [ctx.input(0), slope], dtype=ctx.dtype(0))


@onnx_rule("HardSigmoid")
def hard_sigmoid(ctx: NodeContext) -> None:
    attrs = {
        "alpha": float(ctx.attr("alpha", 0.2)),
        "beta": float(ctx.attr("beta", 0.5)),
    }
    ctx.output("hard_sigmoid", [ctx.input(0)], attrs)


@onnx_rule("Softsign")
def softsign(ctx: NodeContext) -> None:
    """x / (1 + |x|)."""
    x = ctx.input(0)
    denominator = emit1(
        ctx,
        "add",
        [emit1(ctx, "abs", [x]), constant(ctx, 1.0, "one", rank=ctx.rank(0))],
    )
    ctx.output("div", [x, denominator])


@onnx_rule("Gelu", since=20)
def gelu(ctx: NodeContext) -> None:
    approximate = ctx.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ctx.error(f"approximate '{approximate}' is not 'none' or 'tanh'")
    ctx.output("gelu", [ctx.input(0)], {"approximate": approximate})


@onnx_rule("Swish", since=24)
def swish(ctx: NodeContext) -> None:
    """x * sigmoid(alpha * x): top.silu when alpha is 1."""
    alpha = float(ctx.attr("alpha", 1.0))
    x = ctx.input(0)
    if alpha == 1:
        ctx.output("silu", [x])
        return
    gate = emit1(
        ctx,
        "sigmoid",
        [emit1(ctx, "mul", [x, constant(ctx, alpha, "alpha", rank=ctx.rank(0))])],
    )
    ctx.output("mul", [x, gate])


@onnx_rule("ThresholdedRelu", since=10)
def thresholded_relu(ctx: NodeContext) -> None:
    """x where x > alpha, else 0."""
    x = ctx.input(0)
    alpha = float(ctx.attr("alpha", 1.0))
    above = ctx.emit(
        "compare",
        [x, constant(ctx, alpha, "alpha", rank=ctx.rank(0))],
        {"mode": "gt"},
        dtypes=[np.dtype(np.bool_)],
    )[0]
    ctx.output("where", [above, x, constant(ctx, 0.0, "zero", rank=ctx.rank(0))])


@onnx_rule("Clip", until=10)
def clip_attrs(ctx: NodeContext) -> None:
    """Bounds are attributes before opset 11 (absent: unbounded)."""
    attrs = {
        name: float(ctx.attr(name)) for name in ("min", "max") if ctx.has_attr(name)
    }
    ctx.output("clip", [ctx.input(0)], attrs)


@onnx_rule("Clip", since=11)
def clip(ctx: NodeContext) -> None:
    """min(max(x, lo), hi) with optional scalar inputs lo and hi: one top.clip
    when both are constants (or absent); a run-time bound, which top.clip's
    attributes cannot hold, becomes a top.max (lo) or top.min (hi)."""
    bounds = {}
    for i, name in ((1, "min"), (2, "max")):
        value = ctx.const(i)
        if value is not None and value.size != 1:
            raise ctx.error(
                f"{name} (input {i}) must be a scalar, got shape {list(value.shape)}"
            )
        if ctx.has_input(i):
            bounds[name] = None if value is None else float(value.reshape(()))
    if None not in bounds.values():
        output_as(ctx, "clip", [ctx.input(0)], bounds, dtype=ctx.dtype(0))
        return
    steps = []  # (kind, operands after x, attrs): the lower bound first
    for i, name, kind in ((1, "min", "max"), (2, "max", "min")):
        if name in bounds and bounds[name] is None:
            steps.append((kind, [ctx.input(i)], None))
        elif name in bounds:
            steps.append(("clip", [], {name: bounds[name]}))
    y = ctx.input(0)
    for kind, rest, attrs in steps[:-1]:
        y = emit1(ctx, kind, [y, *rest], attrs)
    kind, rest, attrs = steps[-1]
    output_as(ctx, kind, [y, *rest], attrs, dtype=ctx.dtype(0))
