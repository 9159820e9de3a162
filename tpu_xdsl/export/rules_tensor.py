"""TOP data movement (reshape, transpose, slice, pad, gather, resize, ...) -> TOSA."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, IntegerType
from xdsl.ir import Operation

from tpu_xdsl.export.rules import (
    Context,
    ExportError,
    ShapedOp,
    op_kind,
    result_element,
    result_shape,
    rule,
    truth,
)
from tpu_xdsl.export.tosa_builder import NHWC, Val, int32, numpy_dtype, tensor_type

# -- data movement -----------------------------------------------------------------------------


@rule("reshape", "flatten", "squeeze", "unsqueeze", "expand_dims")
def reshape(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    shape = result_shape(op)
    if x.const is not None:
        return [Val(shape, x.element, const=x.const.reshape(shape))]
    return [ctx.new(ctx.b.reshape(ctx.b.logical(x), shape), shape, x.element)]


@rule("permute")
def permute(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    order = [int(o) for o in attrs["order"]]
    shape = result_shape(op)
    if x.const is not None:
        return [Val(shape, x.element, const=x.const.transpose(order))]
    if x.channels_last and x.rank == 4:  # compose with the layout: one transpose, not two
        perm = [NHWC.index(o) for o in order]
        return [ctx.new(ctx.b.transpose(x.value, perm), shape, x.element)]  # pyright: ignore[reportArgumentType]
    return [ctx.new(ctx.b.transpose(ctx.b.logical(x), order), shape, x.element)]


@rule("concat")
def concat(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    shape, element = result_shape(op), result_element(op)
    axis = int(attrs["axis"]) % len(shape)
    last = len(shape) == 4 and any(v.channels_last for v in inputs if v.const is None)
    operands = [ctx.b.materialize(v, last) for v in inputs]
    physical = [shape[p] for p in NHWC] if last else list(shape)
    out = ctx.b.op("concat", operands, tensor_type(physical, element), axis=int32(NHWC.index(axis) if last else axis))
    return [ctx.fused_relu(ctx.new(out, shape, element, last), attrs)]


@rule("slice")
def slice_(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """tosa.slice for unit steps; other steps (negative ones too) gather their rows."""
    x = inputs[0]
    shape = result_shape(op)
    starts, ends, axes, steps = (list(attrs[k]) for k in ("starts", "ends", "axes", "steps"))
    begin = [0] * x.rank
    stepped: dict[int, np.ndarray] = {}
    for start, end, axis, s in zip(starts, ends, axes, steps, strict=True):
        axis = int(axis) % x.rank
        rows = range(*slice(int(start), int(end), int(s)).indices(x.shape[axis]))
        if int(s) == 1:
            begin[axis] = rows.start
        else:
            stepped[axis] = np.asarray(rows, np.int64)
    return [strided_box(ctx, x, begin, shape, stepped)]


def strided_box(ctx: Context, x: Val, begin: list[int], shape: Sequence[int], stepped: dict[int, np.ndarray]) -> Val:
    """x's box from `begin` of `shape`, where the axes in `stepped` take those rows instead:
    a tosa.slice of the unit-step axes, then a gather per stepped axis."""
    if x.const is not None:
        rows = [stepped.get(a, np.arange(b, b + n)) for a, (b, n) in enumerate(zip(begin, shape, strict=True))]
        return Val(tuple(shape), x.element, const=x.const[np.ix_(*rows)])
    kept = [x.shape[a] if a in stepped else n for a, n in enumerate(shape)]
    y = x
    if tuple(kept) != x.shape:
        last = x.channels_last
        order = NHWC if last else tuple(range(x.rank))
        out = ctx.b.op("slice", [ctx.b.materialize(x, last), ctx.b.shape([begin[p] for p in order]),
                                 ctx.b.shape([kept[p] for p in order])],
                       tensor_type([kept[p] for p in order], x.element))
        y = ctx.new(out, kept, x.element, last)
    for axis, rows in stepped.items():
        y = take(ctx, y, axis, rows)
    return y


def take(ctx: Context, x: Val, axis: int, indices: np.ndarray | Val) -> Val:
    """numpy.take(x, indices, axis) as tosa.gather (values [N, K, C], indices [N, W]) with N
    the rows before `axis`; indices are in range. Constant 1-D indices keep the layout."""
    index_shape = indices.shape
    shape = (*x.shape[:axis], *index_shape, *x.shape[axis + 1:])
    if x.const is not None and isinstance(indices, np.ndarray):
        return Val(shape, x.element, const=np.take(x.const, indices, axis))
    last = x.channels_last and isinstance(indices, np.ndarray) and indices.ndim == 1
    physical = x.physical_shape if last else x.shape
    axis_p = NHWC.index(axis) if last else axis
    outer, rows, inner = math.prod(physical[:axis_p]), physical[axis_p], math.prod(physical[axis_p + 1:])
    width = math.prod(index_shape)
    if x.const is not None:
        values = ctx.b.const(np.ascontiguousarray(x.const.reshape(outer, rows, inner)))
    else:
        values = ctx.b.reshape(ctx.b.materialize(x, last), [outer, rows, inner])
    if isinstance(indices, np.ndarray):
        index = ctx.b.const(np.ascontiguousarray(np.broadcast_to(indices.reshape(1, width).astype(np.int32),
                                                                 (outer, width))))
    else:
        index = ctx.b.reshape(index_i32(ctx, indices, x.shape[axis]).value, [1, width])  # pyright: ignore[reportArgumentType]
        if outer != 1:
            index = ctx.b.op("tile", [index, ctx.b.shape([outer, 1])], tensor_type([outer, width], I32))
    out = ctx.b.op("gather", [values, index], tensor_type([outer, width, inner], x.element))
    out_physical = [*physical[:axis_p], *index_shape, *physical[axis_p + 1:]]
    return ctx.new(ctx.b.reshape(out, out_physical), shape, x.element, channels_last=last)


I32 = IntegerType(32)


def index_i32(ctx: Context, indices: Val, size: int | Val) -> Val:
    """Run-time indices as i32 in the logical layout, negative ones counted from `size`."""
    value = ctx.b.logical(indices)
    if indices.element != I32:
        value = ctx.b.op("cast", [value], tensor_type(indices.shape, I32))
    idx = ctx.new(value, indices.shape, I32)
    bound = size if isinstance(size, Val) else ctx.scalar(size, I32, indices.rank)
    wrapped = ctx.elementwise("add", [idx, bound], indices.shape, I32)
    negative = ctx.elementwise("greater", [ctx.scalar(0, I32, indices.rank), idx], indices.shape, IntegerType(1))
    return ctx.elementwise("select", [negative, wrapped, idx], indices.shape, I32)


def _const_indices(indices: np.ndarray, size: int) -> np.ndarray:
    indices = indices.astype(np.int64)
    return np.where(indices < 0, indices + size, indices)


@rule("gather")
def gather(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x, indices = inputs
    axis = int(attrs.get("axis", 0)) % x.rank
    index: np.ndarray | Val = indices
    if indices.const is not None:
        index = _const_indices(indices.const, x.shape[axis])
    return [take(ctx, x, axis, index)]


@rule("gather_elements")
def gather_elements(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """One tosa.gather from x flattened to [1, size, 1]: each index becomes a flat position,
    index * stride(axis) + the position of its other coordinates."""
    x, indices = inputs
    axis = int(attrs.get("axis", 0)) % x.rank
    strides = [math.prod(x.shape[a + 1:]) for a in range(x.rank)]
    grid = np.indices(indices.shape, np.int64)
    offsets = sum(grid[a] * strides[a] for a in range(x.rank) if a != axis)
    assert isinstance(offsets, np.ndarray)
    flat_x = _reshaped(ctx, x, (math.prod(x.shape),))
    if indices.const is not None:
        flat = _const_indices(indices.const, x.shape[axis]) * strides[axis] + offsets
        return [_reshaped(ctx, take(ctx, flat_x, 0, flat), indices.shape)]
    idx = index_i32(ctx, indices, x.shape[axis])
    scaled = ctx.mul(idx, ctx.scalar(strides[axis], I32, idx.rank), idx.shape)
    flat_val = ctx.elementwise("add", [scaled, Val(offsets.shape, I32, const=offsets.astype(np.int32))],
                               idx.shape, I32)
    return [take(ctx, flat_x, 0, flat_val)]


def _reshaped(ctx: Context, val: Val, shape: tuple[int, ...]) -> Val:
    if val.const is not None:
        return Val(shape, val.element, const=val.const.reshape(shape))
    return ctx.new(ctx.b.reshape(ctx.b.logical(val), shape), shape, val.element)


@rule("scatter_nd")
def scatter_nd(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """tosa.scatter on x as [1, rows, row size]: each index tuple becomes a row number.
    TOSA's scatter replaces; ONNX's add/mul/max/min reductions have no TOSA form."""
    x, indices, updates = inputs
    reduction = attrs.get("reduction", "none")
    if reduction != "none":
        raise ExportError(f"{op.name}: scatter_nd with reduction {reduction} does not export to TOSA "
                          "(tosa.scatter only replaces)")
    k = indices.shape[-1]
    rows, row = math.prod(x.shape[:k]), math.prod(x.shape[k:])
    width = math.prod(indices.shape[:-1])
    strides = np.asarray([math.prod(x.shape[a + 1:k]) for a in range(k)], np.int64)
    if indices.const is not None:
        sizes = np.asarray(x.shape[:k], np.int64)
        idx = indices.const.astype(np.int64)
        flat = ctx.b.const((np.where(idx < 0, idx + sizes, idx) @ strides).reshape(1, width).astype(np.int32))
    else:
        sizes_val = Val((k,), I32, const=np.asarray(x.shape[:k], np.int32))
        idx = index_i32(ctx, indices, ctx.expand(sizes_val, indices.rank))
        scaled = ctx.mul(idx, ctx.expand(Val((k,), I32, const=strides.astype(np.int32)), idx.rank), idx.shape)
        summed = ctx.b.op("reduce_sum", [ctx.b.logical(scaled)], tensor_type([*indices.shape[:-1], 1], I32),
                          axis=int32(indices.rank - 1))
        flat = ctx.b.reshape(summed, [1, width])
    values = ctx.b.reshape(ctx.b.logical(x), [1, rows, row])
    update = ctx.b.reshape(ctx.b.logical(updates), [1, width, row])
    out = ctx.b.op("scatter", [values, flat, update], tensor_type([1, rows, row], x.element))
    return [ctx.new(ctx.b.reshape(out, x.shape), x.shape, x.element)]


@rule("split")
def split(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    axis = int(attrs["axis"]) % x.rank
    outs, offset = [], 0
    for index in range(len(op.results)):
        shape = result_shape(op, index)
        attrs_one = {"starts": [offset], "ends": [offset + shape[axis]], "axes": [axis], "steps": [1]}
        outs += slice_(ctx, ShapedOp(op, shape), [x], attrs_one)  # pyright: ignore[reportArgumentType]
        offset += shape[axis]
    return outs


@rule("pad")
def pad(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """Negative pads crop first; constant padding is tosa.pad, and the other modes (reflect,
    edge, as numpy.pad) gather each padded axis's rows: numpy.pad of the row numbers."""
    x = inputs[0]
    mode = attrs.get("mode", "constant")
    pads = [int(p) for p in attrs["pads"]]
    rank = x.rank
    begins, ends = pads[:rank], pads[rank:]
    for axis in range(rank):
        if begins[axis] < 0 or ends[axis] < 0:
            rows = np.arange(-min(begins[axis], 0), x.shape[axis] + min(ends[axis], 0))
            x = take(ctx, x, axis, rows)
    begins, ends = [max(b, 0) for b in begins], [max(e, 0) for e in ends]
    shape, element = result_shape(op), result_element(op)
    if mode != "constant":
        for axis in range(rank):
            if begins[axis] or ends[axis]:
                x = take(ctx, x, axis, np.pad(np.arange(x.shape[axis]), (begins[axis], ends[axis]), mode=mode))
        return [x]
    if not any(begins) and not any(ends):
        return [x]
    return [constant_pad(ctx, x, begins, ends, float(attrs.get("value", 0.0)), shape, element)]


