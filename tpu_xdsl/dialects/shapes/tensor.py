"""Shape rules of shape and data-movement ops (reshape, permute, concat, split, slice,
squeeze/unsqueeze, flatten, pad, tile, expand, upsample, interp, depth2space) and
indexing (gather, gather_elements, scatter_nd)."""

from __future__ import annotations

import math

from tpu_xdsl.dialects.shapes.helpers import (
    _REQUIRED,
    _axes,
    _axis,
    _bool,
    _broadcasts_to,
    _declared,
    _expect,
    _get,
    _int,
    _ints,
    _min_rank,
    _positive,
    _rank,
    _require,
    _str,
    _variadic,
    broadcast,
    fmt,
    fmt_value,
)
from tpu_xdsl.dialects.shapes.registry import (
    Attrs,
    Declared,
    Operands,
    Shape,
    ShapeError,
    shape_rule,
)


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
    inputs = _variadic("inputs", ins[0])
    xs = [_require(f"inputs[{i}]", s) for i, s in enumerate(inputs)]
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


@shape_rule("fold_taps", operands=("input",))
def fold_taps(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """NCHW -> N(kh kw C)(OH)(OW): the windows of kernel_shape taps at strides over the
    input padded by pads [top, left, bottom, right]."""
    n, c, h, w = x = _rank("input", ins[0], 4)
    kernel = _ints(attrs, "kernel_shape", length=2)
    strides = _ints(attrs, "strides", length=2)
    top, left, bottom, right = _ints(attrs, "pads", [0, 0, 0, 0], length=4)
    _positive("kernel_shape", kernel)
    _positive("strides", strides)
    _positive("pads", [top, left, bottom, right], least=0)
    h, w = h + top + bottom, w + left + right
    if kernel[0] > h or kernel[1] > w:
        raise ShapeError(
            f"attribute 'kernel_shape' = {fmt_value(kernel)} exceeds H and W of operand 'input' {fmt(x)} padded"
        )
    return [(n, kernel[0] * kernel[1] * c, (h - kernel[0]) // strides[0] + 1, (w - kernel[1]) // strides[1] + 1)]


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
