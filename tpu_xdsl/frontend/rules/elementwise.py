"""Import rules for elementwise arithmetic, math, comparison and logic ops.

TOP computes in f32: `ctx.input` casts integer and bool inputs to f32, and a
node whose ONNX output is integer or bool ends in a `top.cast` back to that
dtype (`output_as`), so later nodes and the graph outputs see ONNX's dtypes.
Before opset 7 binary ops broadcast only with `broadcast=1`, B aligned to A
at `axis` (`legacy_rhs`).
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.onnx_model import F32
from tpu_xdsl.frontend.registry import onnx_rule

BOOL = np.dtype(np.bool_)


def is_integral(dtype: np.dtype) -> bool:
    """Integer or bool (bfloat16's numpy kind is 'V', so test for these kinds)."""
    return dtype.kind in "iub"


def constant(
    ctx: NodeContext,
    value: object,
    tag: str,
    dtype: np.dtype | None = F32,
    rank: int = 0,
) -> SSAValue:
    """A `top.weight` holding `value` (cast to `dtype` unless None), named `<output>_<tag>`.

    A scalar becomes a tensor of `rank` ones, so it broadcasts without changing
    the other operand's rank.
    """
    array = np.asarray(value) if dtype is None else np.asarray(value, dtype=dtype)
    if array.size == 1 and array.ndim < rank:
        array = array.reshape([1] * rank)
    name = f"{ctx.output_name(0)}_{tag}"
    if name in ctx.importer.values:
        name = ctx.importer.unique_name(name)
    return ctx.importer.weight(name, array)


def shape_of(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, TensorType)
    return tuple(value.type.get_shape())


def emit1(
    ctx: NodeContext, kind: str, operands: list[SSAValue], attrs: dict | None = None
) -> SSAValue:
    """An intermediate f32 `top.<kind>` with one result."""
    (value,) = ctx.emit(kind, operands, attrs)
    return value


def output_as(
    ctx: NodeContext,
    kind: str,
    operands: list[SSAValue],
    attrs: dict | None = None,
    dtype: np.dtype = F32,
) -> SSAValue:
    """Emit `top.<kind>` (f32) as the node's output, then a cast back to
    `dtype` when ONNX's output is integer or bool."""
    if not is_integral(dtype):
        return ctx.output(kind, operands, attrs)[0]
    return cast_output(ctx, emit1(ctx, kind, operands, attrs), dtype)


def cast_output(ctx: NodeContext, value: SSAValue, dtype: np.dtype) -> SSAValue:
    """`value` converted to `dtype` (f32 for float dtypes) as the node's output."""
    target = dtype if is_integral(dtype) else F32
    return ctx.output("cast", [value], dtypes=[target])[0]


def trunc(ctx: NodeContext, value: SSAValue) -> SSAValue:
    """Round toward zero: sign(x) * floor(|x|)."""
    magnitude = emit1(ctx, "floor", [emit1(ctx, "abs", [value])])
    return emit1(ctx, "mul", [emit1(ctx, "sign", [value]), magnitude])


def legacy_rhs(ctx: NodeContext, dtype: np.dtype | None = F32) -> SSAValue:
    """Input 1 (B) ready to broadcast against input 0 (A) with numpy rules.

    Before opset 7, shapes must be equal unless `broadcast=1`; then B's dims
    match A's from `axis` on (default: A's trailing dims), so B is reshaped to
    A's rank with ones around it. A run-time B comes back f32 when reshaped.
    """
    if ctx.opset >= 7:
        return ctx.input(1, dtype)
    a, b = ctx.shape(0), ctx.shape(1)
    if not ctx.attr("broadcast", 0):
        if a != b:
            raise ctx.error(
                f"inputs have shapes {list(a)} and {list(b)}: before opset 7 "
                "they must be equal unless broadcast=1"
            )
        return ctx.input(1, dtype)
    axis = ctx.attr("axis", len(a) - len(b))
    axis = axis + len(a) if axis < 0 else axis
    fits = 0 <= axis <= len(a) - len(b) and all(
        d in (1, a[axis + i]) for i, d in enumerate(b)
    )
    if not fits:
        raise ctx.error(f"B {list(b)} does not broadcast to A {list(a)} at axis {axis}")
    if axis + len(b) == len(a):
        return ctx.input(1, dtype)  # trailing alignment is numpy's own
    aligned = [1] * axis + list(b) + [1] * (len(a) - axis - len(b))
    const = ctx.const(1)
    if const is not None:
        return constant(ctx, const.reshape(aligned), "b", dtype)
    (value,) = ctx.emit(
        "reshape", [ctx.input(1)], {"shape": aligned}, shapes_=[aligned]
    )
    return value


# -- arithmetic ------------------------------------------------------------------------

_ARITH = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}


@onnx_rule(*_ARITH)
def arith(ctx: NodeContext) -> None:
    """Add/Sub/Mul/Div in f32; integer Div truncates toward zero, as ONNX."""
    lhs, rhs = ctx.input(0), legacy_rhs(ctx)
    dtype = ctx.dtype(0)
    if ctx.op_type == "Div" and dtype.kind in "iu":
        quotient = emit1(ctx, "div", [lhs, rhs])
        whole = (
            trunc(ctx, quotient)
            if dtype.kind == "i"
            else emit1(ctx, "floor", [quotient])
        )
        cast_output(ctx, whole, dtype)
        return
    output_as(ctx, _ARITH[ctx.op_type], [lhs, rhs], dtype=dtype)


