"""TOP (and float TPU) ops -> TOSA, one rule per op kind: the registry, the helpers rules share,
and the elementwise, activation and matmul rules (convolutions and pools in rules_conv,
normalizations and reductions in rules_nn, data movement in rules_tensor).

A rule gets the op, its operands as `Val`s and its attributes as Python values, and returns
one `Val` per result. Convolutions and pools work channels-last; elementwise ops keep the
layout their operands come in; everything else works in the logical layout. Semantics are
ONNX's, as the TOP interpreter's kernels (tpu_xdsl/kernels) compute them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import BFloat16Type, Float16Type, FloatAttr, IntegerType, TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.export.tosa_builder import (
    NHWC,
    Builder,
    Val,
    float32,
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
        element = x.element
        if isinstance(element, Float16Type | BFloat16Type):  # bounds in the tensor's type, as TOSA wants
            top = float(ml_dtypes.finfo(numpy_dtype(x.element)).max)
            low, high = min(max(low, -top), top), min(max(high, -top), top)
            return self.unary("clamp", x, min_val=FloatAttr(low, element), max_val=FloatAttr(high, element))
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


class ShapedOp:
    """An op seen with another result shape (for rules that reuse another rule)."""

    def __init__(self, op: Operation, shape: Sequence[int]):
        self.name = op.name
        kind = op.results[0].type
        assert isinstance(kind, TensorType)
        self.results = [type("R", (), {"type": tensor_type(shape, kind.element_type)})()]


def const_array(val: Val) -> np.ndarray:
    assert val.const is not None
    return val.const


def is_none(val: Val) -> bool:
    return val.rank == 0 and val.const is None and val.value is None


def optional_operand(inputs: Sequence[Val], index: int) -> Val | None:
    """The operand at `index`, None when absent or `top.none`."""
    if index >= len(inputs) or is_none(inputs[index]):
        return None
    return inputs[index]


def op_kind(op: Operation) -> str:
    return op.name.partition(".")[2]


def acc_type(element: Attribute) -> Attribute:
    """i32 for integers, else f32: TOSA allows f32 accumulation of f16 (the TPU interpreter
    sums f16 in f32; f16 sums lose the last bits of long reductions and overflow a global
    average pool's)."""
    from xdsl.dialects.builtin import Float32Type, IntegerType

    if isinstance(element, IntegerType):
        return IntegerType(32)
    return Float32Type()


def weight_array(op: Operation, val: Val | None, what: str) -> np.ndarray:
    if val is None or val.const is None:
        raise ExportError(f"{op.name}: its {what} must be a weight to export to TOSA")
    return val.const


# -- matmul -----------------------------------------------------------------------------------


@rule("matmul")
def matmul(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    a, b, bias = inputs[0], inputs[1], optional_operand(inputs, 2)
    out_shape, element = result_shape(op), result_element(op)
    a_log = swap_last_two(ctx, a, attrs.get("left_transpose"))
    b_log = swap_last_two(ctx, b, attrs.get("right_transpose"))
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
    # f16 and bf16 products summed in f32 (TOSA's wider matmul output), as the TPU interpreter
    # sums them; the bias added there too, one rounding to the storage type at the end.
    wide = acc_type(element)
    out = ctx.b.op("matmul", [as3(a_log, m, k), as3(b_log, k, n), zp, zp], tensor_type([count, m, n], wide))
    y = ctx.new(ctx.b.reshape(out, out_shape), out_shape, wide)
    if bias is not None:
        if bias.const is not None:
            bias = Val(bias.shape, wide, const=bias.const.astype(np.float32))
        elif bias.element != wide:
            bias = ctx.new(ctx.b.op("cast", [ctx.b.logical(bias)], tensor_type(bias.shape, wide)), bias.shape, wide)
        y = ctx.elementwise("add", [y, bias], out_shape, wide)
    if wide != element:
        y = ctx.new(ctx.b.op("cast", [ctx.b.logical(y)], tensor_type(out_shape, element)), out_shape, element)
    return [ctx.fused_relu(y, attrs)]


def swap_last_two(ctx: Context, val: Val, flag: Any) -> Val:
    """`val` with its last two axes swapped when `flag` (a matmul's transpose attributes)."""
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
    name = {"add": "add", "sub": "sub", "max": "maximum", "min": "minimum", "pow": "pow"}[op_kind(op)]
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
    return [ctx.unary(UNARY[op_kind(op)], inputs[0])]


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
    return [select_positive(ctx, x, x, scaled)]


def select_positive(ctx: Context, x: Val, positive: Val, otherwise: Val) -> Val:
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
    return [select_positive(ctx, x, x, ctx.mul(x, slope, x.shape))]


@rule("elu")
def elu(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    alpha = float(attrs.get("alpha", 1.0))
    e = ctx.elementwise("sub", [ctx.unary("exp", x), ctx.scalar(1.0, x.element, x.rank)], x.shape, x.element)
    return [select_positive(ctx, x, x, ctx.mul(e, ctx.scalar(alpha, x.element, x.rank), x.shape))]


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
    arrays = [weight_array(op, v, "batch-norm parameter") for v in (s, b, mean, var)]
    gamma, beta, mu, sigma2 = (a.astype(np.float64) for a in arrays)
    factor = gamma / np.sqrt(sigma2 + float(attrs.get("epsilon", 1e-5)))
    dtype = numpy_dtype(x.element)
    s2 = Val(s.shape, s.element, const=factor.astype(dtype))
    t2 = Val(b.shape, b.element, const=(beta - mu * factor).astype(dtype))
    return scale(ctx, op, [x, s2, t2], {})


# -- comparisons, logic and rounding -----------------------------------------------------------

BOOL = IntegerType(1)
_COMPARE = {"eq": "equal", "ne": "equal", "gt": "greater", "lt": "greater", "ge": "greater_equal",
            "le": "greater_equal"}


@rule("compare")
def compare(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    mode = attrs["mode"]
    a, b = inputs if mode not in ("lt", "le") else inputs[::-1]  # a < b is b > a
    y = ctx.elementwise(_COMPARE[mode], [a, b], result_shape(op), BOOL)
    return [from_truth(ctx, ctx.unary("logical_not", y) if mode == "ne" else y, result_element(op))]


def from_truth(ctx: Context, mask: Val, element: Attribute) -> Val:
    """An i1 result as the op's element type: the importer folds a cast of a comparison to
    float into the comparison's result type (one-hot encodings), 1 where true, else 0."""
    if element == BOOL:
        return mask
    one, zero = ctx.scalar(1, element, mask.rank), ctx.scalar(0, element, mask.rank)
    return ctx.elementwise("select", [mask, one, zero], mask.shape, element)


def truth(ctx: Context, val: Val) -> Val:
    """`val` as i1: a nonzero number counts as true (not (val == 0))."""
    if val.element == BOOL:
        return val
    if val.const is not None:
        return Val(val.shape, BOOL, const=val.const != 0)
    if isinstance(val.element, IntegerType):  # TOSA casts an integer to bool as nonzero (its equal takes i32 only)
        return ctx.new(ctx.b.op("cast", [ctx.b.logical(val)], tensor_type(val.shape, BOOL)), val.shape, BOOL)
    zero = ctx.scalar(0, val.element, val.rank)
    return ctx.unary("logical_not", ctx.elementwise("equal", [val, zero], val.shape, BOOL))


@rule("logical")
def logical(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    mode = attrs["mode"]
    if mode == "not":
        return [from_truth(ctx, ctx.unary("logical_not", truth(ctx, inputs[0])), result_element(op))]
    operands = [truth(ctx, v) for v in inputs]
    return [from_truth(ctx, ctx.elementwise(f"logical_{mode}", operands, result_shape(op), BOOL), result_element(op))]


@rule("round")
def round_(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """Half to even, from floor: up when the fraction is above one half, or exactly one half
    with an odd floor. x - floor(x) and floor(x) / 2 are exact in floating point."""
    x = inputs[0]
    rank, el = x.rank, x.element
    low = ctx.unary("floor", x)
    fraction = ctx.elementwise("sub", [x, low], x.shape, el)
    half_low = ctx.unary("floor", ctx.mul(low, ctx.scalar(0.5, el, rank), x.shape))
    odd = ctx.elementwise("sub", [low, ctx.mul(half_low, ctx.scalar(2.0, el, rank), x.shape)], x.shape, el)
    half = ctx.scalar(0.5, el, rank)
    at_half = ctx.elementwise("select", [ctx.elementwise("equal", [fraction, half], x.shape, BOOL), odd,
                                         ctx.scalar(0.0, el, rank)], x.shape, el)
    up = ctx.elementwise("select", [ctx.elementwise("greater", [fraction, half], x.shape, BOOL),
                                    ctx.scalar(1.0, el, rank), at_half], x.shape, el)
    return [ctx.elementwise("add", [low, up], x.shape, el)]


@rule("sign")
def sign(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    rank, el = x.rank, x.element
    zero = ctx.scalar(0, el, rank)
    negative = ctx.elementwise("select", [ctx.elementwise("greater", [zero, x], x.shape, BOOL),
                                          ctx.scalar(-1, el, rank), zero], x.shape, el)
    return [ctx.elementwise("select", [ctx.elementwise("greater", [x, zero], x.shape, BOOL),
                                       ctx.scalar(1, el, rank), negative], x.shape, el)]


@rule("mish")
def mish(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    (soft,) = softplus(ctx, op, [x], {})
    return [ctx.mul(x, ctx.unary("tanh", soft), x.shape)]

# The op families register their rules in RULES when imported (after the helpers above exist).
from tpu_xdsl.export import rules_conv, rules_nn, rules_recurrent, rules_tensor  # noqa: F401  # pyright: ignore[reportUnusedImport]
