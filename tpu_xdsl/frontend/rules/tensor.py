"""Import rules for shape and data-movement ops, casts and indexing.

TOP's data-movement ops (reshape, permute, concat, slice, gather, pad, ...)
take any element type: integer and bool tensors keep their dtype, exactly,
and float tensors are f32 as everywhere in TOP (`_data`, `_moved`). The f32-only
top.interp casts an integer input and casts the result back.
Shape-like inputs (Reshape's shape, Slice's starts, Pad's pads, Resize's
scales, ...) must be constants: the importer folds shape subgraphs, so a
run-time one is a model this compiler cannot give static shapes.
Every rule normalizes attributes to TOP's form: non-negative axes, explicit
lists, clamped slice bounds, and passes the result shape explicitly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from xdsl.ir import SSAValue

from tpu_xdsl.frontend.onnx_importer import F32, NodeContext
from tpu_xdsl.frontend.registry import onnx_rule
from tpu_xdsl.frontend.rules.elementwise import (
    cast_output,
    constant,
    is_integral,
    shape_of,
)

# -- helpers ---------------------------------------------------------------------------


def _ints(values: object) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]


def _axis(ctx: NodeContext, axis: int, rank: int, what: str = "axis") -> int:
    """`axis` in [-rank, rank) made non-negative."""
    if not -rank <= axis < rank:
        raise ctx.error(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def _axes(
    ctx: NodeContext, axes: Sequence[int], rank: int, what: str = "axes"
) -> list[int]:
    """Distinct axes made non-negative."""
    out = [_axis(ctx, int(a), rank, what) for a in axes]
    if len(set(out)) != len(out):
        raise ctx.error(f"{what} {list(axes)} repeat an axis")
    return out


def _data_dtype(ctx: NodeContext, i: int = 0) -> np.dtype:
    dtype = ctx.dtype(i)
    if dtype.kind in "OSU":
        raise ctx.error("string tensors are not supported")
    return dtype


# TOP ops whose data operands and result share any element type (the rest are f32).
_ANY_DTYPE = {
    "reshape", "permute", "concat", "split", "slice", "squeeze", "unsqueeze", "flatten", "pad",
    "upsample", "gather", "gather_elements", "scatter_nd", "tile", "expand", "where", "depth2space",
}  # fmt: skip


def _top_dtype(dtype: np.dtype) -> np.dtype:
    """How TOP holds an ONNX dtype: integers and bool as they are, floats as f32."""
    return dtype if is_integral(dtype) else F32


def _data(ctx: NodeContext, i: int = 0) -> SSAValue:
    """Input i for a data-movement op, in its TOP dtype."""
    return ctx.input(i, dtype=_top_dtype(_data_dtype(ctx, i)))


def _moved(
    ctx: NodeContext,
    kind: str,
    operands: Sequence[SSAValue | Sequence[SSAValue]],
    attrs: dict | None = None,
    shape: Sequence[int] | None = None,
    dtype: np.dtype | None = None,
) -> SSAValue:
    """Emit `top.<kind>` as the node's output 0 in the TOP dtype of `dtype`
    (input 0's by default); an f32-only op's result is cast back to an integer
    or bool dtype."""
    target = _top_dtype(_data_dtype(ctx) if dtype is None else dtype)
    shapes_ = None if shape is None else [[int(d) for d in shape]]
    if kind in _ANY_DTYPE or target == F32:
        return ctx.output(kind, operands, attrs, shapes_=shapes_, dtypes=[target])[0]
    (value,) = ctx.emit(kind, operands, attrs, shapes_=shapes_)
    return cast_output(ctx, value, target)


def _const_input(ctx: NodeContext, i: int, what: str) -> np.ndarray | None:
    """Optional constant input i: None when absent or empty, an error when computed at run time."""
    if not ctx.has_input(i):
        return None
    value = ctx.require_const(i, what)
    return None if value.size == 0 and value.ndim == 1 else value


# -- shapes --------------------------------------------------------------------------------


@onnx_rule("Shape")
def shape(ctx: NodeContext) -> None:
    dims = np.array(ctx.shape(0), dtype=np.int64)
    start, end = ctx.attr("start", 0), ctx.attr("end", None)
    ctx.set_const(0, dims[start:end])


@onnx_rule("Size")
def size(ctx: NodeContext) -> None:
    ctx.set_const(0, np.array(int(np.prod(ctx.shape(0))), dtype=np.int64))


def _reshape(ctx: NodeContext, target: Sequence[int], allowzero: int) -> None:
    """0 copies the input dim (unless allowzero), -1 takes what is left."""
    source = ctx.shape(0)
    if not allowzero and any(d == 0 and i >= len(source) for i, d in enumerate(target)):
        raise ctx.error(
            f"shape {list(target)} copies a dim (0) beyond the input's rank {len(source)}"
        )
    resolved = [
        source[i] if d == 0 and not allowzero else int(d) for i, d in enumerate(target)
    ]
    if resolved.count(-1) > 1 or any(d < -1 for d in resolved):
        raise ctx.error(f"shape {list(target)} is not a valid target shape")
    total = math.prod(source)
    if -1 in resolved:
        known = math.prod(d for d in resolved if d != -1)
        if known == 0 or total % known:
            raise ctx.error(
                f"shape {list(target)} does not fit the input {list(source)}"
            )
        resolved[resolved.index(-1)] = total // known
    if math.prod(resolved) != total:
        raise ctx.error(f"shape {list(target)} does not fit the input {list(source)}")
    _moved(ctx, "reshape", [_data(ctx)], {"shape": resolved}, resolved)


@onnx_rule("Reshape", until=4)
def reshape_attr(ctx: NodeContext) -> None:
    """Before opset 5 the target shape is an attribute."""
    if not ctx.has_attr("shape"):
        raise ctx.error("the 'shape' attribute is required")
    _reshape(ctx, _ints(ctx.attr("shape")), 0)


@onnx_rule("Reshape", since=5)
def reshape(ctx: NodeContext) -> None:
    _reshape(
        ctx, _ints(ctx.require_const(1, "the target shape")), ctx.attr("allowzero", 0)
    )


@onnx_rule("Flatten")
def flatten(ctx: NodeContext) -> None:
    """2-D: the dims before `axis` and the dims from `axis` on (axis in [-r, r])."""
    source = ctx.shape(0)
    axis = ctx.attr("axis", 1)
    if not -len(source) <= axis <= len(source):
        raise ctx.error(f"axis {axis} is out of range for rank {len(source)}")
    axis = axis + len(source) if axis < 0 else axis
    target = [math.prod(source[:axis]), math.prod(source[axis:])]
    _moved(ctx, "reshape", [_data(ctx)], {"shape": target}, target)


def _squeeze(ctx: NodeContext, axes: Sequence[int] | None) -> None:
    """No axes: every size-1 dim."""
    source = ctx.shape(0)
    if axes is None:
        axes = [i for i, d in enumerate(source) if d == 1]
    axes = sorted(_axes(ctx, axes, len(source)))
    for a in axes:
        if source[a] != 1:
            raise ctx.error(
                f"cannot squeeze dim {a} of size {source[a]} (input shape {list(source)})"
            )
    target = [d for i, d in enumerate(source) if i not in axes]
    _moved(ctx, "squeeze", [_data(ctx)], {"axes": axes}, target)


@onnx_rule("Squeeze", until=12)
def squeeze_attr(ctx: NodeContext) -> None:
    axes = ctx.attr("axes")
    _squeeze(ctx, None if axes is None else _ints(axes))


@onnx_rule("Squeeze", since=13)
def squeeze(ctx: NodeContext) -> None:
    axes = _const_input(ctx, 1, "axes")
    _squeeze(ctx, None if axes is None else _ints(axes))


def _unsqueeze(ctx: NodeContext, axes: Sequence[int]) -> None:
    """Axes count in the output's rank."""
    source = ctx.shape(0)
    rank = len(source) + len(axes)
    axes = sorted(_axes(ctx, axes, rank))
    rest = iter(source)
    target = [1 if i in axes else next(rest) for i in range(rank)]
    _moved(ctx, "unsqueeze", [_data(ctx)], {"axes": axes}, target)


@onnx_rule("Unsqueeze", until=12)
def unsqueeze_attr(ctx: NodeContext) -> None:
    if not ctx.has_attr("axes"):
        raise ctx.error("the 'axes' attribute is required")
    _unsqueeze(ctx, _ints(ctx.attr("axes")))


@onnx_rule("Unsqueeze", since=13)
def unsqueeze(ctx: NodeContext) -> None:
    _unsqueeze(ctx, _ints(ctx.require_const(1, "axes")))


@onnx_rule("Transpose")
def transpose(ctx: NodeContext) -> None:
    """top.permute; the default order reverses the dims."""
    rank = ctx.rank(0)
    perm = ctx.attr("perm")
    order = list(range(rank))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(order) != list(range(rank)):
        raise ctx.error(f"perm {order} is not a permutation of {rank} dims")
    source = ctx.shape(0)
    _moved(ctx, "permute", [_data(ctx)], {"order": order}, [source[p] for p in order])


# -- joining and splitting ----------------------------------------------------------------


@onnx_rule("Concat")
def concat(ctx: NodeContext) -> None:
    present = [i for i in range(ctx.num_inputs) if ctx.has_input(i)]
    if not present:
        raise ctx.error("needs at least one input")
    first = ctx.shape(present[0])
    if not ctx.has_attr("axis") and ctx.opset >= 4:
        raise ctx.error("the 'axis' attribute is required")
    axis = _axis(ctx, ctx.attr("axis", 1), len(first))
    for i in present:
        other = ctx.shape(i)
        if len(other) != len(first) or any(
            a != b for d, (a, b) in enumerate(zip(first, other)) if d != axis
        ):
            raise ctx.error(
                f"input {i} {list(other)} does not concatenate with {list(first)} along axis {axis}"
            )
    target = list(first)
    target[axis] = sum(ctx.shape(i)[axis] for i in present)
    dtype = _data_dtype(ctx, present[0])
    _moved(
        ctx, "concat", [[_data(ctx, i) for i in present]], {"axis": axis}, target, dtype
    )


def _split(
    ctx: NodeContext, sizes: Sequence[int] | None, num_outputs: int | None = None
) -> None:
    """Explicit sizes, or equal parts (opset 18's num_outputs: ceil-sized, the last smaller)."""
    source = ctx.shape(0)
    axis = _axis(ctx, ctx.attr("axis", 0), len(source))
    dim = source[axis]
    parts = ctx.num_outputs
    if sizes is None:
        if num_outputs is not None or ctx.opset >= 18:
            parts = num_outputs or parts
            chunk = -(-dim // parts)
            sizes = [max(0, min(chunk, dim - i * chunk)) for i in range(parts)]
        elif dim % parts:
            raise ctx.error(
                f"dim {axis} of size {dim} does not split into {parts} equal parts"
            )
        else:
            sizes = [dim // parts] * parts
    sizes = [int(s) for s in sizes]
    if len(sizes) != ctx.num_outputs:
        raise ctx.error(
            f"split {sizes} has {len(sizes)} parts for {ctx.num_outputs} outputs"
        )
    if any(s < 0 for s in sizes) or sum(sizes) != dim:
        raise ctx.error(f"split {sizes} does not add up to dim {axis} of size {dim}")
    shapes_ = [[*source[:axis], s, *source[axis + 1 :]] for s in sizes]
    dtypes = [_top_dtype(_data_dtype(ctx))] * len(sizes)
    ctx.output(
        "split",
        [_data(ctx)],
        {"axis": axis, "split": sizes},
        shapes_=shapes_,
        dtypes=dtypes,
    )


@onnx_rule("Split", until=12)
def split_attr(ctx: NodeContext) -> None:
    """Sizes in the `split` attribute (opset 1 also takes them as input 1)."""
    sizes = ctx.attr("split")
    if sizes is None and ctx.opset < 2:
        sizes = _const_input(ctx, 1, "split")
    _split(ctx, None if sizes is None else _ints(sizes))


@onnx_rule("Split", since=13)
def split(ctx: NodeContext) -> None:
    """Sizes in input 1; from opset 18 `num_outputs` asks for equal parts."""
    sizes = _const_input(ctx, 1, "split")
    num_outputs = ctx.attr("num_outputs") if ctx.opset >= 18 else None
    _split(ctx, None if sizes is None else _ints(sizes), num_outputs)


# -- slicing and padding ------------------------------------------------------------------


def _slice(
    ctx: NodeContext,
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int] | None,
    steps: Sequence[int] | None,
) -> None:
    """Normalize to one entry per sliced axis: axis >= 0, start clamped into the
    dim, end clamped to [0, dim] (step > 0) or [-1, dim - 1] (step < 0); an end
    before index 0 is written -dim-1, which ONNX's rule wraps to -1."""
    source = ctx.shape(0)
    n = len(starts)
    if len(ends) != n:
        raise ctx.error(f"starts {list(starts)} and ends {list(ends)} differ in length")
    axes = _axes(ctx, range(n) if axes is None else axes, len(source))
    steps = [1] * n if steps is None else list(steps)
    if len(axes) != n or len(steps) != n:
        raise ctx.error("starts, ends, axes and steps must have the same length")
    if 0 in steps:
        raise ctx.error(f"steps {steps} must not hold 0")
    target = list(source)
    norm_starts, norm_ends = [], []
    for axis, start, end, step in zip(axes, starts, ends, steps):
        dim = source[axis]
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        target[axis] = len(range(start, end, step))
        norm_starts.append(start)
        norm_ends.append(-dim - 1 if end < 0 else end)
    attrs = {"starts": norm_starts, "ends": norm_ends, "axes": axes, "steps": steps}
    _moved(ctx, "slice", [_data(ctx)], attrs, target)


@onnx_rule("Slice", until=9)
def slice_attr(ctx: NodeContext) -> None:
    """Before opset 10: starts, ends and axes are attributes, no steps."""
    axes = ctx.attr("axes")
    _slice(
        ctx,
        _ints(ctx.attr("starts", [])),
        _ints(ctx.attr("ends", [])),
        None if axes is None else _ints(axes),
        None,
    )


@onnx_rule("Slice", since=10)
def slice_(ctx: NodeContext) -> None:
    starts = _ints(ctx.require_const(1, "starts"))
    ends = _ints(ctx.require_const(2, "ends"))
    axes = _const_input(ctx, 3, "axes")
    steps = _const_input(ctx, 4, "steps")
    _slice(
        ctx,
        starts,
        ends,
        None if axes is None else _ints(axes),
        None if steps is None else _ints(steps),
    )


_PAD_MODES = ("constant", "reflect", "edge", "wrap")


def _pad(
    ctx: NodeContext,
    pads: Sequence[int],
    value: float | SSAValue,
    axes: Sequence[int] | None = None,
) -> None:
    """Pads are begins then ends, per axis of `axes` (all dims by default);
    negative pads crop. A run-time constant value (a scalar tensor) fills the
    border through a top.where with a constant mask of where the data lands."""
    source = ctx.shape(0)
    rank = len(source)
    mode = ctx.attr("mode", "constant")
    if mode not in _PAD_MODES or (mode == "wrap" and ctx.opset < 19):
        raise ctx.error(
            f"mode '{mode}' is not supported (constant, reflect, edge; wrap from opset 19)"
        )
    axes = list(range(rank)) if axes is None else _axes(ctx, axes, rank)
    if len(pads) != 2 * len(axes):
        raise ctx.error(
            f"pads {list(pads)} must have {2 * len(axes)} entries (begins then ends)"
        )
    full = [0] * (2 * rank)
    for i, axis in enumerate(axes):
        full[axis], full[rank + axis] = int(pads[i]), int(pads[len(axes) + i])
    target = [d + full[i] + full[rank + i] for i, d in enumerate(source)]
    if min(target, default=0) < 0:
        raise ctx.error(f"pads {full} crop the input {list(source)} below size 0")
    if mode in ("reflect", "edge", "wrap") and any(
        source[i] == 0 and (full[i] > 0 or full[rank + i] > 0) for i in range(rank)
    ):
        raise ctx.error(f"mode '{mode}' cannot pad an empty dim")
    if not isinstance(value, SSAValue):
        attrs = {"pads": full, "mode": mode, "value": float(value)}
        _moved(ctx, "pad", [_data(ctx)], attrs, target)
        return
    dtype = _top_dtype(_data_dtype(ctx))
    attrs = {"pads": full, "mode": mode, "value": 0.0}
    (padded,) = ctx.emit("pad", [_data(ctx)], attrs, shapes_=[target], dtypes=[dtype])
    kept = [d + min(full[i], 0) + min(full[rank + i], 0) for i, d in enumerate(source)]
    widths = [(max(full[i], 0), max(full[rank + i], 0)) for i in range(rank)]
    mask = np.pad(np.ones(kept, dtype=bool), widths)
    ones = [1] * rank
    (fill,) = ctx.emit(
        "reshape", [value], {"shape": ones}, shapes_=[ones], dtypes=[dtype]
    )
    operands = [constant(ctx, mask, "mask", dtype=None), padded, fill]
    _moved(ctx, "where", operands, None, target)


@onnx_rule("Pad", until=10)
def pad_attr(ctx: NodeContext) -> None:
    """Before opset 11: `pads` (opset 1: `paddings`) and `value` are attributes."""
    pads = ctx.attr("pads", ctx.attr("paddings"))
    if pads is None:
        raise ctx.error("the 'pads' attribute is required")
    _pad(ctx, _ints(pads), float(ctx.attr("value", 0.0)))


@onnx_rule("Pad", since=11)
def pad(ctx: NodeContext) -> None:
    """Inputs pads, constant_value (optional scalar) and, from opset 18, axes."""
    pads = _ints(ctx.require_const(1, "pads"))
    axes = _const_input(ctx, 3, "axes") if ctx.opset >= 18 else None
    value: float | SSAValue = 0.0
    if ctx.has_input(2):
        if math.prod(ctx.shape(2)) != 1:
            raise ctx.error(
                f"constant_value must be a scalar, got {list(ctx.shape(2))}"
            )
        const = ctx.const(2)
        if const is not None:
            value = float(const.reshape(()))
        elif ctx.attr("mode", "constant") == "constant":
            value = _data(ctx, 2)
    _pad(ctx, pads, value, None if axes is None else _ints(axes))


# -- resizing --------------------------------------------------------------------------------

_COORDINATE_MODES = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _interp(
    ctx: NodeContext,
    x: SSAValue,
    scales: Sequence[float],
    target: Sequence[int],
    mode: str,
    coordinate_mode: str,
    nearest_mode: str | None,
    *,
    last: bool,
) -> SSAValue:
    """One top.interp to `target`; `last` makes it the node's output."""
    source = shape_of(x)
    if list(target[:2]) != list(source[:2]):
        raise ctx.error(
            f"resizing N or C ({list(source)} -> {list(target)}) is not supported"
        )
    attrs = {
        "mode": mode,
        "coordinate_mode": coordinate_mode,
        "nearest_mode": nearest_mode if mode == "nearest" else None,
        "scales": [float(s) for s in scales],
    }
    if not last:
        return ctx.emit("interp", [x], attrs, shapes_=[list(target)])[0]
    dtype = _data_dtype(ctx)
    if dtype.kind in "iu" and mode != "nearest":
        # Integer results round half to even and saturate, as ONNX's reference.
        (y,) = ctx.emit("interp", [x], attrs, shapes_=[list(target)])
        (y,) = ctx.emit("round", [y])
        info = np.iinfo(dtype)
        (y,) = ctx.emit("clip", [y], {"min": float(info.min), "max": float(info.max)})
        return cast_output(ctx, y, dtype)
    return _moved(ctx, "interp", [x], attrs, target)


def _scaled_size(source: Sequence[int], scales: Sequence[float]) -> list[int]:
    """floor(dim * scale), computed in double as ONNX's reference does."""
    return [math.floor(d * float(s)) for d, s in zip(source, scales)]


def _resize_asymmetric(ctx: NodeContext, scales: Sequence[float], mode: str) -> None:
    """Upsample and opset-10 Resize: asymmetric coordinates (x / scale); nearest
    rounds down when enlarging and up when shrinking (onnxruntime's rule), so
    mixed scales take one interp per direction."""
    source = ctx.shape(0)
    if len(scales) != len(source):
        raise ctx.error(
            f"scales {list(scales)} must have one entry per input dim ({len(source)})"
        )
    if any(s <= 0 for s in scales):
        raise ctx.error(f"scales {list(scales)} must be positive")
    if mode in ("linear", "bilinear"):
        _interp(
            ctx,
            ctx.input(0),
            scales,
            _scaled_size(source, scales),
            "linear",
            "asymmetric",
            None,
            last=True,
        )
        return
    if mode != "nearest":
        raise ctx.error(f"mode '{mode}' is not supported (nearest, linear)")
    target = _scaled_size(source, scales)
    integral = all(float(s).is_integer() for s in scales)
    if len(source) == 4 and integral and scales[0] == scales[1] == 1:
        attrs = {"scale_h": int(scales[2]), "scale_w": int(scales[3])}
        _moved(ctx, "upsample", [_data(ctx)], attrs, target)
        return
    shrinks, grows = any(s < 1 for s in scales), any(s > 1 for s in scales)
    x = ctx.input(0)
    if shrinks and grows:
        down = [min(s, 1.0) for s in scales]
        x = _interp(
            ctx,
            x,
            down,
            _scaled_size(source, down),
            "nearest",
            "asymmetric",
            "ceil",
            last=False,
        )
        _interp(
            ctx,
            x,
            [max(s, 1.0) for s in scales],
            target,
            "nearest",
            "asymmetric",
            "floor",
            last=True,
        )
        return
    _interp(
        ctx,
        x,
        scales,
        target,
        "nearest",
        "asymmetric",
        "ceil" if shrinks else "floor",
        last=True,
    )


@onnx_rule("Upsample", until=6)
def upsample_v1(ctx: NodeContext) -> None:
    """Opset 1: height_scale and width_scale of NCHW."""
    scales = [
        1.0,
        1.0,
        float(ctx.attr("height_scale", 1.0)),
        float(ctx.attr("width_scale", 1.0)),
    ]
    _resize_asymmetric(ctx, scales, ctx.attr("mode", "nearest"))


@onnx_rule("Upsample", since=7)
def upsample(ctx: NodeContext) -> None:
    """Scales per dim: an attribute in opsets 7-8, input 1 from opset 9."""
    if ctx.opset < 9:
        scales = ctx.attr("scales")
        if scales is None:
            raise ctx.error("the 'scales' attribute is required")
    else:
        scales = ctx.require_const(1, "scales").reshape(-1).tolist()
    _resize_asymmetric(ctx, [float(s) for s in scales], ctx.attr("mode", "nearest"))


@onnx_rule("Resize", until=10)
def resize_v10(ctx: NodeContext) -> None:
    """Opset 10: scales (input 1) with Upsample's asymmetric coordinates."""
    scales = ctx.require_const(1, "scales").reshape(-1).tolist()
    _resize_asymmetric(ctx, [float(s) for s in scales], ctx.attr("mode", "nearest"))


def _resize_sizes(
    ctx: NodeContext, sizes: np.ndarray, axes: list[int]
) -> tuple[list[float], list[int]]:
    """Scales and output size from `sizes` (with opset 18's keep_aspect_ratio_policy)."""
    source = ctx.shape(0)
    sizes = _ints(sizes)
    if len(sizes) != len(axes):
        raise ctx.error(
            f"sizes {sizes} must have one entry per resized axis ({len(axes)})"
        )
    target, scales = list(source), [1.0] * len(source)
    for axis, s in zip(axes, sizes):
        target[axis], scales[axis] = s, s / source[axis]
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    if policy == "stretch":
        return scales, target
    if policy not in ("not_larger", "not_smaller"):
        raise ctx.error(f"keep_aspect_ratio_policy '{policy}' is not an ONNX value")
    pick = min if policy == "not_larger" else max
    scale = pick(scales[a] for a in axes)
    for axis in axes:
        scales[axis] = scale
        target[axis] = int(scale * source[axis] + 0.5)
    return scales, target


@onnx_rule("Resize", since=11)
def resize(ctx: NodeContext) -> None:
    """Scales (input 2) or sizes (input 3), over `axes` from opset 18; modes
    nearest, linear (N-linear) and cubic (a = -0.75, exclude_outside 0)."""
    source = ctx.shape(0)
    rank = len(source)
    mode = ctx.attr("mode", "nearest")
    coordinate_mode = ctx.attr("coordinate_transformation_mode", "half_pixel")
    nearest_mode = ctx.attr("nearest_mode", "round_prefer_floor")
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.error(f"mode '{mode}' is not an ONNX value")
    if coordinate_mode not in _COORDINATE_MODES:
        raise ctx.error(
            f"coordinate_transformation_mode '{coordinate_mode}' is not supported ({', '.join(_COORDINATE_MODES)})"
        )
    if mode == "nearest" and nearest_mode not in _NEAREST_MODES:
        raise ctx.error(f"nearest_mode '{nearest_mode}' is not an ONNX value")
    if mode == "cubic" and (
        ctx.attr("cubic_coeff_a", -0.75) != -0.75 or ctx.attr("exclude_outside", 0)
    ):
        raise ctx.error(
            "cubic mode is supported with cubic_coeff_a = -0.75 and exclude_outside = 0 only"
        )
    axes = (
        list(range(rank))
        if ctx.attr("axes") is None
        else _axes(ctx, _ints(ctx.attr("axes")), rank)
    )
    scales_in = _const_input(ctx, 2, "scales")
    sizes = _const_input(ctx, 3, "sizes")
    if (scales_in is None) == (sizes is None):
        raise ctx.error(
            "exactly one of scales (input 2) and sizes (input 3) must be given"
        )
    if sizes is not None:
        scales, target = _resize_sizes(ctx, sizes, axes)
    else:
        given = scales_in.reshape(-1).tolist()
        if len(given) != len(axes):
            raise ctx.error(
                f"scales {given} must have one entry per resized axis ({len(axes)})"
            )
        if any(s <= 0 for s in given):
            raise ctx.error(f"scales {given} must be positive")
        scales = [1.0] * rank
        for axis, s in zip(axes, given):
            scales[axis] = float(s)
        target = _scaled_size(source, scales)
    if ctx.attr("antialias", 0) and mode != "nearest" and any(s < 1 for s in scales):
        raise ctx.error("antialias when downsampling is not supported")
    _interp(
        ctx,
        ctx.input(0),
        scales,
        target,
        mode,
        coordinate_mode,
        nearest_mode,
        last=True,
    )


# -- indexing ---------------------------------------------------------------------------------


def _indices(ctx: NodeContext, i: int, size: int | None = None) -> SSAValue:
    """Integer indices as they are (a constant one checked against `size`)."""
    dtype = ctx.dtype(i)
    if dtype.kind not in "iu":
        raise ctx.error(f"indices (input {i}) must be integers, got {dtype}")
    const = ctx.const(i)
    if (
        const is not None
        and size is not None
        and const.size
        and (const.min() < -size or const.max() >= size)
    ):
        raise ctx.error(
            f"indices (input {i}) hold a value outside [-{size}, {size - 1}]"
        )
    return ctx.input(i, dtype=None)


@onnx_rule("Gather")
def gather(ctx: NodeContext) -> None:
    """out = take(data, indices, axis): data[:axis] + indices.shape + data[axis+1:]."""
    source = ctx.shape(0)
    axis = _axis(ctx, ctx.attr("axis", 0), len(source))
    target = [*source[:axis], *ctx.shape(1), *source[axis + 1 :]]
    const = ctx.const(1)
    if (
        const is not None
        and const.ndim == 0
        and const.dtype.kind in "iu"
        and -source[axis] <= const < source[axis]
    ):
        # x[..., i, ...]: a one-wide slice with the axis dropped.
        start = int(const) % source[axis]
        attrs = {"starts": [start], "ends": [start + 1], "axes": [axis], "steps": [1]}
        sliced = [*source[:axis], 1, *source[axis + 1 :]]
        (row,) = ctx.emit(
            "slice",
            [_data(ctx)],
            attrs,
            shapes_=[sliced],
            dtypes=[_top_dtype(ctx.dtype(0))],
        )
        _moved(ctx, "reshape", [row], {"shape": target}, target)
        return
    _moved(
        ctx,
        "gather",
        [_data(ctx), _indices(ctx, 1, source[axis])],
        {"axis": axis},
        target,
    )


@onnx_rule("GatherElements", since=11)
def gather_elements(ctx: NodeContext) -> None:
    source, index_shape = ctx.shape(0), ctx.shape(1)
    axis = _axis(ctx, ctx.attr("axis", 0), len(source))
    if len(index_shape) != len(source):
        raise ctx.error(
            f"indices {list(index_shape)} must have the rank of the data {list(source)}"
        )
    _moved(
        ctx,
        "gather_elements",
        [_data(ctx), _indices(ctx, 1, source[axis])],
        {"axis": axis},
        index_shape,
    )


@onnx_rule("ScatterND", since=11)
def scatter_nd(ctx: NodeContext) -> None:
    """A copy of data with the slices at indices replaced (reduction from opset 16)."""
    reduction = ctx.attr("reduction", "none")
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise ctx.error(f"reduction '{reduction}' is not an ONNX value")
    operands = [_data(ctx), _indices(ctx, 1), _data(ctx, 2)]
    _moved(ctx, "scatter_nd", operands, {"reduction": reduction}, ctx.shape(0))


@onnx_rule("Compress", since=9)
def compress(ctx: NodeContext) -> None:
    """A gather of the positions where the (constant) condition holds; without
    `axis`, of the flattened input."""
    condition = ctx.require_const(1, "the condition, which decides the output's shape,")
    x, source = _data(ctx), list(ctx.shape(0))
    axis = ctx.attr("axis")
    if axis is None:
        source = [math.prod(source)]
        (x,) = ctx.emit(
            "reshape",
            [x],
            {"shape": source},
            shapes_=[source],
            dtypes=[_top_dtype(ctx.dtype(0))],
        )
        axis = 0
    axis = _axis(ctx, axis, len(source))
    if condition.ndim != 1 or condition.size > source[axis]:
        raise ctx.error(
            f"condition {list(condition.shape)} must be 1-D and no longer than dim {axis} ({source[axis]})"
        )
    positions = np.flatnonzero(condition.astype(bool)).astype(np.int64)
    indices = constant(ctx, positions, "positions", dtype=None)
    target = [*source[:axis], positions.size, *source[axis + 1 :]]
    _moved(ctx, "gather", [x, indices], {"axis": axis}, target)


@onnx_rule("ConstantOfShape", since=9)
def constant_of_shape(ctx: NodeContext) -> None:
    """A constant (folding makes it unless the result is very large); a
    run-time shape gives no static shape."""
    shape_ = _ints(ctx.require_const(0, "the shape"))
    value = ctx.attr("value")
    value = np.zeros(1, np.float32) if value is None else numpy_helper.to_array(value)
    ctx.set_const(0, np.full(shape_, value.reshape(-1)[0], dtype=value.dtype))


@onnx_rule("Range", since=11)
def range_(ctx: NodeContext) -> None:
    """A constant; run-time start, limit or delta leave its length unknown."""
    start, limit, delta = (
        ctx.require_const(i, what).reshape(())
        for i, what in enumerate(("start", "limit", "delta"))
    )
    ctx.set_const(0, np.arange(start, limit, delta, dtype=start.dtype))


@onnx_rule("NonZero", since=9)
def nonzero(ctx: NodeContext) -> None:
    raise ctx.error(
        "the output's shape depends on the input's values (only a constant input can be folded)"
    )


@onnx_rule("Trilu", since=14)
def trilu(ctx: NodeContext) -> None:
    """Keep the upper (or lower) triangle of the last two dims from diagonal k:
    a top.where with a constant mask."""
    source = ctx.shape(0)
    if len(source) < 2:
        raise ctx.error(f"the input must have rank >= 2, got {list(source)}")
    k = _const_input(ctx, 1, "k")
    k = 0 if k is None else int(k.reshape(()))
    ones = np.ones(source[-2:], dtype=bool)
    mask = np.triu(ones, k) if ctx.attr("upper", 1) else np.tril(ones, k)
    operands = [
        constant(ctx, mask, "mask", dtype=None),
        _data(ctx),
        constant(ctx, 0, "zero", dtype=_top_dtype(_data_dtype(ctx)), rank=len(source)),
    ]
    _moved(ctx, "where", operands, None, source)


@onnx_rule("EyeLike", since=9)
def eye_like(ctx: NodeContext) -> None:
    """Only the input's shape matters: a constant."""
    source = ctx.shape(0)
    if len(source) != 2:
        raise ctx.error(f"the input must be 2-D, got {list(source)}")
    dtype = (
        ctx.dtype(0)
        if ctx.attr("dtype") is None
        else _onnx_dtype(ctx, ctx.attr("dtype"))
    )
    ctx.set_const(0, np.eye(*source, k=ctx.attr("k", 0), dtype=dtype))


@onnx_rule("Tile", since=6)
def tile(ctx: NodeContext) -> None:
    source = ctx.shape(0)
    repeats = _ints(ctx.require_const(1, "repeats"))
    if len(repeats) != len(source) or min(repeats, default=0) < 0:
        raise ctx.error(f"repeats {repeats} must hold {len(source)} counts >= 0")
    target = [d * r for d, r in zip(source, repeats)]
    _moved(ctx, "tile", [_data(ctx)], {"repeats": repeats}, target)


@onnx_rule("Expand", since=8)
def expand(ctx: NodeContext) -> None:
    """Broadcast both ways: the output is broadcast(input shape, shape)."""
    source = ctx.shape(0)
    shape_ = _ints(ctx.require_const(1, "the target shape"))
    try:
        target = list(np.broadcast_shapes(tuple(source), tuple(shape_)))
    except ValueError as e:
        raise ctx.error(
            f"the input {list(source)} does not broadcast with shape {shape_}"
        ) from e
    _moved(ctx, "expand", [_data(ctx)], None, target)


def _depth2space(ctx: NodeContext, inverse: bool) -> None:
    source = ctx.shape(0)
    if len(source) != 4:
        raise ctx.error(f"the input must be 4-D (NCHW), got {list(source)}")
    block = ctx.attr("blocksize")
    if block is None or block < 1:
        raise ctx.error("the 'blocksize' attribute must be >= 1")
    mode = ctx.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise ctx.error(f"mode '{mode}' is not DCR or CRD")
    n, c, h, w = source
    if inverse:
        if h % block or w % block:
            raise ctx.error(
                f"blocksize {block} does not divide H and W of {list(source)}"
            )
        target = [n, c * block * block, h // block, w // block]
    else:
        if c % (block * block):
            raise ctx.error(
                f"blocksize^2 = {block * block} does not divide the {c} channels"
            )
        target = [n, c // (block * block), h * block, w * block]
    attrs = {"block_size": block, "mode": mode, "inverse": inverse}
    _moved(ctx, "depth2space", [_data(ctx)], attrs, target)


@onnx_rule("DepthToSpace")
def depth_to_space(ctx: NodeContext) -> None:
    """mode DCR (default) or CRD (opset 11+)."""
    _depth2space(ctx, inverse=False)


@onnx_rule("SpaceToDepth")
def space_to_depth(ctx: NodeContext) -> None:
    """top.depth2space with inverse; mode (opset 28) as DepthToSpace's."""
    _depth2space(ctx, inverse=True)


# -- casts -----------------------------------------------------------------------------------

_CAST_FLOATS = {
    np.dtype(np.float16),
    np.dtype(np.float32),
    np.dtype(np.float64),
    np.dtype(helper.tensor_dtype_to_np_dtype(TensorProto.BFLOAT16)),
}


def _onnx_dtype(ctx: NodeContext, to: int | str) -> np.dtype:
    """The numpy dtype of an ONNX element type (opsets 1-5 name it by string)."""
    try:
        code = (
            TensorProto.DataType.Value(to.upper()) if isinstance(to, str) else int(to)
        )
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(code))
    except (KeyError, ValueError, TypeError) as e:
        raise ctx.error(f"element type {to!r} is not supported") from e
    return dtype


def _cast(ctx: NodeContext, target: np.dtype) -> None:
    """top.cast to the target dtype: bool, (u)int8..64, float16, bfloat16, float32, float64."""
    source = ctx.dtype(0)
    for dtype, what in ((source, "input"), (target, "target")):
        if not (dtype.kind in "biu" or dtype in _CAST_FLOATS):
            raise ctx.error(f"{what} element type {dtype} is not supported")
    if source == target:
        ctx.set_output(0, ctx.input(0, dtype=None))
        return
    ctx.output("cast", [ctx.input(0, dtype=None)], dtypes=[target])


@onnx_rule("Cast")
def cast(ctx: NodeContext) -> None:
    from tpu_xdsl.frontend.rules.quantized import passes_codes

    if not ctx.has_attr("to"):
        raise ctx.error("the 'to' attribute is required")
    if passes_codes(ctx):  # codes of a pre-quantized model, which TOP holds as real values
        ctx.set_output(0, ctx.input(0))
        return
    _cast(ctx, _onnx_dtype(ctx, ctx.attr("to")))


@onnx_rule("CastLike", since=15)
def cast_like(ctx: NodeContext) -> None:
    """Cast to the element type of input 1."""
    _cast(ctx, ctx.dtype(1))


@onnx_rule("OneHot", since=9)
def one_hot(ctx: NodeContext) -> None:
    """values[1] where the (wrapped) index equals its position along `axis`,
    values[0] elsewhere: a compare with a constant range and a top.where.
    Indices outside [-depth, depth) (or not whole) match no position, as in
    ONNX's reference and onnxruntime."""
    depth = ctx.require_const(1, "depth")
    if depth.size != 1 or math.prod(ctx.shape(2)) != 2:
        raise ctx.error("depth must be a scalar and values hold [off, on]")
    depth = int(depth.reshape(()))
    index_shape = ctx.shape(0)
    rank = len(index_shape) + 1
    axis = _axis(ctx, ctx.attr("axis", -1), rank)
    index = ctx.input(0)
    zero = constant(ctx, 0.0, "zero", rank=rank - 1)
    (negative,) = ctx.emit(
        "compare", [index, zero], {"mode": "lt"}, dtypes=[np.dtype(np.bool_)]
    )
    (wrapped,) = ctx.emit(
        "add", [index, constant(ctx, float(depth), "depth", rank=rank - 1)]
    )
    (index,) = ctx.emit("where", [negative, wrapped, index])
    expanded = [*index_shape[:axis], 1, *index_shape[axis:]]
    (index,) = ctx.emit("unsqueeze", [index], {"axes": [axis]}, shapes_=[expanded])
    positions = np.arange(depth, dtype=np.float32).reshape(
        [depth if i == axis else 1 for i in range(rank)]
    )
    (hot,) = ctx.emit(
        "compare",
        [index, constant(ctx, positions, "positions")],
        {"mode": "eq"},
        dtypes=[np.dtype(np.bool_)],
    )
    off, on = _off_on(ctx, rank)
    target = [*index_shape[:axis], depth, *index_shape[axis:]]
    _moved(ctx, "where", [hot, on, off], None, target, ctx.dtype(2))


def _off_on(ctx: NodeContext, rank: int) -> tuple[SSAValue, SSAValue]:
    """OneHot's values[0] and values[1] shaped to broadcast at `rank`
    (sliced out of a run-time values tensor)."""
    dtype = _top_dtype(_data_dtype(ctx, 2))
    values = ctx.const(2)
    if values is not None:
        values = values.reshape(-1)
        return tuple(
            constant(ctx, values[k], tag, dtype=dtype, rank=rank)
            for k, tag in enumerate(("off", "on"))
        )
    ones = [1] * rank
    flat = _data(ctx, 2)
    if len(ctx.shape(2)) != 1:
        (flat,) = ctx.emit(
            "reshape", [flat], {"shape": [2]}, shapes_=[[2]], dtypes=[dtype]
        )
    parts = []
    for k in (0, 1):
        attrs = {"starts": [k], "ends": [k + 1], "axes": [0], "steps": [1]}
        (part,) = ctx.emit("slice", [flat], attrs, shapes_=[[1]], dtypes=[dtype])
        (part,) = ctx.emit(
            "reshape", [part], {"shape": ones}, shapes_=[ones], dtypes=[dtype]
        )
        parts.append(part)
    return parts[0], parts[1]