@onnx_rule("Pow")
def pow_(ctx: NodeContext) -> None:
    """base ** exponent; the output has the base's dtype (opset 12+ mixes types)."""
    output_as(ctx, "pow", [ctx.input(0), legacy_rhs(ctx)], dtype=ctx.dtype(0))


@onnx_rule("Mod", since=10)
def mod(ctx: NodeContext) -> None:
    """a - b * floor(a / b) (the divisor's sign), or with fmod=1
    a - b * trunc(a / b) (C fmod)."""
    a, b = ctx.input(0), ctx.input(1)
    quotient = emit1(ctx, "div", [a, b])
    whole = (
        trunc(ctx, quotient) if ctx.attr("fmod", 0) else emit1(ctx, "floor", [quotient])
    )
    output_as(ctx, "sub", [a, emit1(ctx, "mul", [b, whole])], dtype=ctx.dtype(0))


_VARIADIC = {"Max": "max", "Min": "min", "Sum": "add", "Mean": "add"}


@onnx_rule(*_VARIADIC)
def variadic(ctx: NodeContext) -> None:
    """A chain of binary ops over the inputs (Mean divides the sum by their count)."""
    present = [i for i in range(ctx.num_inputs) if ctx.has_input(i)]
    if not present:
        raise ctx.error("needs at least one input")
    dtype = ctx.dtype(present[0])
    if len(present) == 1:
        cast_output(ctx, ctx.input(present[0], dtype=None), dtype)
        return
    kind = _VARIADIC[ctx.op_type]
    acc = ctx.input(present[0])
    for i in present[1:-1]:
        acc = emit1(ctx, kind, [acc, ctx.input(i)])
    last = [acc, ctx.input(present[-1])]
    if ctx.op_type == "Mean":
        total = emit1(ctx, kind, last)
        last = [total, constant(ctx, len(present), "count", rank=len(shape_of(total)))]
        kind = "div"
    output_as(ctx, kind, last, dtype=dtype)


# -- unary math --------------------------------------------------------------------------

_UNARY = {
    "Abs": "abs",
    "Neg": "neg",
    "Sqrt": "sqrt",
    "Reciprocal": "reciprocal",
    "Exp": "exp",
    "Log": "log",
    "Floor": "floor",
    "Ceil": "ceil",
    "Round": "round",
    "Sign": "sign",
    "Sin": "sin",
    "Cos": "cos",
    "Erf": "erf",
}


@onnx_rule(*_UNARY)
def unary(ctx: NodeContext) -> None:
    output_as(ctx, _UNARY[ctx.op_type], [ctx.input(0)], dtype=ctx.dtype(0))


# -- comparison, logic, selection --------------------------------------------------------

_COMPARE = {
    "Equal": "eq",
    "Less": "lt",
    "Greater": "gt",
    "LessOrEqual": "le",
    "GreaterOrEqual": "ge",
}


@onnx_rule(*_COMPARE)
def compare(ctx: NodeContext) -> None:
    """top.compare on f32 values (integer and bool inputs are cast); bool result."""
    if ctx.dtype(0).kind in "OSU":
        raise ctx.error("string tensors are not supported")
    ctx.output(
        "compare",
        [ctx.input(0), legacy_rhs(ctx)],
        {"mode": _COMPARE[ctx.op_type]},
        dtypes=[BOOL],
    )


_LOGICAL = {"And": "and", "Or": "or", "Xor": "xor"}


@onnx_rule(*_LOGICAL)
def logical(ctx: NodeContext) -> None:
    operands = [ctx.input(0, dtype=None), legacy_rhs(ctx, dtype=None)]
    ctx.output("logical", operands, {"mode": _LOGICAL[ctx.op_type]}, dtypes=[BOOL])


@onnx_rule("Not")
def not_(ctx: NodeContext) -> None:
    operands = [ctx.input(0, dtype=None), ctx.importer.none_value()]
    ctx.output("logical", operands, {"mode": "not"}, dtypes=[BOOL])


@onnx_rule("Where", since=9)
def where(ctx: NodeContext) -> None:
    """cond ? x : y with three-way broadcasting; x and y go through f32."""
    operands = [ctx.input(0, dtype=None), ctx.input(1), ctx.input(2)]
    output_as(ctx, "where", operands, dtype=ctx.dtype(1))


@onnx_rule("IsNaN", since=9)
def is_nan(ctx: NodeContext) -> None:
    """x != x holds exactly for NaN."""
    x = ctx.input(0)
    ctx.output("compare", [x, x], {"mode": "ne"}, dtypes=[BOOL])


@onnx_rule("IsInf", since=10)
def is_inf(ctx: NodeContext) -> None:
    """Compare x (or |x| when both signs count) with +-inf."""
    positive, negative = ctx.attr("detect_positive", 1), ctx.attr("detect_negative", 1)
    if not positive and not negative:
        ctx.set_const(0, np.zeros(ctx.shape(0), dtype=BOOL))
        return
    x = ctx.input(0)
    if positive and negative:
        x = emit1(ctx, "abs", [x])
    inf = constant(ctx, np.inf if positive else -np.inf, "inf", rank=ctx.rank(0))
    ctx.output("compare", [x, inf], {"mode": "eq"}, dtypes=[BOOL])
