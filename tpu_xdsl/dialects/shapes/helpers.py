"""What the shape rules share: attribute readers (ONNX defaults, a message naming the
attribute), shape formatting as in MLIR types, and the common checks (rank, broadcast,
element count) whose `ShapeError` names the operand at fault."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from tpu_xdsl.dialects.attr_values import to_py
from tpu_xdsl.dialects.shapes.registry import (
    Declared,
    OperandShape,
    Shape,
    ShapeError,
    Variadic,
)

# xDSL attribute -> Python value: one converter for the whole project.
to_python = to_py


def fmt(shape: OperandShape) -> str:
    """A shape as in MLIR types (``1x3x8x8``); ``()`` for rank 0, ``none``."""
    if shape is None:
        return "none"
    if isinstance(shape, list):
        return "[" + ", ".join(fmt(s) for s in shape) + "]"
    return "x".join(str(d) for d in shape) if shape else "()"


def fmt_value(value: Any) -> str:
    """An attribute value as written in MLIR (lists, "strings", true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(fmt_value(v) for v in value) + "]"
    return str(value)


_REQUIRED = object()


def _get(attrs: Mapping[str, Any], name: str, default: Any) -> Any:
    value = attrs.get(name, default)
    if value is _REQUIRED:
        raise ShapeError(f"attribute '{name}' is required")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(attrs: Mapping[str, Any], name: str, default: Any = _REQUIRED) -> int:
    value = _get(attrs, name, default)
    if not _is_int(value):
        raise ShapeError(f"attribute '{name}' = {fmt_value(value)} must be an integer")
    return value


def _bool(attrs: Mapping[str, Any], name: str, default: bool = False) -> bool:
    value = _get(attrs, name, default)
    if not isinstance(value, bool | int):
        raise ShapeError(f"attribute '{name}' = {fmt_value(value)} must be a boolean")
    return bool(value)


def _str(
    attrs: Mapping[str, Any], name: str, default: Any, choices: Sequence[str]
) -> str:
    value = _get(attrs, name, default)
    if value not in choices:
        options = ", ".join(fmt_value(c) for c in choices)
        raise ShapeError(
            f"attribute '{name}' = {fmt_value(value)} must be one of {options}"
        )
    return value


def _ints(
    attrs: Mapping[str, Any],
    name: str,
    default: Any = _REQUIRED,
    length: int | None = None,
) -> list[int]:
    value = _get(attrs, name, default)
    if not isinstance(value, list | tuple) or not all(_is_int(v) for v in value):
        raise ShapeError(
            f"attribute '{name}' = {fmt_value(value)} must be a list of integers"
        )
    if length is not None and len(value) != length:
        raise ShapeError(
            f"attribute '{name}' = {fmt_value(value)} must have {length} entries"
        )
    return list(value)


def _positive(name: str, values: Sequence[int], least: int = 1) -> None:
    if any(v < least for v in values):
        raise ShapeError(
            f"attribute '{name}' = {fmt_value(values)} must have entries >= {least}"
        )


def _axis(axis: int, rank: int, name: str = "axis", what: str = "") -> int:
    """`axis` in [-rank, rank) made non-negative; `what` describes the tensor."""
    if not -rank <= axis < rank:
        raise ShapeError(
            f"attribute '{name}' = {axis} is out of range for rank {rank}{what}"
        )
    return axis % rank if rank else 0


def _axes(axes: Sequence[int], rank: int, name: str, what: str = "") -> list[int]:
    """Distinct axes made non-negative."""
    out = [_axis(a, rank, name, what) for a in axes]
    if len(set(out)) != len(out):
        raise ShapeError(
            f"attribute '{name}' = {fmt_value(list(axes))} repeats an axis"
        )
    return out


def _require(name: str, shape: OperandShape) -> Shape:
    """A single tensor operand: neither none nor a variadic list."""
    if shape is None:
        raise ShapeError(f"operand '{name}' must be a tensor, not none")
    if isinstance(shape, list):
        raise ShapeError(f"operand '{name}' must be a tensor, not a list {fmt(shape)}")
    return shape


def _optional(name: str, shape: OperandShape) -> Shape | None:
    """An optional tensor operand: a shape or none, not a variadic list."""
    return None if shape is None else _require(name, shape)


def _variadic(name: str, shape: OperandShape) -> Variadic:
    """A variadic operand: the list of its shapes."""
    if not isinstance(shape, list):
        raise ShapeError(f"operand '{name}' {fmt(shape)} must be a list of tensors")
    return shape


def _rank(name: str, shape: OperandShape, rank: int) -> Shape:
    shape = _require(name, shape)
    if len(shape) != rank:
        raise ShapeError(f"operand '{name}' {fmt(shape)} must have rank {rank}")
    return shape


def _min_rank(name: str, shape: OperandShape, rank: int) -> Shape:
    shape = _require(name, shape)
    if len(shape) < rank:
        raise ShapeError(f"operand '{name}' {fmt(shape)} must have rank >= {rank}")
    return shape


def _expect(name: str, shape: OperandShape, expected: Shape, why: str) -> None:
    """Check an optional operand's shape equals `expected` (skipped when none)."""
    shape = _optional(name, shape)
    if shape is not None and tuple(shape) != expected:
        raise ShapeError(
            f"operand '{name}' has shape {fmt(shape)}, expected {fmt(expected)} {why}"
        )


def _numel(name: str, shape: OperandShape, count: int, why: str) -> None:
    """Check an optional operand holds `count` elements (skipped when none)."""
    shape = _optional(name, shape)
    if shape is not None and math.prod(shape) != count:
        raise ShapeError(
            f"operand '{name}' {fmt(shape)} has {math.prod(shape)} elements, "
            f"expected {count} {why}"
        )


def broadcast(*named: tuple[str, Shape]) -> Shape:
    """Numpy (ONNX multidirectional) broadcasting of the named shapes."""
    rank = max((len(s) for _, s in named), default=0)
    out: list[int] = []
    for d in range(rank):
        size, owner = 1, None
        for name, shape in named:
            k = d - rank + len(shape)
            if k < 0 or shape[k] == 1:
                continue
            if owner is not None and shape[k] != size:
                raise ShapeError(
                    f"operands '{owner[0]}' {fmt(owner[1])} and '{name}' {fmt(shape)} "
                    f"do not broadcast: {size} vs {shape[k]} at axis {d - rank}"
                )
            size, owner = shape[k], (name, shape)
        out.append(size)
    return tuple(out)


def _broadcasts_to(name: str, shape: OperandShape, target: Shape, what: str) -> None:
    """Check an optional operand broadcasts (unidirectionally) to `target`."""
    shape = _optional(name, shape)
    if shape is None:
        return
    ok = len(shape) <= len(target) and all(
        s in (1, t) for s, t in zip(reversed(shape), reversed(target))
    )
    if not ok:
        raise ShapeError(
            f"operand '{name}' {fmt(shape)} does not broadcast to {what} {fmt(target)}"
        )


def _declared(outs: Declared, index: int = 0) -> Shape | None:
    return outs[index] if index < len(outs) else None
