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

This module must not import `tpu_xdsl.dialects`: it is imported while the
dialects are being built.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import (
    NoneType,
    TensorType,
)
from xdsl.ir import Attribute, Operation
from xdsl.irdl import OptionalDef, VariadicDef
from xdsl.utils.exceptions import VerifyException

from tpu_xdsl.dialects.attr_values import to_py
from tpu_xdsl.errors import TpuXdslError

Shape = tuple[int, ...]
OperandShape = Shape | None | list[Shape | None]
Operands = Sequence[OperandShape]
Declared = Sequence[Shape | None]


class ShapeError(TpuXdslError):
    """Operand shapes, attributes or result types of an op are inconsistent.

    The message names the culprit ("operand 'rhs' ...", "attribute 'group' ...").
    """


################################################################################
# The registry                                                                  #
################################################################################


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


################################################################################
# Helpers: attribute values, formatting, common checks                          #
################################################################################


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


def _require(name: str, shape: Shape | None) -> Shape:
    if shape is None:
        raise ShapeError(f"operand '{name}' must be a tensor, not none")
    return shape


def _rank(name: str, shape: Shape | None, rank: int) -> Shape:
    shape = _require(name, shape)
    if len(shape) != rank:
        raise ShapeError(f"operand '{name}' {fmt(shape)} must have rank {rank}")
    return shape


def _min_rank(name: str, shape: Shape | None, rank: int) -> Shape:
    shape = _require(name, shape)
    if len(shape) < rank:
        raise ShapeError(f"operand '{name}' {fmt(shape)} must have rank >= {rank}")
    return shape


def _expect(name: str, shape: Shape | None, expected: Shape, why: str) -> None:
    """Check an optional operand's shape equals `expected` (skipped when none)."""
    if shape is not None and tuple(shape) != expected:
        raise ShapeError(
            f"operand '{name}' has shape {fmt(shape)}, expected {fmt(expected)} {why}"
        )


def _numel(name: str, shape: Shape | None, count: int, why: str) -> None:
    """Check an optional operand holds `count` elements (skipped when none)."""
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


def _broadcasts_to(name: str, shape: Shape | None, target: Shape, what: str) -> None:
    """Check an optional operand broadcasts (unidirectionally) to `target`."""
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


################################################################################
# Elementwise                                                                   #
################################################################################

_SAME_SHAPE = (
    "sqrt", "rsqrt", "exp", "log", "abs", "neg", "sigmoid", "hard_swish", "silu",
    "tanh", "erf", "reciprocal", "floor", "ceil", "round", "sin", "cos", "softplus",
    "mish", "sign", "relu", "leaky_relu", "elu", "clip", "hard_sigmoid", "gelu",
    "cast", "requant", "load", "store",
)  # fmt: skip


