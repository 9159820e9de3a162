"""Shape rules of matmul, softmax, normalizations, reductions, arg and topk."""

from __future__ import annotations

import math

from tpu_xdsl.dialects.shapes.helpers import (
    _axes,
    _axis,
    _bool,
    _broadcasts_to,
    _int,
    _ints,
    _min_rank,
    _numel,
    _optional,
    _positive,
    _require,
    broadcast,
    fmt,
)
from tpu_xdsl.dialects.shapes.registry import (
    Attrs,
    Declared,
    Operands,
    OperandShape,
    Shape,
    ShapeError,
    shape_rule,
)


@shape_rule("softmax", "log_softmax", operands=("input",))
def softmax(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Same shape; `axis` (-1) must name a dimension."""
    x = _require("input", ins[0])
    _axis(_int(attrs, "axis", -1), len(x))
    return [x]


@shape_rule("lrn", operands=("input",))
def lrn(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Same shape; `size` >= 1 and the input has a channel dimension."""
    x = _min_rank("input", ins[0], 2)
    _positive("size", [_int(attrs, "size")])
    return [x]


@shape_rule("layer_norm", operands=("input", "scale", "bias"))
def layer_norm(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Same shape; scale and bias broadcast to input.shape[axis:]."""
    x, scale, bias = ins
    x = _require("input", x)
    axis = _axis(_int(attrs, "axis", -1), len(x))
    normalized = x[axis:]
    _broadcasts_to("scale", scale, normalized, "the normalized shape")
    _broadcasts_to("bias", bias, normalized, "the normalized shape")
    return [x]


def _channels(x: OperandShape) -> tuple[Shape, int]:
    """The input (rank >= 2 checked) and its channel count."""
    x = _min_rank("input", x, 2)
    return x, x[1]


@shape_rule("instance_norm", operands=("input", "scale", "bias"))
def instance_norm(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Same shape; scale and bias hold one value per channel."""
    x, c = _channels(ins[0])
    for name, shape in zip(("scale", "bias"), ins[1:]):
        _numel(name, _require(name, shape), c, "(one per channel)")
    return [x]


@shape_rule("batch_norm", operands=("input", "scale", "bias", "mean", "variance"))
def batch_norm(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Same shape; scale, bias, mean and variance hold one value per channel."""
    x, c = _channels(ins[0])
    for name, shape in zip(("scale", "bias", "mean", "variance"), ins[1:]):
        _numel(name, _require(name, shape), c, "(one per channel)")
    return [x]


@shape_rule("scale", operands=("input", "scale", "bias"))
def scale(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Per-channel scale: same shape; scale and bias hold one value per channel."""
    return instance_norm(ins, attrs, outs)


@shape_rule("group_norm", operands=("input", "scale", "bias"))
def group_norm(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Same shape; num_groups divides the channels; scale/bias per channel or group."""
    x, c = _channels(ins[0])
    groups = _int(attrs, "num_groups")
    if groups < 1 or c % groups:
        raise ShapeError(
            f"attribute 'num_groups' = {groups} does not divide the {c} channels "
            f"of operand 'input' {fmt(x)}"
        )
    for name, operand in zip(("scale", "bias"), ins[1:]):
        shape = _optional(name, operand)
        if shape is not None and math.prod(shape) not in (c, groups):
            raise ShapeError(
                f"operand '{name}' {fmt(shape)} has {math.prod(shape)} elements, "
                f"expected {c} (one per channel) or {groups} (one per group)"
            )
    return [x]


def _matrix(shape: Shape, front: bool) -> Shape:
    """numpy matmul's promotion of a vector to a matrix: a 1 put in front (the left
    operand) or at the back (the right one); other shapes unchanged."""
    if len(shape) != 1:
        return shape
    return (1, *shape) if front else (*shape, 1)


@shape_rule("matmul", operands=("input", "right", "bias"))
def matmul(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """numpy matmul after the optional transposes of the last two dims; the
    batch dims broadcast; bias broadcasts to the output."""
    a = _min_rank("input", ins[0], 1)
    b = _min_rank("right", ins[1], 1)
    if _bool(attrs, "left_transpose") and len(a) >= 2:
        a = (*a[:-2], a[-1], a[-2])
    if _bool(attrs, "right_transpose") and len(b) >= 2:
        b = (*b[:-2], b[-1], b[-2])
    a2, b2 = _matrix(a, front=True), _matrix(b, front=False)
    if a2[-1] != b2[-2]:
        raise ShapeError(
            f"operands 'input' {fmt(ins[0])} and 'right' {fmt(ins[1])} do not "
            f"multiply: contracted dims {a2[-1]} vs {b2[-2]} (after transposes)"
        )
    batch = broadcast(("input", a2[:-2]), ("right", b2[:-2]))
    rows = a2[-2:-1] if len(a) > 1 else ()
    cols = b2[-1:] if len(b) > 1 else ()
    out = batch + rows + cols
    _broadcasts_to("bias", ins[2], out, "the output")
    return [out]


def _reduced(x: Shape, axes: set[int], keepdims: bool) -> Shape:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(x))
    return tuple(d for i, d in enumerate(x) if i not in axes)


@shape_rule("reduce", operands=("input",))
def reduce(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Reduced `axes` (all when empty) become 1, or vanish without keepdims."""
    x = _require("input", ins[0])
    axes = set(_axes(_ints(attrs, "axes", []), len(x), "axes")) or set(range(len(x)))
    return [_reduced(x, axes, _bool(attrs, "keepdims", True))]


@shape_rule("arg", operands=("input",))
def arg(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """ArgMax/ArgMin: `axis` becomes 1, or vanishes without keepdims."""
    x = _min_rank("input", ins[0], 1)
    axis = _axis(_int(attrs, "axis", 0), len(x))
    return [_reduced(x, {axis}, _bool(attrs, "keepdims", True))]


@shape_rule("topk", operands=("input",))
def topk(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """values and indices: the input with dim `axis` = k (k <= that dim)."""
    x = _min_rank("input", ins[0], 1)
    axis = _axis(_int(attrs, "axis", -1), len(x))
    k = _int(attrs, "k")
    if not 0 <= k <= x[axis]:
        raise ShapeError(
            f"attribute 'k' = {k} exceeds dim {axis} of operand 'input' {fmt(x)}"
            if k > 0
            else f"attribute 'k' = {k} must be >= 0"
        )
    out = (*x[:axis], k, *x[axis + 1 :])
    return [out, out]
