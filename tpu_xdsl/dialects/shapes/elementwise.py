"""Shape rules of elementwise ops: unary math, activations, casts and requant (same
shape), binary arithmetic, compare, logical and where (numpy broadcasting), prelu and
the table look-up lut."""

from __future__ import annotations

from tpu_xdsl.dialects.shapes.helpers import (
    _REQUIRED,
    _broadcasts_to,
    _int,
    _numel,
    _require,
    _str,
    broadcast,
    fmt,
)
from tpu_xdsl.dialects.shapes.registry import (
    Attrs,
    Declared,
    Operands,
    Shape,
    ShapeError,
    shape_rule,
)
from tpu_xdsl.kernels import op_kinds

_SAME_SHAPE = tuple(sorted(op_kinds.SAME_SHAPE))


@shape_rule(*_SAME_SHAPE, operands=("input",))
def same_shape(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Elementwise unary ops, casts, requant, load/store: output shape = input shape."""
    return [_require("input", ins[0])]


@shape_rule("lut", operands=("input", "table"))
def lut(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Table look-up: same shape; the table has 256 entries, or [C, 256], one row per
    channel of the input (along axis 1, or `channel_axis`)."""
    x, table = ins
    x, table = _require("input", x), _require("table", table)
    if len(table) == 2 and len(x) >= 2 and table[0] != 1:
        axis = _int(attrs, "channel_axis", 1)
        if not 1 <= axis < len(x):
            raise ShapeError(f"attribute 'channel_axis' = {axis} must name an axis 1..{len(x) - 1} of the input")
        if tuple(table) != (x[axis], 256):
            raise ShapeError(
                f"operand 'table' {fmt(table)} should be {x[axis]}x256: one row of 256 per channel of the input"
            )
        return [x]
    _numel("table", table, 256, "(one per 8-bit value)")
    return [x]


@shape_rule("add", "sub", "mul", "div", "max", "min", "pow", "compare",
            operands=("lhs", "rhs"))  # fmt: skip
def binary(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Numpy broadcasting of lhs and rhs."""
    lhs, rhs = ins
    return [broadcast(("lhs", _require("lhs", lhs)), ("rhs", _require("rhs", rhs)))]


@shape_rule("logical", operands=("lhs", "rhs"))
def logical(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """and/or/xor broadcast lhs and rhs; not takes lhs only (rhs none)."""
    lhs, rhs = ins
    mode = _str(attrs, "mode", _REQUIRED, ("and", "or", "xor", "not"))
    lhs = _require("lhs", lhs)
    if mode == "not":
        if rhs is not None:
            raise ShapeError(f"operand 'rhs' {fmt(rhs)} must be none for mode \"not\"")
        return [lhs]
    rhs = _require("rhs", rhs)
    return [broadcast(("lhs", lhs), ("rhs", rhs))]


@shape_rule("where", operands=("cond", "x", "y"))
def where(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Three-way numpy broadcasting of cond, x and y."""
    named = [(n, _require(n, s)) for n, s in zip(("cond", "x", "y"), ins)]
    return [broadcast(*named)]


@shape_rule("prelu", operands=("input", "slope"))
def prelu(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Same shape; slope broadcasts to the input."""
    x, slope = _require("input", ins[0]), _require("slope", ins[1])
    _broadcasts_to("slope", slope, x, "operand 'input'")
    return [x]
