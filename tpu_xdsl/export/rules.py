"""TOP (and float TPU) ops -> TOSA, one rule per op kind.

A rule gets the op, its operands as `Val`s and its attributes as Python values, and returns
one `Val` per result. Convolutions and pools work channels-last; elementwise ops keep the
layout their operands come in; everything else works in the logical layout. Semantics are
ONNX's, as the TOP interpreter's kernels (tpu_xdsl/kernels) compute them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.export.tosa_builder import (
    NHWC,
    Builder,
    Val,
    array_i64,
    float32,
    int32,
    numpy_dtype,
    tensor_type,
)


class ExportError(TpuXdslError):
    """The module holds ops the TOSA export cannot express."""


Rule = Callable[["Context", Operation, list[Val], dict[str, Any]], list[Val]]
RULES: dict[str, Rule] = {}


def rule(*kinds: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for kind in kinds:
            RULES[kind] = fn
        return fn

    return register


class Context:
    """What a rule needs: the builder and the result types of the op."""

    def __init__(self, builder: Builder):
        self.b = builder

    # -- helpers shared by the rules --------------------------------------------------------

    def new(self, value: SSAValue, shape: Sequence[int], element: Attribute, channels_last: bool = False) -> Val:
        return Val(tuple(shape), element, value=value, channels_last=channels_last and len(shape) == 4)

    def elementwise(self, name: str, inputs: Sequence[Val], shape: Sequence[int], element: Attribute,
                    extra: Sequence[SSAValue] = (), **properties: Attribute) -> Val:
        """An elementwise op on operands broadcast to `shape`'s rank, in the layout of the
        first non-constant operand (channels-last when it is, for rank 4)."""
        rank = len(shape)
        last = rank == 4 and any(v.channels_last for v in inputs if v.const is None)
        operands = [self.b.materialize(self.expand(v, rank), last) for v in inputs]
        physical = [shape[p] for p in NHWC] if last else list(shape)
        out = self.b.op(name, [*operands, *extra], tensor_type(physical, element), **properties)
        return self.new(out, shape, element, last)

    def expand(self, val: Val, rank: int) -> Val:
        """`val` with leading unit dims up to `rank` (numpy broadcasting), as TOSA wants."""
        if val.rank == rank:
            return val
        shape = (1,) * (rank - val.rank) + val.shape
        if val.const is not None:
            return Val(shape, val.element, const=val.const.reshape(shape))
        return self.new(self.b.reshape(self.b.logical(val), shape), shape, val.element)

    def scalar(self, value: float, element: Attribute, rank: int) -> Val:
        return Val((1,) * rank, element, const=np.full((1,) * rank, value, numpy_dtype(element)))

    def unary(self, name: str, x: Val, *extra: SSAValue, **properties: Attribute) -> Val:
        operand = self.b.materialize(x, x.channels_last)
        out = self.b.op(name, [operand, *extra], tensor_type(x.physical_shape, x.element), **properties)
        return self.new(out, x.shape, x.element, x.channels_last)

    def clamp(self, x: Val, low: float, high: float) -> Val:
        return self.unary("clamp", x, min_val=float32(low), max_val=float32(high))

    def mul(self, a: Val, b: Val, shape: Sequence[int]) -> Val:
        shift = self.b.const(np.zeros(1, np.int8))
        return self.elementwise("mul", [a, b], shape, a.element, extra=[shift])

    def fused_relu(self, y: Val, attrs: dict[str, Any]) -> Val:
        if not attrs.get("do_relu"):
            return y
        limit = attrs.get("relu_limit")
        return self.clamp(y, 0.0, float(limit) if limit is not None and limit > 0 else 3.4e38)

    def logical_result(self, name: str, operands: Sequence[SSAValue], shape: Sequence[int], element: Attribute,
                       **properties: Attribute) -> Val:
        return self.new(self.b.op(name, list(operands), tensor_type(shape, element), **properties), shape, element)


def result_shape(op: Operation, index: int = 0) -> tuple[int, ...]:
    kind = op.results[index].type
    assert isinstance(kind, TensorType)
    return tuple(kind.get_shape())


def result_element(op: Operation, index: int = 0) -> Attribute:
    kind = op.results[index].type
    assert isinstance(kind, TensorType)
    return kind.element_type


# -- convolutions and pools -------------------------------------------------------------------


def _trimmed(size: int, kernel: int, before: int, after: int, stride: int, dilation: int) -> tuple[int, int]:
    """TOSA's divisibility rule, `(size - 1 + before + after - (kernel - 1) * dilation) %
    stride == 0`, met without changing the output: the end padding less the remainder, and
    when that is not enough, how many trailing rows of the input to crop (they are never
    read)."""
    remainder = (size - 1 + before + after - (kernel - 1) * dilation) % stride
    trim = min(after, remainder)
    return after - trim, remainder - trim


@rule("conv")
def conv(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x, w, bias = inputs[0], inputs[1], _optional(inputs, 2)
    spatial = len(attrs["kernel_shape"])
    if spatial == 1:  # a 1-D conv is a 2-D conv of height 1
        return _conv1d(ctx, op, x, w, bias, attrs)
    if spatial != 2:
        raise ExportError(f"{op.name}: only 1-D and 2-D convolutions export to TOSA, not {spatial}-D")
    out_shape, element = result_shape(op), result_element(op)
    group = int(attrs.get("group", 1))
    strides = list(attrs.get("strides") or [1, 1])
    dilations = list(attrs.get("dilations") or [1, 1])
    pads = list(attrs.get("pads") or [0, 0, 0, 0])  # ONNX: [top, left, bottom, right]
    tosa_pad = [pads[0], pads[2], pads[1], pads[3]]
    crop = [0, 0]
    for i in range(2):
        tosa_pad[2 * i + 1], crop[i] = _trimmed(x.shape[2 + i], w.shape[2 + i], tosa_pad[2 * i],
                                                tosa_pad[2 * i + 1], strides[i], dilations[i])
    weight = _constant(op, w, "filter")
    channels = x.shape[1]
    bias_array = _constant(op, bias, "bias") if bias is not None and bias.const is not None else None
    if bias is not None and bias_array is None:
        raise ExportError(f"{op.name}: a bias computed at run time does not export")
    out_channels = out_shape[1]
    if bias_array is None:
        bias_array = np.zeros(out_channels, numpy_dtype(element))
    zp = ctx.b.zero_point(element)
    props = {"pad": array_i64(tosa_pad), "stride": array_i64(strides), "dilation": array_i64(dilations),
                 "acc_type": _acc_type(element)}
    physical = [out_shape[0], out_shape[2], out_shape[3], out_channels]
    source = ctx.b.channels_last(x)
    if any(crop):
        kept = [x.shape[0], x.shape[2] - crop[0], x.shape[3] - crop[1], channels]
        source = ctx.b.op("slice", [source, ctx.b.shape([0, 0, 0, 0]), ctx.b.shape(kept)], tensor_type(kept, element))
    in_h, in_w = x.shape[2] - crop[0], x.shape[3] - crop[1]
    if group == 1:
        w_arr = ctx.b.const(weight.transpose(0, 2, 3, 1))  # OIHW -> OHWI
        out = ctx.b.op("conv2d", [source, w_arr, ctx.b.const(bias_array), zp, zp], tensor_type(physical, element),
                       **props)
    elif group == channels and weight.shape[1] == 1:  # depthwise: [C*M, 1, KH, KW] -> [KH, KW, C, M]
        m = out_channels // channels
        w_arr = ctx.b.const(weight.reshape(channels, m, *weight.shape[2:]).transpose(2, 3, 0, 1))
        out = ctx.b.op("depthwise_conv2d", [source, w_arr, ctx.b.const(bias_array), zp, zp],
                       tensor_type(physical, element), **props)
    else:  # grouped: one conv per group on its channels, concatenated
        per_in, per_out = channels // group, out_channels // group
        parts = []
        for g in range(group):
            piece = ctx.b.op("slice", [source, ctx.b.shape([0, 0, 0, g * per_in]),
                                       ctx.b.shape([x.shape[0], in_h, in_w, per_in])],
                             tensor_type([x.shape[0], in_h, in_w, per_in], element))
            w_arr = ctx.b.const(weight[g * per_out:(g + 1) * per_out].transpose(0, 2, 3, 1))
            b_arr = ctx.b.const(bias_array[g * per_out:(g + 1) * per_out])
            parts.append(ctx.b.op("conv2d", [piece, w_arr, b_arr, zp, zp],
                                  tensor_type([*physical[:3], per_out], element), **props))
        out = ctx.b.op("concat", parts, tensor_type(physical, element), axis=int32(3))
    y = ctx.new(out, out_shape, element, channels_last=True)
    return [ctx.fused_relu(y, attrs)]


def _conv1d(ctx: Context, op: Operation, x: Val, w: Val, bias: Val | None, attrs: dict[str, Any]) -> list[Val]:
    """[N, C, L] conv as [N, C, 1, L]: the rule for 2-D on reshaped operands."""
    out_shape = result_shape(op)
    x4 = ctx.new(ctx.b.reshape(ctx.b.logical(x), [*x.shape[:2], 1, x.shape[2]]), [*x.shape[:2], 1, x.shape[2]],
                 x.element)
    weight = _constant(op, w, "filter")
    w4 = Val((*weight.shape[:2], 1, weight.shape[2]), w.element, const=weight.reshape(*weight.shape[:2], 1, -1))
    pads = list(attrs.get("pads") or [0, 0])
    attrs2 = {**attrs, "kernel_shape": [1, attrs["kernel_shape"][0]],
              "strides": [1, *(attrs.get("strides") or [1])], "dilations": [1, *(attrs.get("dilations") or [1])],
              "pads": [0, pads[0], 0, pads[1]]}
    shim = _ShapedOp(op, [out_shape[0], out_shape[1], 1, out_shape[2]])
    (y4,) = conv(ctx, shim, [x4, w4, *([bias] if bias is not None else [])], attrs2)  # pyright: ignore[reportArgumentType]
    return [ctx.new(ctx.b.reshape(ctx.b.logical(y4), out_shape), out_shape, y4.element)]


class _ShapedOp:
    """An op seen with another result shape (for rules that reuse another rule)."""

    def __init__(self, op: Operation, shape: Sequence[int]):
        self.name = op.name
        kind = op.results[0].type
        assert isinstance(kind, TensorType)
        self.results = [type("R", (), {"type": tensor_type(shape, kind.element_type)})()]


@rule("deconv")
def deconv(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x, w, bias = inputs[0], inputs[1], _optional(inputs, 2)
    if len(attrs["kernel_shape"]) != 2 or int(attrs.get("group", 1)) != 1:
        raise ExportError(f"{op.name}: only 2-D deconvolutions with one group export to TOSA")
    if any(d != 1 for d in attrs.get("dilations") or [1, 1]):
        raise ExportError(f"{op.name}: dilated deconvolutions do not export to TOSA (transpose_conv2d has none)")
    out_shape, element = result_shape(op), result_element(op)
    weight = _constant(op, w, "filter")  # [C_in, C_out, KH, KW]
    bias_array = _constant(op, bias, "bias") if bias is not None else np.zeros(out_shape[1], numpy_dtype(element))
    pads = list(attrs.get("pads") or [0, 0, 0, 0])
    strides = list(attrs.get("strides") or [1, 1])
    out_pad = [-pads[0], -pads[2], -pads[1], -pads[3]]
    # output_padding grows the bottom/right edge.
    extra = list(attrs.get("output_padding") or [0, 0])
    out_pad[1] += extra[0]
    out_pad[3] += extra[1]
    zp = ctx.b.zero_point(element)
    physical = [out_shape[0], out_shape[2], out_shape[3], out_shape[1]]
    out = ctx.b.op("transpose_conv2d", [ctx.b.channels_last(x), ctx.b.const(weight.transpose(1, 2, 3, 0)),
                                        ctx.b.const(bias_array), zp, zp], tensor_type(physical, element),
                   out_pad=array_i64(out_pad), stride=array_i64(strides), acc_type=_acc_type(element))
    return [ctx.fused_relu(ctx.new(out, out_shape, element, True), attrs)]


def _pool(ctx: Context, op: Operation, x: Val, attrs: dict[str, Any], name: str) -> Val:
    out_shape, element = result_shape(op), result_element(op)
    kernel = list(attrs["kernel_shape"])
    if len(kernel) != 2:
        raise ExportError(f"{op.name}: only 2-D pools export to TOSA")
    strides = list(attrs.get("strides") or [1, 1])
    pads = list(attrs.get("pads") or [0, 0, 0, 0])
    tosa_pad = [pads[0], pads[2], pads[1], pads[3]]
    source = ctx.b.channels_last(x)
    in_h, in_w = x.shape[2], x.shape[3]
    if name == "avg_pool2d" and attrs.get("count_include_pad") and any(tosa_pad):
        padded = [x.shape[0], in_h + tosa_pad[0] + tosa_pad[1], in_w + tosa_pad[2] + tosa_pad[3], x.shape[1]]
        source = ctx.b.op("pad", [source, ctx.b.shape([0, 0, *tosa_pad, 0, 0]), ctx.b.zero_point(element)],
                          tensor_type(padded, element))
        in_h, in_w, tosa_pad = padded[1], padded[2], [0, 0, 0, 0]
    # ceil_mode and the divisibility rule: the bottom/right padding is what makes the
    # declared output size come out exactly.
    for i, (size, out) in enumerate(((in_h, out_shape[2]), (in_w, out_shape[3]))):
        tosa_pad[2 * i + 1] = (out - 1) * strides[i] + kernel[i] - size - tosa_pad[2 * i]
        if tosa_pad[2 * i + 1] < 0:
            raise ExportError(f"{op.name}: this pool's output size needs negative padding; it does not export")
    # TOSA leaves padding out of avg_pool2d's divisor, as ONNX's count_include_pad=0 does.
    physical = [out_shape[0], out_shape[2], out_shape[3], out_shape[1]]
    props: dict[str, Attribute] = {
        "kernel": array_i64(kernel), "stride": array_i64(strides), "pad": array_i64(tosa_pad),
    }
    operands = [source]
    if name == "avg_pool2d":
        zp = ctx.b.zero_point(element)
        operands += [zp, zp]
        props["acc_type"] = _acc_type(element)
    out = ctx.b.op(name, operands, tensor_type(physical, element), **props)
    return ctx.fused_relu(ctx.new(out, out_shape, element, True), attrs)


@rule("max_pool")
def max_pool(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    if any(d != 1 for d in attrs.get("dilations") or []):
        raise ExportError(f"{op.name}: dilated max pools do not export to TOSA")
    return [_pool(ctx, op, inputs[0], attrs, "max_pool2d")]


@rule("avg_pool")
def avg_pool(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    return [_pool(ctx, op, inputs[0], attrs, "avg_pool2d")]


# -- matmul -----------------------------------------------------------------------------------


@rule("matmul")
def matmul(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    a, b, bias = inputs[0], inputs[1], _optional(inputs, 2)
    out_shape, element = result_shape(op), result_element(op)
    a_log, b_log = _maybe_transposed(ctx, a, attrs.get("left_transpose")), _maybe_transposed(ctx, b, attrs.get(
        "right_transpose"))
    m, k, n = a_log.shape[-2] if a_log.rank > 1 else 1, a_log.shape[-1], b_log.shape[-1]
    batch = out_shape[:-2] if len(out_shape) >= 2 else ()
    count = int(np.prod(batch)) if batch else 1

    def as3(val: Val, rows: int, cols: int) -> SSAValue:
        lead = int(np.prod(val.shape[:-2])) if val.rank > 2 else 1
        shape = [lead, rows, cols]
        if val.const is not None:
            array = val.const.reshape(shape)
            if lead != count:
                array = np.broadcast_to(array, [count, rows, cols])
            return ctx.b.const(np.ascontiguousarray(array).astype(numpy_dtype(element), copy=False))
        value = ctx.b.reshape(ctx.b.logical(val), shape)
        if lead != count:
            value = ctx.b.op("tile", [value, ctx.b.shape([count, 1, 1])], tensor_type([count, rows, cols], element))
        return value

    zp = ctx.b.zero_point(element)
    out = ctx.b.op("matmul", [as3(a_log, m, k), as3(b_log, k, n), zp, zp], tensor_type([count, m, n], element))
    y = ctx.new(ctx.b.reshape(out, out_shape), out_shape, element)
    if bias is not None:
        y = ctx.elementwise("add", [y, bias], out_shape, element)
    return [ctx.fused_relu(y, attrs)]


def _maybe_transposed(ctx: Context, val: Val, flag: Any) -> Val:
    if not flag:
        return val
    perm = list(range(val.rank))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    shape = tuple(val.shape[p] for p in perm)
    if val.const is not None:
        return Val(shape, val.element, const=val.const.transpose(perm))
    return ctx.new(ctx.b.transpose(ctx.b.logical(val), perm), shape, val.element)


# -- elementwise ------------------------------------------------------------------------------


@rule("add", "sub", "max", "min", "pow")
def binary(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    name = {"add": "add", "sub": "sub", "max": "maximum", "min": "minimum", "pow": "pow"}[_kind(op)]
    y = ctx.elementwise(name, inputs, result_shape(op), result_element(op))
    return [ctx.fused_relu(y, attrs)]


@rule("mul")
def mul(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    return [ctx.fused_relu(ctx.mul(inputs[0], inputs[1], result_shape(op)), attrs)]


@rule("div")
def div(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    a, b = inputs  # TOSA has no float division: a * (1 / b), within an ulp of a / b
    shape = result_shape(op)
    if b.const is not None:
        inverse = (1.0 / b.const.astype(np.float64)).astype(b.const.dtype)
        return [ctx.mul(a, Val(b.shape, b.element, const=inverse), shape)]
    return [ctx.mul(a, ctx.unary("reciprocal", _broadcast_layout(ctx, b, a)), shape)]


def _broadcast_layout(ctx: Context, val: Val, like: Val) -> Val:
    if val.const is not None or val.rank == like.rank:
        return val
    return ctx.expand(val, like.rank)


UNARY = {"exp": "exp", "log": "log", "abs": "abs", "sigmoid": "sigmoid", "tanh": "tanh", "erf": "erf",
         "reciprocal": "reciprocal", "floor": "floor", "ceil": "ceil", "rsqrt": "rsqrt", "sin": "sin", "cos": "cos"}


@rule(*UNARY)
def unary(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    return [ctx.unary(UNARY[_kind(op)], inputs[0])]


@rule("neg")
def neg(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    zp = ctx.b.zero_point(inputs[0].element)
    return [ctx.unary("negate", inputs[0], zp, zp)]


@rule("sqrt")
def sqrt(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]  # TOSA has no sqrt: x ** 0.5
    return [ctx.elementwise("pow", [x, ctx.scalar(0.5, x.element, x.rank)], x.shape, x.element)]


@rule("relu")
def relu(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    return [ctx.fused_relu(inputs[0], {"do_relu": True, "relu_limit": attrs.get("relu_limit")})]


@rule("clip")
def clip(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    low, high = attrs.get("min"), attrs.get("max")
    return [ctx.clamp(inputs[0], -3.4e38 if low is None else low, 3.4e38 if high is None else high)]


@rule("leaky_relu")
def leaky_relu(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    alpha = float(attrs.get("alpha", 0.01))
    scaled = ctx.mul(x, ctx.scalar(alpha, x.element, x.rank), x.shape)
    if 0 <= alpha <= 1:
        return [ctx.elementwise("maximum", [x, scaled], x.shape, x.element)]
    return [_select_positive(ctx, x, x, scaled)]


def _select_positive(ctx: Context, x: Val, positive: Val, otherwise: Val) -> Val:
    zero = ctx.scalar(0.0, x.element, x.rank)
    from xdsl.dialects.builtin import IntegerType

    mask = ctx.elementwise("greater", [x, zero], x.shape, IntegerType(1))
    return ctx.elementwise("select", [mask, positive, otherwise], x.shape, x.element)


@rule("prelu")
def prelu(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x, slope = inputs
    if slope.const is not None and slope.rank == 1 and x.rank >= 2 and slope.shape[0] == x.shape[1]:
        shape = (1, slope.shape[0]) + (1,) * (x.rank - 2)
        slope = Val(shape, slope.element, const=slope.const.reshape(shape))
    return [_select_positive(ctx, x, x, ctx.mul(x, slope, x.shape))]


@rule("elu")
def elu(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    alpha = float(attrs.get("alpha", 1.0))
    e = ctx.elementwise("sub", [ctx.unary("exp", x), ctx.scalar(1.0, x.element, x.rank)], x.shape, x.element)
    return [_select_positive(ctx, x, x, ctx.mul(e, ctx.scalar(alpha, x.element, x.rank), x.shape))]


@rule("hard_sigmoid")
def hard_sigmoid(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    return [_hard_sigmoid(ctx, x, float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5)))]


def _hard_sigmoid(ctx: Context, x: Val, alpha: float, beta: float) -> Val:
    scaled = ctx.mul(x, ctx.scalar(alpha, x.element, x.rank), x.shape)
    shifted = ctx.elementwise("add", [scaled, ctx.scalar(beta, x.element, x.rank)], x.shape, x.element)
    return ctx.clamp(shifted, 0.0, 1.0)


@rule("hard_swish")
def hard_swish(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    return [ctx.mul(x, _hard_sigmoid(ctx, x, 1.0 / 6.0, 0.5), x.shape)]


@rule("silu")
def silu(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    return [ctx.mul(x, ctx.unary("sigmoid", x), x.shape)]


@rule("gelu")
def gelu(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    half = ctx.mul(x, ctx.scalar(0.5, x.element, x.rank), x.shape)
    if attrs.get("approximate", "none") == "tanh":
        cube = ctx.mul(ctx.mul(x, x, x.shape), x, x.shape)
        inner = ctx.elementwise("add", [x, ctx.mul(cube, ctx.scalar(0.044715, x.element, x.rank), x.shape)],
                                x.shape, x.element)
        t = ctx.unary("tanh", ctx.mul(inner, ctx.scalar(math.sqrt(2 / math.pi), x.element, x.rank), x.shape))
    else:
        t = ctx.unary("erf", ctx.mul(x, ctx.scalar(1 / math.sqrt(2), x.element, x.rank), x.shape))
    one_plus = ctx.elementwise("add", [t, ctx.scalar(1.0, x.element, x.rank)], x.shape, x.element)
    return [ctx.mul(half, one_plus, x.shape)]


@rule("softplus")
def softplus(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    e = ctx.elementwise("add", [ctx.unary("exp", x), ctx.scalar(1.0, x.element, x.rank)], x.shape, x.element)
    return [ctx.unary("log", e)]


@rule("scale")
def scale(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x, s, t = inputs
    shape = (1, x.shape[1]) + (1,) * (x.rank - 2)

    def per_channel(val: Val) -> Val:
        if val.const is not None:
            return Val(shape, val.element, const=val.const.reshape(shape))
        return ctx.expand(val, x.rank)

    y = ctx.elementwise("add", [ctx.mul(x, per_channel(s), x.shape), per_channel(t)], x.shape, x.element)
    return [ctx.fused_relu(y, attrs)]


@rule("batch_norm")
def batch_norm(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x, s, b, mean, var = inputs
    arrays = [_constant(op, v, "batch-norm parameter") for v in (s, b, mean, var)]
    gamma, beta, mu, sigma2 = (a.astype(np.float64) for a in arrays)
    factor = gamma / np.sqrt(sigma2 + float(attrs.get("epsilon", 1e-5)))
    dtype = numpy_dtype(x.element)
    s2 = Val(s.shape, s.element, const=factor.astype(dtype))
    t2 = Val(b.shape, b.element, const=(beta - mu * factor).astype(dtype))
    return scale(ctx, op, [x, s2, t2], {})


# -- normalizations and softmax ---------------------------------------------------------------


def _reduce(ctx: Context, name: str, x: Val, axis: int) -> Val:
    shape = list(x.shape)
    shape[axis] = 1
    physical_axis = NHWC.index(axis) if x.channels_last else axis
    physical = [shape[p] for p in NHWC] if x.channels_last else shape
    out = ctx.b.op(name, [ctx.b.materialize(x, x.channels_last)], tensor_type(physical, x.element),
                   axis=int32(physical_axis))
    return ctx.new(out, shape, x.element, x.channels_last)


@rule("softmax", "log_softmax")
def softmax(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    axis = int(attrs.get("axis", -1)) % x.rank
    shifted = ctx.elementwise("sub", [x, _reduce(ctx, "reduce_max", x, axis)], x.shape, x.element)
    e = ctx.unary("exp", shifted)
    total = _reduce(ctx, "reduce_sum", e, axis)
    if _kind(op) == "log_softmax":
        return [ctx.elementwise("sub", [shifted, ctx.unary("log", total)], x.shape, x.element)]
    return [ctx.mul(e, ctx.unary("reciprocal", total), x.shape)]


@rule("layer_norm")
def layer_norm(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x, gamma, beta = inputs
    axis = int(attrs.get("axis", -1)) % x.rank
    axes = list(range(axis, x.rank))
    return [_normalize(ctx, x, axes, float(attrs.get("epsilon", 1e-5)), gamma, beta, trailing=True)]


@rule("instance_norm")
def instance_norm(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x, gamma, beta = inputs
    return [_normalize(ctx, x, list(range(2, x.rank)), float(attrs.get("epsilon", 1e-5)), gamma, beta,
                       trailing=False)]


def _normalize(ctx: Context, x: Val, axes: Sequence[int], eps: float, gamma: Val, beta: Val, trailing: bool) -> Val:
    count = int(np.prod([x.shape[a] for a in axes]))
    inv = ctx.scalar(1.0 / count, x.element, x.rank)
    total = x
    for axis in axes:
        total = _reduce(ctx, "reduce_sum", total, axis)
    centered = ctx.elementwise("sub", [x, ctx.mul(total, inv, total.shape)], x.shape, x.element)
    square = ctx.mul(centered, centered, x.shape)
    for axis in axes:
        square = _reduce(ctx, "reduce_sum", square, axis)
    var = ctx.elementwise("add", [ctx.mul(square, inv, square.shape), ctx.scalar(eps, x.element, x.rank)],
                          square.shape, x.element)
    y = ctx.mul(centered, ctx.unary("rsqrt", var), x.shape)
    if trailing:
        g, b = gamma, beta
    else:
        shape = (1, x.shape[1]) + (1,) * (x.rank - 2)
        g = Val(shape, gamma.element, const=_constant_val(gamma).reshape(shape)) if gamma.const is not None else gamma
        b = Val(shape, beta.element, const=_constant_val(beta).reshape(shape)) if beta.const is not None else beta
    y = ctx.mul(y, g, x.shape) if not _is_none(g) else y
    return ctx.elementwise("add", [y, b], x.shape, x.element) if not _is_none(b) else y


def _constant_val(val: Val) -> np.ndarray:
    assert val.const is not None
    return val.const


def _is_none(val: Val) -> bool:
    return val.rank == 0 and val.const is None and val.value is None


@rule("reduce")
def reduce(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    mode = attrs["mode"]
    axes = sorted(int(a) % x.rank for a in attrs["axes"])
    names = {"sum": "reduce_sum", "mean": "reduce_sum", "max": "reduce_max", "min": "reduce_min",
             "prod": "reduce_product"}
    if mode not in names:
        raise ExportError(f"{op.name}: reduce mode {mode} does not export to TOSA")
    y = x
    for axis in axes:
        y = _reduce(ctx, names[mode], y, axis)
    if mode == "mean":
        count = int(np.prod([x.shape[a] for a in axes]))
        y = ctx.mul(y, ctx.scalar(1.0 / count, x.element, x.rank), y.shape)
    out_shape = result_shape(op)
    if tuple(out_shape) != y.shape:
        y = ctx.new(ctx.b.reshape(ctx.b.logical(y), out_shape), out_shape, x.element)
    return [y]


# -- data movement -----------------------------------------------------------------------------


@rule("reshape", "flatten", "squeeze", "unsqueeze", "expand_dims")
def reshape(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    shape = result_shape(op)
    if x.const is not None:
        return [Val(shape, x.element, const=x.const.reshape(shape))]
    return [ctx.new(ctx.b.reshape(ctx.b.logical(x), shape), shape, x.element)]


@rule("permute")
def permute(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    order = [int(o) for o in attrs["order"]]
    shape = result_shape(op)
    if x.const is not None:
        return [Val(shape, x.element, const=x.const.transpose(order))]
    if x.channels_last and x.rank == 4:  # compose with the layout: one transpose, not two
        perm = [NHWC.index(o) for o in order]
        return [ctx.new(ctx.b.transpose(x.value, perm), shape, x.element)]  # pyright: ignore[reportArgumentType]
    return [ctx.new(ctx.b.transpose(ctx.b.logical(x), order), shape, x.element)]


@rule("concat")
def concat(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    shape, element = result_shape(op), result_element(op)
    axis = int(attrs["axis"]) % len(shape)
    last = len(shape) == 4 and any(v.channels_last for v in inputs if v.const is None)
    operands = [ctx.b.materialize(v, last) for v in inputs]
    physical = [shape[p] for p in NHWC] if last else list(shape)
    out = ctx.b.op("concat", operands, tensor_type(physical, element), axis=int32(NHWC.index(axis) if last else axis))
    return [ctx.fused_relu(ctx.new(out, shape, element, last), attrs)]


@rule("slice")
def slice_(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    shape = result_shape(op)
    starts, ends, axes, steps = (list(attrs[k]) for k in ("starts", "ends", "axes", "steps"))
    begin = [0] * x.rank
    step = [1] * x.rank
    for start, end, axis, s in zip(starts, ends, axes, steps, strict=True):
        axis = int(axis) % x.rank
        size = x.shape[axis]
        begin[axis] = int(slice(start, end, s).indices(size)[0])
        step[axis] = int(s)
    if any(s != 1 for s in step):
        raise ExportError(f"{op.name}: slices with steps other than 1 do not export to TOSA")
    if x.const is not None:
        index = tuple(slice(b, b + n) for b, n in zip(begin, shape, strict=True))
        return [Val(shape, x.element, const=x.const[index])]
    last = x.channels_last
    order = NHWC if last else tuple(range(x.rank))
    out = ctx.b.op("slice", [ctx.b.materialize(x, last), ctx.b.shape([begin[p] for p in order]),
                             ctx.b.shape([shape[p] for p in order])],
                   tensor_type([shape[p] for p in order], x.element))
    return [ctx.new(out, shape, x.element, last)]


@rule("split")
def split(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    axis = int(attrs["axis"]) % x.rank
    outs, offset = [], 0
    for index in range(len(op.results)):
        shape = result_shape(op, index)
        attrs_one = {"starts": [offset], "ends": [offset + shape[axis]], "axes": [axis], "steps": [1]}
        outs += slice_(ctx, _ShapedOp(op, shape), [x], attrs_one)  # pyright: ignore[reportArgumentType]
        offset += shape[axis]
    return outs


@rule("pad")
def pad(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    if attrs.get("mode", "constant") != "constant":
        raise ExportError(f"{op.name}: pad mode {attrs.get('mode')} does not export to TOSA (constant only)")
    pads = [int(p) for p in attrs["pads"]]
    if any(p < 0 for p in pads):
        raise ExportError(f"{op.name}: negative pads do not export to TOSA")
    rank = x.rank
    padding = [v for axis in range(rank) for v in (pads[axis], pads[axis + rank])]
    shape, element = result_shape(op), result_element(op)
    value = np.full(1, float(attrs.get("value", 0.0)), numpy_dtype(element))
    last = x.channels_last
    order = NHWC if last else tuple(range(rank))
    physical_padding = [v for a in order for v in padding[2 * a:2 * a + 2]]
    out = ctx.b.op("pad", [ctx.b.materialize(x, last), ctx.b.shape(physical_padding), ctx.b.const(value)],
                   tensor_type([shape[p] for p in order], element))
    return [ctx.new(out, shape, element, last)]


@rule("interp", "upsample")
def interp(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    shape, element = result_shape(op), result_element(op)
    if x.rank != 4 or shape[:2] != x.shape[:2]:
        raise ExportError(f"{op.name}: only resizes of H and W of a 4-D tensor export to TOSA")
    mode = "nearest" if _kind(op) == "upsample" else attrs["mode"]
    coordinate = "asymmetric" if _kind(op) == "upsample" else attrs["coordinate_mode"]
    if mode not in ("nearest", "linear"):
        raise ExportError(f"{op.name}: resize mode {mode} does not export to TOSA (nearest, linear)")
    nearest = attrs.get("nearest_mode", "round_prefer_floor") if _kind(op) == "interp" else "floor"
    scale, offset, border = [], [], []
    for size, out in zip(x.shape[2:], shape[2:], strict=True):
        n, d, off = _resize_ratio(op, coordinate, size, out)
        if mode == "nearest":
            n, d, off = _nearest_offset(op, nearest, n, d, off)
        scale += [n, d]
        offset.append(off)
        border.append((out - 1) * d - (size - 1) * n + off)
    tosa_mode = "NEAREST_NEIGHBOR" if mode == "nearest" else "BILINEAR"
    from tpu_xdsl.dialects.tosa_attrs import ResizeMode, ResizeModeAttr

    physical = [shape[0], shape[2], shape[3], shape[1]]
    out = ctx.b.op("resize", [ctx.b.channels_last(x), ctx.b.shape(scale), ctx.b.shape(offset), ctx.b.shape(border)],
                   tensor_type(physical, element), mode=ResizeModeAttr(ResizeMode(tosa_mode)))
    return [ctx.new(out, shape, element, True)]


def _resize_ratio(op: Operation, coordinate: str, size: int, out: int) -> tuple[int, int, int]:
    """TOSA's scale n/d and offset: the output row y samples input row (y * d + offset) / n,
    ONNX's coordinate transformation in integers."""
    if coordinate == "align_corners" and out > 1:
        n, d, off = out - 1, size - 1, 0
    elif coordinate == "pytorch_half_pixel" and out == 1:
        n, d, off = 1, 1, 0
    elif coordinate in ("half_pixel", "pytorch_half_pixel"):  # (y + 0.5) / s - 0.5
        n, d, off = 2 * out, 2 * size, size - out
    elif coordinate == "asymmetric":
        n, d, off = out, size, 0
    else:
        raise ExportError(f"{op.name}: coordinate mode {coordinate} does not export to TOSA")
    g = math.gcd(math.gcd(n, d), off)
    return n // g, d // g, off // g


def _nearest_offset(op: Operation, rounding: str, n: int, d: int, off: int) -> tuple[int, int, int]:
    """The offset that makes TOSA's nearest neighbour (round half up of the position) round
    as ONNX's nearest_mode does: positions sit on a grid of 1/n, so shifting by one step
    turns ties down, and by half a unit turns rounding into floor or ceil."""
    if rounding == "round_prefer_ceil":
        return n, d, off
    if rounding == "round_prefer_floor":
        return n, d, off - 1
    if n % 2:
        n, d, off = 2 * n, 2 * d, 2 * off
    if rounding == "floor":
        return n, d, off - n // 2
    if rounding == "ceil":
        return n, d, off + n // 2 - 1
    raise ExportError(f"{op.name}: nearest mode {rounding} does not export to TOSA")


@rule("cast")
def cast(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    element = result_element(op)
    if x.element == element:
        return [x]
    out = ctx.b.op("cast", [ctx.b.materialize(x, x.channels_last)], tensor_type(x.physical_shape, element))
    return [ctx.new(out, x.shape, element, x.channels_last)]


@rule("tile")
def tile(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    shape = result_shape(op)
    repeats = [int(r) for r in attrs["repeats"]]
    return [ctx.logical_result("tile", [ctx.b.logical(x), ctx.b.shape(repeats)], shape, x.element)]


@rule("expand")
def expand(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = ctx.expand(inputs[0], len(result_shape(op)))
    shape = result_shape(op)
    repeats = [out // size for out, size in zip(shape, x.shape, strict=True)]
    if x.const is not None:
        return [Val(shape, x.element, const=np.broadcast_to(x.const, shape).copy())]
    return [ctx.logical_result("tile", [ctx.b.logical(x), ctx.b.shape(repeats)], shape, x.element)]


@rule("where")
def where(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    return [ctx.elementwise("select", inputs, result_shape(op), result_element(op))]


@rule("depth2space")
def depth2space(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    n, c, h, w = x.shape
    b = int(attrs["block_size"])
    shape = result_shape(op)
    if attrs.get("inverse"):
        raise ExportError(f"{op.name}: space-to-depth does not export to TOSA yet")
    crd = attrs.get("mode", "DCR") == "CRD"
    six = [n, c // (b * b), b, b, h, w] if crd else [n, b, b, c // (b * b), h, w]
    perm = [0, 1, 4, 2, 5, 3] if crd else [0, 3, 4, 1, 5, 2]
    value = ctx.b.reshape(ctx.b.logical(x), six)
    moved = ctx.b.transpose(value, perm)
    return [ctx.new(ctx.b.reshape(moved, shape), shape, x.element)]


def _optional(inputs: Sequence[Val], index: int) -> Val | None:
    """The operand at `index`, None when absent or `top.none`."""
    if index >= len(inputs) or _is_none(inputs[index]):
        return None
    return inputs[index]


def _kind(op: Operation) -> str:
    return op.name.partition(".")[2]


def _acc_type(element: Attribute) -> Attribute:
    from xdsl.dialects.builtin import Float16Type, Float32Type, IntegerType

    if element == Float16Type():
        return Float16Type()
    if isinstance(element, IntegerType):
        return IntegerType(32)
    return Float32Type()


def _constant(op: Operation, val: Val | None, what: str) -> np.ndarray:
    if val is None or val.const is None:
        raise ExportError(f"{op.name}: its {what} must be a weight to export to TOSA")
    return val.const