@shape_rule(*_SAME_SHAPE, operands=("input",))
def same_shape(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Elementwise unary ops, casts, requant, load/store: output shape = input shape."""
    return [_require("input", ins[0])]


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


################################################################################
# Normalization                                                                 #
################################################################################


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


def _channels(x: Shape | None) -> int:
    return _min_rank("input", x, 2)[1]


@shape_rule("instance_norm", operands=("input", "scale", "bias"))
def instance_norm(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Same shape; scale and bias hold one value per channel."""
    c = _channels(ins[0])
    for name, shape in zip(("scale", "bias"), ins[1:]):
        _numel(name, _require(name, shape), c, "(one per channel)")
    return [ins[0]]


@shape_rule("batch_norm", operands=("input", "scale", "bias", "mean", "variance"))
def batch_norm(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Same shape; scale, bias, mean and variance hold one value per channel."""
    c = _channels(ins[0])
    for name, shape in zip(("scale", "bias", "mean", "variance"), ins[1:]):
        _numel(name, _require(name, shape), c, "(one per channel)")
    return [ins[0]]


@shape_rule("scale", operands=("input", "scale", "bias"))
def scale(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Per-channel scale: same shape; scale and bias hold one value per channel."""
    return instance_norm(ins, attrs, outs)


@shape_rule("group_norm", operands=("input", "scale", "bias"))
def group_norm(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Same shape; num_groups divides the channels; scale/bias per channel or group."""
    c = _channels(ins[0])
    groups = _int(attrs, "num_groups")
    if groups < 1 or c % groups:
        raise ShapeError(
            f"attribute 'num_groups' = {groups} does not divide the {c} channels "
            f"of operand 'input' {fmt(ins[0])}"
        )
    for name, shape in zip(("scale", "bias"), ins[1:]):
        if shape is not None and math.prod(shape) not in (c, groups):
            raise ShapeError(
                f"operand '{name}' {fmt(shape)} has {math.prod(shape)} elements, "
                f"expected {c} (one per channel) or {groups} (one per group)"
            )
    return [ins[0]]


################################################################################
# Convolution and pooling                                                       #
################################################################################


@dataclass(frozen=True)
class _Window:
    """Sliding-window attributes for `n` spatial dims (ONNX defaults applied)."""

    kernel: list[int]
    strides: list[int]
    pads: list[int]  # begins then ends
    dilations: list[int]

    @staticmethod
    def read(attrs: Attrs, kernel: list[int]) -> _Window:
        n = len(kernel)
        strides = _ints(attrs, "strides", [1] * n, n)
        pads = _ints(attrs, "pads", [0] * 2 * n, 2 * n)
        dilations = _ints(attrs, "dilations", [1] * n, n)
        _positive("kernel_shape", kernel)
        _positive("strides", strides)
        _positive("pads", pads, 0)
        _positive("dilations", dilations)
        return _Window(kernel, strides, pads, dilations)

    def padded(self, i: int, size: int) -> int:
        return size + self.pads[i] + self.pads[i + len(self.kernel)]

    def extent(self, i: int) -> int:
        """The dilated kernel size along spatial dim `i`."""
        return self.dilations[i] * (self.kernel[i] - 1) + 1

    def out_size(self, i: int, size: int, ceil_mode: bool = False) -> int:
        """ONNX Conv/Pool output size; with ceil_mode, PyTorch's rule that the
        last window must start inside the input or the begin padding."""
        span = self.padded(i, size) - self.extent(i)
        if span < 0:
            raise ShapeError(
                f"attribute 'kernel_shape' = {fmt_value(self.kernel)}: the kernel "
                f"spans {self.extent(i)} along spatial dim {i}, more than the padded "
                f"input {self.padded(i, size)}"
            )
        s = self.strides[i]
        if not ceil_mode:
            return span // s + 1
        out = -(-span // s) + 1
        return out - 1 if (out - 1) * s >= size + self.pads[i] else out


def _kernel(attrs: Attrs, x: Shape | None, w: Shape | None) -> list[int]:
    """kernel_shape (from the filter when absent), ranks of input and filter checked."""
    default = list(w[2:]) if w is not None else _REQUIRED
    kernel = _ints(attrs, "kernel_shape", default)
    _rank("input", x, 2 + len(kernel))
    if w is not None:
        _rank("filter", w, 2 + len(kernel))
        if list(w[2:]) != kernel:
            raise ShapeError(
                f"attribute 'kernel_shape' = {fmt_value(kernel)} differs from the "
                f"spatial dims of operand 'filter' {fmt(w)}"
            )
    return kernel


def _group(attrs: Attrs) -> int:
    group = _int(attrs, "group", 1)
    _positive("group", [group])
    return group


@shape_rule("conv", operands=("input", "filter", "bias"))
def conv(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """ONNX Conv: input NxCxD..., filter Mx(C/group)xK...; output NxMxO...,
    O = floor((D + pad_begin + pad_end - dilation*(K-1) - 1) / stride) + 1."""
    x, w, bias = ins
    w = _require("filter", w)
    win = _Window.read(attrs, _kernel(attrs, x, w))
    group = _group(attrs)
    if x[1] != w[1] * group:
        raise ShapeError(
            f"attribute 'group' = {group}: operand 'input' {fmt(x)} has {x[1]} "
            f"channels, expected {w[1] * group} (filter channels {w[1]} of operand "
            f"'filter' {fmt(w)} * group {group})"
        )
    if w[0] % group:
        raise ShapeError(
            f"attribute 'group' = {group} does not divide the {w[0]} output channels "
            f"of operand 'filter' {fmt(w)}"
        )
    _numel("bias", bias, w[0], "(one per output channel)")
    spatial = [win.out_size(i, d) for i, d in enumerate(x[2:])]
    return [(x[0], w[0], *spatial)]


@shape_rule("deconv", operands=("input", "filter", "bias"))
def deconv(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """ONNX ConvTranspose: input NxCxD..., filter Cx(M/group)xK...; output
    NxMxO..., O = stride*(D-1) + output_padding + dilation*(K-1) + 1 - pads."""
    x, w, bias = ins
    w = _require("filter", w)
    win = _Window.read(attrs, _kernel(attrs, x, w))
    group = _group(attrs)
    n = len(win.kernel)
    out_pad = _ints(attrs, "output_padding", [0] * n, n)
    _positive("output_padding", out_pad, 0)
    if x[1] != w[0]:
        raise ShapeError(
            f"operand 'filter' {fmt(w)} has {w[0]} input channels, expected {x[1]}, "
            f"the channels of operand 'input' {fmt(x)}"
        )
    if x[1] % group:
        raise ShapeError(
            f"attribute 'group' = {group} does not divide the {x[1]} channels of "
            f"operand 'input' {fmt(x)}"
        )
    _numel("bias", bias, w[1] * group, "(one per output channel)")
    spatial = []
    for i, d in enumerate(x[2:]):
        size = win.strides[i] * (d - 1) + out_pad[i] + win.extent(i) - win.padded(i, 0)
        if size < 1:
            raise ShapeError(
                f"attribute 'pads' = {fmt_value(win.pads)} leaves no output along "
                f"spatial dim {i} (size {size})"
            )
        spatial.append(size)
    return [(x[0], w[1] * group, *spatial)]


@shape_rule("max_pool", "avg_pool", operands=("input",))
def pool(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """ONNX MaxPool/AveragePool: output size as conv, ceil instead of floor
    with ceil_mode."""
    x = ins[0]
    win = _Window.read(attrs, _kernel(attrs, x, None))
    ceil_mode = _bool(attrs, "ceil_mode")
    spatial = [win.out_size(i, d, ceil_mode) for i, d in enumerate(x[2:])]
    return [(x[0], x[1], *spatial)]


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
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
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


################################################################################
# Data movement                                                                 #
################################################################################


@shape_rule("reshape", operands=("input",))
def reshape(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """The result type is the shape; it keeps the element count. Without a result
    type, the ONNX `shape` attribute (0 copies a dim, -1 is inferred) gives it."""
    x = _require("input", ins[0])
    out = _declared(outs)
    if out is None:
        out = _onnx_reshape(x, _ints(attrs, "shape"))
    if math.prod(out) != math.prod(x):
        raise ShapeError(
            f"result 'output' has shape {fmt(out)} with {math.prod(out)} elements, "
            f"expected {math.prod(x)} like operand 'input' {fmt(x)}"
        )
    return [out]


def _onnx_reshape(x: Shape, shape: list[int]) -> Shape:
    out = [x[i] if d == 0 and i < len(x) else d for i, d in enumerate(shape)]
    if out.count(-1) > 1 or any(d < -1 for d in out):
        raise ShapeError(f"attribute 'shape' = {fmt_value(shape)} is not a valid shape")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if known == 0 or math.prod(x) % known:
            raise ShapeError(
                f"attribute 'shape' = {fmt_value(shape)} does not fit operand "
                f"'input' {fmt(x)}"
            )
        out[out.index(-1)] = math.prod(x) // known
    return tuple(out)


@shape_rule("permute", operands=("input",))
def permute(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """output[i] = input[order[i]]."""
    x = _require("input", ins[0])
    order = _ints(attrs, "order")
    if sorted(order) != list(range(len(x))):
        raise ShapeError(
            f"attribute 'order' = {fmt_value(order)} is not a permutation of the "
            f"{len(x)} dims of operand 'input' {fmt(x)}"
        )
    return [tuple(x[i] for i in order)]


@shape_rule("concat", operands=("inputs",))
def concat(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Sizes along `axis` add up; all other dims are equal."""
    xs = [_require(f"inputs[{i}]", s) for i, s in enumerate(ins[0])]
    if not xs:
        raise ShapeError("operand 'inputs' must hold at least one tensor")
    first = xs[0]
    axis = _axis(_int(attrs, "axis"), len(first), what=f" of 'inputs[0]' {fmt(first)}")
    for i, x in enumerate(xs[1:], 1):
        if len(x) != len(first):
            raise ShapeError(
                f"operand 'inputs[{i}]' {fmt(x)} has rank {len(x)}, expected "
                f"{len(first)} like 'inputs[0]' {fmt(first)}"
            )
        for d, (a, b) in enumerate(zip(first, x)):
            if d != axis and a != b:
                raise ShapeError(
                    f"operand 'inputs[{i}]' {fmt(x)} differs from 'inputs[0]' "
                    f"{fmt(first)} in dim {d} ({b} vs {a}), but attribute 'axis' = "
                    f"{axis} is the only dim that may differ"
                )
    size = sum(x[axis] for x in xs)
    return [(*first[:axis], size, *first[axis + 1 :])]


@shape_rule("split", operands=("input",))
def split(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """One output per `split` entry; the entries add up to the axis size. Without
    `split`, equal parts, one per declared result (or `num_outputs`)."""
    x = _require("input", ins[0])
    axis = _axis(_int(attrs, "axis", 0), len(x))
    if "split" in attrs or not (outs or "num_outputs" in attrs):
        sizes = _ints(attrs, "split")
    else:
        sizes = _equal_split(x[axis], _int(attrs, "num_outputs", len(outs)))
    _positive("split", sizes, 0)
    if sum(sizes) != x[axis]:
        raise ShapeError(
            f"attribute 'split' = {fmt_value(sizes)} adds up to {sum(sizes)}, expected "
            f"{x[axis]}, dim {axis} of operand 'input' {fmt(x)}"
        )
    return [(*x[:axis], s, *x[axis + 1 :]) for s in sizes]


def _equal_split(size: int, parts: int) -> list[int]:
    """ONNX Split with num_outputs: ceil(size/parts) each, the last smaller."""
    if parts < 1:
        raise ShapeError(f"attribute 'num_outputs' = {parts} must be >= 1")
    chunk = -(-size // parts)
    return [max(0, min(chunk, size - i * chunk)) for i in range(parts)]


def _slice_len(dim: int, start: int, end: int, step: int) -> int:
    """ONNX Slice along one dim: negative indices wrap, then clamp, then count."""
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
    else:
        start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return max(0, -((start - end) // step))


@shape_rule("slice", operands=("input",))
def slice_(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """ONNX Slice: starts/ends/axes/steps, one entry per sliced axis."""
    x = _require("input", ins[0])
    starts = _ints(attrs, "starts")
    n = len(starts)
    ends = _ints(attrs, "ends", _REQUIRED, n)
    axes = _axes(_ints(attrs, "axes", list(range(n)), n), len(x), "axes")
    steps = _ints(attrs, "steps", [1] * n, n)
    if 0 in steps:
        raise ShapeError(f"attribute 'steps' = {fmt_value(steps)} must not hold 0")
    out = list(x)
    for axis, start, end, step in zip(axes, starts, ends, steps):
        out[axis] = _slice_len(x[axis], start, end, step)
    return [tuple(out)]


@shape_rule("squeeze", operands=("input",))
def squeeze(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Removes the listed size-1 dims (all size-1 dims when `axes` is empty)."""
    x = _require("input", ins[0])
    axes = _axes(_ints(attrs, "axes", []), len(x), "axes")
    for a in axes:
        if x[a] != 1:
            raise ShapeError(
                f"attribute 'axes' names dim {a} of operand 'input' {fmt(x)}, which "
                f"has size {x[a]}, not 1"
            )
    drop = set(axes) if axes else {i for i, d in enumerate(x) if d == 1}
    return [tuple(d for i, d in enumerate(x) if i not in drop)]


@shape_rule("unsqueeze", operands=("input",))
def unsqueeze(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Inserts size-1 dims at `axes` (counted in the output's rank)."""
    x = _require("input", ins[0])
    axes_attr = _ints(attrs, "axes")
    rank = len(x) + len(axes_attr)
    axes = set(_axes(axes_attr, rank, "axes", " of the output"))
    rest = iter(x)
    return [tuple(1 if i in axes else next(rest) for i in range(rank))]


@shape_rule("flatten", operands=("input",))
def flatten(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """2-d: (prod(dims before axis), prod(dims from axis)); axis in [-r, r]."""
    x = _require("input", ins[0])
    axis = _int(attrs, "axis", 1)
    if not -len(x) <= axis <= len(x):
        raise ShapeError(f"attribute 'axis' = {axis} is out of range for rank {len(x)}")
    axis = axis + len(x) if axis < 0 else axis
    return [(math.prod(x[:axis]), math.prod(x[axis:]))]


@shape_rule("pad", operands=("input",))
def pad(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Each dim grows by its begin and end pads (negative pads crop)."""
    x = _require("input", ins[0])
    pads = _ints(attrs, "pads", _REQUIRED, 2 * len(x))
    _str(attrs, "mode", "constant", ("constant", "reflect", "edge", "wrap"))
    out = tuple(d + pads[i] + pads[i + len(x)] for i, d in enumerate(x))
    if min(out, default=0) < 0:
        raise ShapeError(
            f"attribute 'pads' = {fmt_value(pads)} crops operand 'input' {fmt(x)} "
            "below size 0"
        )
    return [out]


@shape_rule("tile", operands=("input",))
def tile(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Each dim times its repeat count."""
    x = _require("input", ins[0])
    repeats = _ints(attrs, "repeats", _REQUIRED, len(x))
    _positive("repeats", repeats, 0)
    return [tuple(d * r for d, r in zip(x, repeats))]


@shape_rule("expand", operands=("input",))
def expand(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """The result type is the target; the input must broadcast to it. Without a
    result type, ONNX Expand with a `shape` attribute (bidirectional)."""
    x = _require("input", ins[0])
    out = _declared(outs)
    if out is None:
        return [broadcast(("input", x), ("shape", tuple(_ints(attrs, "shape"))))]
    _broadcasts_to("input", x, out, "result 'output'")
    return [out]


@shape_rule("upsample", operands=("input",))
def upsample(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Nearest upsampling of NCHW: H * scale_h, W * scale_w."""
    n, c, h, w = _rank("input", ins[0], 4)
    sh, sw = _int(attrs, "scale_h"), _int(attrs, "scale_w")
    _positive("scale_h", [sh])
    _positive("scale_w", [sw])
    return [(n, c, h * sh, w * sw)]


@shape_rule("interp", operands=("input",))
def interp(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """The result type gives the size: same rank, N and C unchanged. Without a
    result type, ONNX Resize with `scales`: floor(dim * scale)."""
    x = _min_rank("input", ins[0], 2)
    out = _declared(outs)
    if out is None:
        scales = _get(attrs, "scales", _REQUIRED)
        if len(scales) != len(x):
            raise ShapeError(
                f"attribute 'scales' = {fmt_value(scales)} must have {len(x)} entries"
            )
        return [tuple(math.floor(d * s) for d, s in zip(x, scales))]
    if len(out) != len(x) or out[:2] != x[:2]:
        raise ShapeError(
            f"result 'output' has shape {fmt(out)}, expected rank {len(x)} with "
            f"N and C {fmt(x[:2])} of operand 'input' {fmt(x)}"
        )
    return [out]


@shape_rule("grid_sample", operands=("input", "grid"))
def grid_sample(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """input [N, C, *spatial] read at grid [N, *out, len(spatial)]: [N, C, *out]."""
    x = _min_rank("input", ins[0], 3)
    g = _min_rank("grid", ins[1], 3)
    _str(attrs, "mode", "linear", ("linear", "nearest", "cubic"))
    _str(attrs, "padding_mode", "zeros", ("zeros", "border", "reflection"))
    if len(g) != len(x) or g[0] != x[0] or g[-1] != len(x) - 2:
        raise ShapeError(
            f"operand 'grid' {fmt(g)} must be [N, *output, {len(x) - 2}] for operand "
            f"'input' {fmt(x)}"
        )
    return [(x[0], x[1], *g[1:-1])]


@shape_rule("depth2space", operands=("input",))
def depth2space(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """NCHW -> N(C/b^2)(Hb)(Wb); with inverse (SpaceToDepth) N(Cb^2)(H/b)(W/b)."""
    n, c, h, w = x = _rank("input", ins[0], 4)
    b = _int(attrs, "block_size")
    _positive("block_size", [b])
    _str(attrs, "mode", "DCR", ("DCR", "CRD"))
    if _bool(attrs, "inverse"):
        if h % b or w % b:
            raise ShapeError(
                f"attribute 'block_size' = {b} does not divide H and W of operand "
                f"'input' {fmt(x)}"
            )
        return [(n, c * b * b, h // b, w // b)]
    if c % (b * b):
        raise ShapeError(
            f"attribute 'block_size' = {b}: block_size^2 does not divide the {c} "
            f"channels of operand 'input' {fmt(x)}"
        )
    return [(n, c // (b * b), h * b, w * b)]


################################################################################
# Indexing                                                                      #
################################################################################


@shape_rule("gather", operands=("input", "indices"))
def gather(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """input.shape[:axis] + indices.shape + input.shape[axis+1:]."""
    x = _min_rank("input", ins[0], 1)
    idx = _require("indices", ins[1])
    axis = _axis(_int(attrs, "axis", 0), len(x))
    return [(*x[:axis], *idx, *x[axis + 1 :])]


@shape_rule("gather_elements", operands=("input", "indices"))
def gather_elements(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """The shape of indices, which has the input's rank."""
    x = _min_rank("input", ins[0], 1)
    idx = _rank("indices", ins[1], len(x))
    _axis(_int(attrs, "axis", 0), len(x))
    return [idx]


@shape_rule("scatter_nd", operands=("input", "indices", "updates"))
def scatter_nd(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """Input's shape; updates = indices.shape[:-1] + input.shape[indices.shape[-1]:]."""
    x = _require("input", ins[0])
    idx = _min_rank("indices", ins[1], 1)
    if idx[-1] > len(x):
        raise ShapeError(
            f"operand 'indices' {fmt(idx)} indexes {idx[-1]} dims of operand 'input' "
            f"{fmt(x)}, which has rank {len(x)}"
        )
    _str(attrs, "reduction", "none", ("none", "add", "mul", "max", "min"))
    expected = (*idx[:-1], *x[idx[-1] :])
    why = "(indices.shape[:-1] + input.shape[indices.shape[-1]:])"
    _expect("updates", _require("updates", ins[2]), expected, why)
    return [x]


################################################################################
# Reductions                                                                    #
################################################################################


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


################################################################################
# Recurrent                                                                     #
################################################################################


def _rnn(ins: Operands, attrs: Attrs, gates: int) -> tuple[Shape, Shape]:
    """Check an ONNX LSTM/GRU's operands; return the shapes of Y and of a state."""
    x, w, r, b, h0 = ins[:5]
    layout = _int(attrs, "layout", 0)
    if layout not in (0, 1):
        raise ShapeError(f"attribute 'layout' = {layout} must be 0 or 1")
    directions = ("forward", "reverse", "bidirectional")
    direction = _str(attrs, "direction", "forward", directions)
    nd = 2 if direction == "bidirectional" else 1
    x = _rank("input", x, 3)
    seq, batch, size = (x[1], x[0], x[2]) if layout else x
    r = _rank("r", r, 3)
    hidden = _int(attrs, "hidden_size", r[2])
    why = f"for direction {fmt_value(direction)} and hidden_size {hidden}"
    _expect("w", _require("w", w), (nd, gates * hidden, size), why)
    _expect("r", r, (nd, gates * hidden, hidden), why)
    _expect("b", b, (nd, 2 * gates * hidden), why)
    state = (batch, nd, hidden) if layout else (nd, batch, hidden)
    _expect("initial_h", h0, state, why)
    y = (batch, seq, nd, hidden) if layout else (seq, nd, batch, hidden)
    return y, state


@shape_rule("lstm", operands=("input", "w", "r", "b", "initial_h", "initial_c"))
def lstm(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """ONNX LSTM: y [seq, dirs, batch, hidden] (layout 1: [batch, seq, dirs,
    hidden]); y_h, y_c [dirs, batch, hidden] (layout 1: [batch, dirs, hidden])."""
    y, state = _rnn(ins, attrs, 4)
    _expect("initial_c", ins[5], state, "(the shape of a state)")
    return [y, state, state]


@shape_rule("gru", operands=("input", "w", "r", "b", "initial_h"))
def gru(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """ONNX GRU: y and y_h as for LSTM, three gates instead of four."""
    y, state = _rnn(ins, attrs, 3)
    return [y, state]


################################################################################
# Entry points                                                                  #
################################################################################


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


def _operand_shapes(op: Operation, names: Sequence[str]) -> list[OperandShape]:
    """The shapes of the operands `names` of `op`, looked up on its IRDL definition."""
    fields = {n.rstrip("_"): (n, d) for n, d in type(op).get_irdl_definition().operands}
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
    for field, definition in type(op).get_irdl_definition().results:
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
