"""What the TOP canonicalization patterns share: matching producers and constants,
building TOP ops, and erasing what a rewrite leaves unused."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    FunctionType,
    ModuleOp,
    TensorType,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from tpu_xdsl.dialects import op_class
from tpu_xdsl.dialects.attr_values import from_py, to_py
from tpu_xdsl.weights import WeightFileError, weight_name, weights_of


def producer(value: SSAValue, *kinds: str) -> Operation | None:
    """The op defining `value` when it is a `top.<kind>` of `kinds` without a fused
    ReLU (which makes it a different function), else None."""
    owner = value.owner
    if not isinstance(owner, Operation) or not owner.name.startswith("top."):
        return None
    if owner.name[4:] not in kinds or has_fused_relu(owner):
        return None
    return owner


def constant(module: ModuleOp, value: SSAValue) -> np.ndarray | None:
    """The array behind `value` when a `top.weight` in the module's table defines it.

    A weight the table lacks counts as unknown (a module handled without its
    weights attached): patterns then leave the op alone.
    """
    owner = value.owner
    if not isinstance(owner, Operation) or owner.name != "top.weight":
        return None
    try:
        return np.asarray(weights_of(module)[weight_name(owner)])
    except WeightFileError:
        return None


def scalar(module: ModuleOp, value: SSAValue) -> float | None:
    """The value of a constant whose elements are all equal (a scalar or a splat)."""
    array = constant(module, value)
    if array is None or array.size == 0 or array.dtype.kind not in "fiu":
        return None
    first = array.reshape(-1)[0]
    if not np.all(array == first):
        return None
    return float(first)


def close(value: float | None, expected: float, rel: float = 1e-6) -> bool:
    return value is not None and math.isclose(value, expected, rel_tol=rel)


def other_operand(op: Operation, value: SSAValue) -> SSAValue | None:
    """The other operand of a binary op one of whose operands is `value`."""
    lhs, rhs = op.operands
    if lhs is value:
        return rhs
    if rhs is value:
        return lhs
    return None


def split_constant(
    module: ModuleOp, op: Operation, expected: float, rel: float = 1e-6
) -> SSAValue | None:
    """For a commutative binary op with one operand the constant `expected`
    (a scalar or splat), the other operand."""
    lhs, rhs = op.operands
    if close(scalar(module, rhs), expected, rel):
        return lhs
    if close(scalar(module, lhs), expected, rel):
        return rhs
    return None


def shape(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, TensorType)
    return tuple(value.type.get_shape())


def attr(op: Operation, name: str, default: Any = None) -> Any:
    """An attribute of `op` as a Python value, or `default` when absent."""
    value = op.attributes.get(name)
    return default if value is None else to_py(value)


def has_fused_relu(op: Operation) -> bool:
    """Whether `op` applies a ReLU to its result (`do_relu`)."""
    return bool(attr(op, "do_relu", False))


def build(
    kind: str,
    operands: Sequence[SSAValue],
    result_type: Attribute,
    attrs: Mapping[str, Any] | None = None,
    names: ArrayAttr | None = None,
) -> Operation:
    """A detached `top.<kind>` with one result; attributes given as Python values."""
    attributes = {k: from_py(v) for k, v in (attrs or {}).items()}
    if names is not None:
        attributes["names"] = names
    return op_class(f"top.{kind}").build(
        operands=list(operands), result_types=[result_type], attributes=attributes
    )


def erase_unused(rewriter: PatternRewriter, ops: Iterable[Operation]) -> None:
    """Erase each TOP op (but `top.input`) whose results nothing uses, then the
    producers that this leaves unused."""
    work = list(ops)
    while work:
        op = work.pop()
        if op.parent is None or not op.name.startswith("top.") or op.name == "top.input":
            continue
        if any(result.first_use is not None for result in op.results):
            continue
        producers = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
        rewriter.erase(op)
        work.extend(producers)


def replace_with(rewriter: PatternRewriter, op: Operation, new_op: Operation) -> None:
    """Replace single-result `op` by `new_op` (inserted before it), then erase the
    producers of `op` that are left unused."""
    producers = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
    rewriter.replace(op, new_op)
    erase_unused(rewriter, producers)


def sync_function_type(main: func.FuncOp) -> None:
    """@main's type takes the types of its arguments and of the values it returns
    (after a pass changed them)."""
    ret = main.body.block.last_op
    assert isinstance(ret, Operation)
    main.function_type = FunctionType.from_lists(
        [a.type for a in main.body.block.args], [v.type for v in ret.operands]
    )
