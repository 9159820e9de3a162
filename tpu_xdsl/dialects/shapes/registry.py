"""The registry of shape rules: the `shape_rule` decorator, `RULES`, the `Attrs` a rule
reads and `ShapeError`, which a rule raises. Imports nothing of the rules."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tpu_xdsl.errors import TpuXdslError

Shape = tuple[int, ...]
"""A static tensor shape."""
Variadic = list[Shape | None]
"""The shapes a variadic operand holds, one per value."""
OperandShape = Shape | None | Variadic
"""One operand as a rule receives it: a shape, None for a none (or absent optional)
operand, a list for a variadic one. Rules narrow it with the helpers' `_require`
(a tensor), `_optional` (a tensor or none) and `_variadic` (a list)."""
Operands = Sequence[OperandShape]
Declared = Sequence[Shape | None]


class ShapeError(TpuXdslError):
    """Operand shapes, attributes or result types of an op are inconsistent.

    The message names the culprit ("operand 'rhs' ...", "attribute 'group' ...").
    """


class Attrs(Mapping[str, Any]):
    """An op's attributes as Python values; remembers which ones a rule read."""

    def __init__(self, values: Mapping[str, Any]):
        self._values = dict(values)
        self.read: list[str] = []

    def __getitem__(self, key: str) -> Any:
        value = self._values[key]
        if key not in self.read:
            self.read.append(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


RuleFn = Callable[[Operands, Attrs, Declared], list[Shape | None]]


@dataclass(frozen=True)
class ShapeRule:
    """A registered rule: the function and the names of the operands it takes."""

    fn: RuleFn
    operands: tuple[str, ...]


RULES: dict[str, ShapeRule] = {}
"""Shape rules keyed by op kind (op name without the dialect)."""


def shape_rule(*kinds: str, operands: Sequence[str]) -> Callable[[RuleFn], RuleFn]:
    """Register the decorated function as the shape rule of `kinds`.

    `operands` names the operands the rule takes, in order; `verify_shapes` looks
    them up by these names on the op.
    """

    def register(fn: RuleFn) -> RuleFn:
        for kind in kinds:
            if kind in RULES:
                raise ValueError(f"shape rule for {kind!r} registered twice")
            RULES[kind] = ShapeRule(fn, tuple(operands))
        return fn

    return register
