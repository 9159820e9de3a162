"""Shape relations IRDL cannot express: one shape rule per op kind.

A *shape rule* is a pure function registered for one or more op kinds (the op
name without its dialect, e.g. ``"conv"``) with `shape_rule`, as JAX registers
lowering rules::

    @shape_rule("max_pool", "avg_pool", operands=("input",))
    def pool(ins, attrs, outs): ...

It gets

- ``ins``: the operand shapes in the order of ``operands``: a tuple of ints, or
  ``None`` for a ``none`` operand (from ``top.none``), or a list of those for a
  variadic operand;
- ``attrs``: the op's attributes as plain Python values (`to_python`); ONNX
  defaults apply to absent ones;
- ``outs``: the declared result shapes (``None`` where a result is ``none`` or
  unknown; empty when the caller knows no result types), for the ops whose
  result shape is only in the result type (reshape, expand, interp);

and returns the result shapes, one per result (variadic results flattened),
``None`` where it cannot tell. An inconsistency raises `ShapeError` whose
message names the operand, attribute or result at fault.

Two users: the ONNX importer calls `infer_shapes`; the generated op classes
call `verify_shapes` (through `VERIFY_HOOKS`, one entry per "top.X"/"tpu.X")
after the IRDL constraints hold. Semantics are ONNX's (see docs/ops.md).

The package: `registry` (the decorator, `RULES`, `ShapeError`), `helpers` (attribute
readers and common checks the rules share), one module per op family as in
`tpu_xdsl/frontend/rules/` and `tpu_xdsl/kernels/` (elementwise, nn, conv_pool, tensor,
sampling, recurrent), and `entry_points` (`infer_shapes`, `verify_shapes`). Importing the
package imports every family, so `RULES` and `VERIFY_HOOKS` are complete.

This package must not import `tpu_xdsl.dialects`' TOP/TPU dialects: it is imported
while they are being built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from xdsl.ir import Operation

from tpu_xdsl.dialects.shapes import (  # noqa: F401  (each registers its rules)
    conv_pool,
    elementwise,
    nn,
    recurrent,
    sampling,
    tensor,
)
from tpu_xdsl.dialects.shapes.entry_points import infer_shapes, verify_shapes
from tpu_xdsl.dialects.shapes.helpers import broadcast, to_python
from tpu_xdsl.dialects.shapes.registry import (
    RULES,
    Attrs,
    ShapeError,
    ShapeRule,
    shape_rule,
)

VERIFY_HOOKS: Mapping[str, Callable[[Operation], None]] = {
    f"{dialect}.{kind}": verify_shapes for kind in RULES for dialect in ("top", "tpu")
}
"""The `verify` hook of every TOP/TPU op name that has a shape rule."""

__all__ = [
    "RULES",
    "VERIFY_HOOKS",
    "Attrs",
    "ShapeError",
    "ShapeRule",
    "broadcast",
    "infer_shapes",
    "shape_rule",
    "to_python",
    "verify_shapes",
]
