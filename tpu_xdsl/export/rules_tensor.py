"""TOP data movement (reshape, transpose, slice, pad, gather, resize, ...) -> TOSA."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from xdsl.ir import Operation

from tpu_xdsl.export.rules import (
    Context,
    ExportError,
    ShapedOp,
    op_kind,
    result_element,
    result_shape,
    rule,
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
    x = inputs[0]
    shape = result_shape(op)
    starts, ends, axes, steps = (list(attrs[k]) for k in ("starts", "ends", "axes", "steps"))
    begin = [0] * x.rank
    step = [1] * x.rank
    for start, end, axis, s in zip(starts, ends, axes, steps, strict=True):
        axis = int(axis) % x.rank
        size = x.shape[axis]
        begin[axis] = int(slice(start, end, s).indices(size)[0])
        step[axis] = int(s)
    if any(s != 1 for s in step):
        raise ExportError(f"{op.name}: slices with steps other than 1 do not export to TOSA")
    if x.const is not None:
        index = tuple(slice(b, b + n) for b, n in zip(begin, shape, strict=True))
        return [Val(shape, x.element, const=x.const[index])]
    last = x.channels_last
    order = NHWC if last else tuple(range(x.rank))
    out = ctx.b.op("slice", [ctx.b.materialize(x, last), ctx.b.shape([begin[p] for p in order]),
                             ctx.b.shape([shape[p] for p in order])],
                   tensor_type([shape[p] for p in order], x.element))
    return [ctx.new(out, shape, x.element, last)]


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
    x = inputs[0]
    if attrs.get("mode", "constant") != "constant":
        raise ExportError(f"{op.name}: pad mode {attrs.get('mode')} does not export to TOSA (constant only)")
    pads = [int(p) for p in attrs["pads"]]
    if any(p < 0 for p in pads):
        raise ExportError(f"{op.name}: negative pads do not export to TOSA")
    rank = x.rank
    padding = [v for axis in range(rank) for v in (pads[axis], pads[axis + rank])]
    shape, element = result_shape(op), result_element(op)
    value = np.full(1, float(attrs.get("value", 0.0)), numpy_dtype(element))
    last = x.channels_last
    order = NHWC if last else tuple(range(rank))
    physical_padding = [v for a in order for v in padding[2 * a:2 * a + 2]]
    out = ctx.b.op("pad", [ctx.b.materialize(x, last), ctx.b.shape(physical_padding), ctx.b.const(value)],
                   tensor_type([shape[p] for p in order], element))
    return [ctx.new(out, shape, element, last)]


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
    out = ctx.b.op("cast", [ctx.b.materialize(x, x.channels_last)], tensor_type(x.physical_shape, element))
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
    return [ctx.elementwise("select", inputs, result_shape(op), result_element(op))]


@rule("depth2space")
def depth2space(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x = inputs[0]
    n, c, h, w = x.shape
    b = int(attrs["block_size"])
    shape = result_shape(op)
    if attrs.get("inverse"):
        raise ExportError(f"{op.name}: space-to-depth does not export to TOSA yet")
    crd = attrs.get("mode", "DCR") == "CRD"
    six = [n, c // (b * b), b, b, h, w] if crd else [n, b, b, c // (b * b), h, w]
    perm = [0, 1, 4, 2, 5, 3] if crd else [0, 3, 4, 1, 5, 2]
    value = ctx.b.reshape(ctx.b.logical(x), six)
    moved = ctx.b.transpose(value, perm)
    return [ctx.new(ctx.b.reshape(moved, shape), shape, x.element)]
