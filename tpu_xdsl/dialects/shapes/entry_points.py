"""The two users of the rules: `infer_shapes` (the ONNX importer: shapes in, shapes out)
and `verify_shapes` (the generated op classes: an op's result types checked against its
rule, through `VERIFY_HOOKS`)."""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from xdsl.dialects.builtin import NoneType, TensorType
from xdsl.ir import Attribute, Operation
from xdsl.irdl import IRDLOperation, OpDef, OptionalDef, VariadicDef
from xdsl.utils.exceptions import VerifyException

from tpu_xdsl.dialects.shapes.helpers import fmt, fmt_value, to_python
from tpu_xdsl.dialects.shapes.registry import (
    RULES,
    Attrs,
    Operands,
    OperandShape,
    Shape,
    ShapeError,
    ShapeRule,
)


def _normalize(shape: Any) -> OperandShape:
    """A shape as a tuple; a sequence of shapes (variadic operand) as a list."""
    if shape is None:
        return None
    if all(isinstance(d, numbers.Integral) for d in shape):
        return tuple(int(d) for d in shape)
    return [_normalize(s) for s in shape]  # type: ignore[misc]


def _lookup(op_name: str) -> ShapeRule:
    rule = RULES.get(op_name.split(".", 1)[-1])
    if rule is None:
        raise ShapeError(f"'{op_name}' has no shape rule")
    return rule


def infer_shapes(
    op_name: str,
    operand_shapes: Sequence[Any],
    attributes: Mapping[str, Any],
    result_shapes: Sequence[Sequence[int] | None] = (),
) -> list[Shape | None]:
    """The result shapes of `op_name` ("top.conv" or "conv") for the given
    operand shapes (``None`` for a none operand, a list for a variadic one) and
    attributes (Python values or xDSL attributes).

    `result_shapes` gives the declared result shapes where known: reshape,
    expand and interp take their output shape from it (or from the ONNX-style
    attributes `shape`/`scales`). Raises `ShapeError` naming the culprit.
    """
    rule = _lookup(op_name)
    ins = [_normalize(s) for s in operand_shapes]
    if len(ins) != len(rule.operands):
        raise ShapeError(
            f"'{op_name}' takes {len(rule.operands)} operands "
            f"({', '.join(rule.operands)}), got {len(ins)}"
        )
    attrs = Attrs({k: to_python(v) for k, v in attributes.items()})
    outs = [None if s is None else tuple(s) for s in result_shapes]
    try:
        return rule.fn(ins, attrs, outs)
    except ShapeError as e:
        raise ShapeError(f"'{op_name}' {e}") from e


class _NotStatic(Exception):
    """A type whose shape is not statically known: nothing to verify."""


def _shape_of(type_: Attribute) -> Shape | None:
    if isinstance(type_, NoneType):
        return None
    if isinstance(type_, TensorType) and all(d >= 0 for d in type_.get_shape()):
        return tuple(type_.get_shape())
    raise _NotStatic()


def _definition(op: Operation) -> OpDef:
    """The IRDL definition of `op`'s class: the ops with a shape rule are IRDL ops."""
    if not isinstance(op, IRDLOperation):
        raise TypeError(f"'{op.name}' is not an IRDL op: its shapes cannot be verified")
    return type(op).get_irdl_definition()


def _operand_shapes(op: Operation, names: Sequence[str]) -> list[OperandShape]:
    """The shapes of the operands `names` of `op`, looked up on its IRDL definition."""
    fields = {n.rstrip("_"): (n, d) for n, d in _definition(op).operands}
    shapes: list[OperandShape] = []
    for name in names:
        field, definition = fields[name]
        value = getattr(op, field)
        if isinstance(definition, OptionalDef):
            shapes.append(None if value is None else _shape_of(value.type))
        elif isinstance(definition, VariadicDef):
            shapes.append([_shape_of(v.type) for v in value])
        else:
            shapes.append(_shape_of(value.type))
    return shapes


def _result_names(op: Operation) -> list[str]:
    """One name per result of `op`: the field name, indexed for variadic fields."""
    names: list[str] = []
    for field, definition in _definition(op).results:
        value = getattr(op, field)
        name = field.rstrip("_")
        if isinstance(definition, OptionalDef):
            names += [name] if value is not None else []
        elif isinstance(definition, VariadicDef):
            names += [f"{name}[{i}]" for i in range(len(value))]
        else:
            names.append(name)
    return names


def _origin(names: Sequence[str], ins: Operands, attrs: Attrs) -> str:
    """'input 1x3x8x8, filter ... and attributes strides = [2, 2]' for messages."""
    text = "operands " + ", ".join(f"{n} {fmt(s)}" for n, s in zip(names, ins))
    used = [f"{k} = {fmt_value(attrs[k])}" for k in list(attrs.read)]
    return text + (" and attributes " + ", ".join(used) if used else "")


def verify_shapes(op: Operation) -> None:
    """Check `op`'s result shapes against its rule; raise `VerifyException` naming
    the op, the result (or the operand/attribute the rule blamed) and the values.
    Ops with dynamic or unranked shapes are not checked."""
    rule = _lookup(op.name)
    try:
        ins = _operand_shapes(op, rule.operands)
        outs = [_shape_of(r.type) for r in op.results]
    except _NotStatic:
        return
    attrs = Attrs(
        {k: to_python(v) for k, v in (*op.properties.items(), *op.attributes.items())}
    )
    try:
        expected = rule.fn(ins, attrs, outs)
    except ShapeError as e:
        raise VerifyException(f"'{op.name}' {e}") from e
    origin = _origin(rule.operands, ins, attrs)
    if len(expected) != len(outs):
        raise VerifyException(
            f"'{op.name}' has {len(outs)} results, expected {len(expected)} "
            f"from {origin}"
        )
    for name, declared, want in zip(_result_names(op), outs, expected):
        if declared is not None and want is not None and declared != tuple(want):
            raise VerifyException(
                f"'{op.name}' result '{name}' has shape {fmt(declared)}, expected "
                f"{fmt(tuple(want))} from {origin}"
            )