def constant_pad(ctx: Context, x: Val, begins: list[int], ends: list[int], value: float, shape: Sequence[int],
                 element: Any) -> Val:
    """tosa.pad of x (to `shape`) with `value`."""
    padding = [v for axis in range(x.rank) for v in (begins[axis], ends[axis])]
    constant = np.full(1, value, numpy_dtype(element))
    last = x.channels_last
    order = NHWC if last else tuple(range(x.rank))
    physical_padding = [v for a in order for v in padding[2 * a:2 * a + 2]]
    out = ctx.b.op("pad", [ctx.b.materialize(x, last), ctx.b.shape(physical_padding), ctx.b.const(constant)],
                   tensor_type([shape[p] for p in order], element))
    return ctx.new(out, tuple(shape), element, last)


@rule("interp", "upsample")
def interp(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    shape, element = result_shape(op), result_element(op)
    if x.rank != 4 or shape[:2] != x.shape[:2]:
        raise ExportError(f"{op.name}: only resizes of H and W of a 4-D tensor export to TOSA")
    mode = "nearest" if op_kind(op) == "upsample" else attrs["mode"]
    coordinate = "asymmetric" if op_kind(op) == "upsample" else attrs["coordinate_mode"]
    if mode not in ("nearest", "linear"):
        raise ExportError(f"{op.name}: resize mode {mode} does not export to TOSA (nearest, linear)")
    nearest = attrs.get("nearest_mode", "round_prefer_floor") if op_kind(op) == "interp" else "floor"
    scale, offset, border = [], [], []
    for size, out in zip(x.shape[2:], shape[2:], strict=True):
        n, d, off = _resize_ratio(op, coordinate, size, out)
        if mode == "nearest":
            n, d, off = _nearest_offset(op, nearest, n, d, off)
        scale += [n, d]
        offset.append(off)
        border.append((out - 1) * d - (size - 1) * n + off)
    tosa_mode = "NEAREST_NEIGHBOR" if mode == "nearest" else "BILINEAR"
    from tpu_xdsl.dialects.tosa_attrs import ResizeMode, ResizeModeAttr

    physical = [shape[0], shape[2], shape[3], shape[1]]
    out = ctx.b.op("resize", [ctx.b.channels_last(x), ctx.b.shape(scale), ctx.b.shape(offset), ctx.b.shape(border)],
                   tensor_type(physical, element), mode=ResizeModeAttr(ResizeMode(tosa_mode)))
    return [ctx.new(out, shape, element, True)]


def _resize_ratio(op: Operation, coordinate: str, size: int, out: int) -> tuple[int, int, int]:
    """TOSA's scale n/d and offset: the output row y samples input row (y * d + offset) / n,
    ONNX's coordinate transformation in integers."""
    if coordinate == "align_corners" and out > 1:
        n, d, off = out - 1, size - 1, 0
    elif coordinate == "pytorch_half_pixel" and out == 1:
        n, d, off = 1, 1, 0
    elif coordinate in ("half_pixel", "pytorch_half_pixel"):  # (y + 0.5) / s - 0.5
        n, d, off = 2 * out, 2 * size, size - out
    elif coordinate == "asymmetric":
        n, d, off = out, size, 0
    else:
        raise ExportError(f"{op.name}: coordinate mode {coordinate} does not export to TOSA")
    g = math.gcd(math.gcd(n, d), off)
    return n // g, d // g, off // g


def _nearest_offset(op: Operation, rounding: str, n: int, d: int, off: int) -> tuple[int, int, int]:
    """The offset that makes TOSA's nearest neighbour (round half up of the position) round
    as ONNX's nearest_mode does: positions sit on a grid of 1/n, so shifting by one step
    turns ties down, and by half a unit turns rounding into floor or ceil."""
    if rounding == "round_prefer_ceil":
        return n, d, off
    if rounding == "round_prefer_floor":
        return n, d, off - 1
    if n % 2:
        n, d, off = 2 * n, 2 * d, 2 * off
    if rounding == "floor":
        return n, d, off - n // 2
    if rounding == "ceil":
        return n, d, off + n // 2 - 1
    raise ExportError(f"{op.name}: nearest mode {rounding} does not export to TOSA")


@rule("cast")
def cast(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    element = result_element(op)
    if x.element == element:
        return [x]
    if x.const is not None:
        return [Val(x.shape, element, const=x.const.astype(numpy_dtype(element)))]
    value = ctx.b.materialize(x, x.channels_last)
    i64 = IntegerType(64)
    if i64 in (x.element, element) and I32 not in (x.element, element):
        # TOSA casts i64 only to and from i32: through i32 (indices and ids fit it).
        value = ctx.b.op("cast", [value], tensor_type(x.physical_shape, I32))
    if {type(x.element), type(element)} == {Float16Type, BFloat16Type}:
        # TOSA casts between f16 and bf16 only through f32 (exact from either; one rounding)
        value = ctx.b.op("cast", [value], tensor_type(x.physical_shape, Float32Type()))
    out = ctx.b.op("cast", [value], tensor_type(x.physical_shape, element))
    return [ctx.new(out, x.shape, element, x.channels_last)]


@rule("tile")
def tile(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    shape = result_shape(op)
    repeats = [int(r) for r in attrs["repeats"]]
    return [ctx.logical_result("tile", [ctx.b.logical(x), ctx.b.shape(repeats)], shape, x.element)]


@rule("expand")
def expand(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = ctx.expand(inputs[0], len(result_shape(op)))
    shape = result_shape(op)
    repeats = [out // size for out, size in zip(shape, x.shape, strict=True)]
    if x.const is not None:
        return [Val(shape, x.element, const=np.broadcast_to(x.const, shape).copy())]
    return [ctx.logical_result("tile", [ctx.b.logical(x), ctx.b.shape(repeats)], shape, x.element)]


@rule("where")
def where(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    cond, x, y = inputs  # a TPU op holds its mask as int8 0 and 1: select takes i1
    return [ctx.elementwise("select", [truth(ctx, cond), x, y], result_shape(op), result_element(op))]


@rule("fold_taps")
def fold_taps(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """Each tap's window (a strided box of the zero-padded input) concatenated along channels."""
    x = inputs[0]
    (kh, kw), (sh, sw) = (list(attrs[k]) for k in ("kernel_shape", "strides"))
    n, c, oh, ow = result_shape(op)
    top, left, bottom, right = (int(p) for p in attrs.get("pads") or [0, 0, 0, 0])
    if top or left or bottom or right:
        padded = (n, x.shape[1], x.shape[2] + top + bottom, x.shape[3] + left + right)
        x = constant_pad(ctx, x, [0, 0, top, left], [0, 0, bottom, right], 0.0, padded, x.element)
    windows = []
    for i, j in itertools.product(range(int(kh)), range(int(kw))):
        rows, cols = np.arange(oh) * int(sh) + i, np.arange(ow) * int(sw) + j
        stepped = {a: r for a, r, step in ((2, rows, sh), (3, cols, sw)) if int(step) != 1}
        windows.append(strided_box(ctx, x, [0, 0, i, j], [n, x.shape[1], oh, ow], stepped))
    last = any(v.channels_last for v in windows if v.const is None)
    out = ctx.b.op("concat", [ctx.b.materialize(v, last) for v in windows],
                   tensor_type([(n, c, oh, ow)[p] for p in NHWC] if last else [n, c, oh, ow], x.element),
                   axis=int32(NHWC.index(1) if last else 1))
    return [ctx.new(out, (n, c, oh, ow), x.element, last)]


@rule("depth2space")
def depth2space(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    n, c, h, w = x.shape
    b = int(attrs["block_size"])
    shape = result_shape(op)
    crd = attrs.get("mode", "DCR") == "CRD"
    if attrs.get("inverse"):  # space-to-depth
        six = [n, c, h // b, b, w // b, b]
        perm = [0, 1, 3, 5, 2, 4] if crd else [0, 3, 5, 1, 2, 4]
        moved = ctx.b.transpose(ctx.b.reshape(ctx.b.logical(x), six), perm)
        return [ctx.new(ctx.b.reshape(moved, shape), shape, x.element)]
    six = [n, c // (b * b), b, b, h, w] if crd else [n, b, b, c // (b * b), h, w]
    perm = [0, 1, 4, 2, 5, 3] if crd else [0, 3, 4, 1, 5, 2]
    value = ctx.b.reshape(ctx.b.logical(x), six)
    moved = ctx.b.transpose(value, perm)
    return [ctx.new(ctx.b.reshape(moved, shape), shape, x.element)]
