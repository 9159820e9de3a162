"""Which part of each operand a slice of an op's output needs (backward slice inference).

An op's output is cut into boxes (N first, then H, then C); for each box an
op family says which box of each operand it reads and the op's attributes for
that slice (pads of the window at the slice's edges, the per-channel
multipliers of its channels, ...). Running the op's kernel on the operand
boxes with those attributes gives exactly the output box (for integer
kernels bit for bit).

A box is a tuple of (start, size) per dim. Families:

- elementwise: operands broadcast against the output (numpy rules), or along
  axis 1 for per-channel vectors (scale, batch_norm, per-channel cast scales,
  lookup-table rows; along `channel_axis` when the op has one, the last axis
  of a features-last INT8 tensor);
- window (conv, max_pool, avg_pool): N, output channels and output rows (3-D: frames
  and rows); input rows with the window's halo, the pads moved to the slice's edges;
  fold_taps (a stem's taps folded into channels, `first_conv`) alike, on N and rows;
- deconv: N, output channels and output rows through the transposed window;
- matmul: batch dims, rows and columns;
- rows (softmax, layer_norm, reduce, ...): every axis the op does not reduce;
- resize (interp, upsample): N and channels, and rows for nearest ones (the input rows
  the output rows copy);
- concat (with requantization): every axis but the concat axis;
- grid_sample: N, channels and the output points (the input whole spatially);
- whole: ops that cannot be cut.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tpu_xdsl.kernels import op_kinds
from tpu_xdsl.kernels.conv_pool import spatial_params

Box = tuple[tuple[int, int], ...]

# Rank-1 constant operands of these ops run along axis 1 (per channel), not the last axis.
CHANNEL_VECTORS = {"scale", "batch_norm"}


def whole(shape: Sequence[int]) -> Box:
    return tuple((0, int(d)) for d in shape)


def sizes(box: Box) -> tuple[int, ...]:
    return tuple(s for _, s in box)


def split_axis(size: int, parts: int) -> list[tuple[int, int]]:
    """`size` cut into `parts` nearly equal (start, size) pieces."""
    parts = max(1, min(parts, size))
    step = math.ceil(size / parts)
    return [(start, min(step, size - start)) for start in range(0, size, step)]


@dataclass
class SlicePlan:
    """One slice of an op: the output boxes, each operand's box (None: the operand is
    absent or read whole once, see `resident`), and the kernel attributes."""

    outputs: list[Box]
    operands: list[Box | None]
    attrs: dict[str, Any]


@dataclass(frozen=True)
class OpShape:
    """What slicing needs of an op: its kind, attributes (Python values), operand shapes
    (None for an absent operand), which operands are constants, result shapes."""

    kind: str
    attrs: dict[str, Any]
    operands: tuple[tuple[int, ...] | None, ...]
    constants: tuple[bool, ...]
    results: tuple[tuple[int, ...], ...]


def splittable_axes(op: OpShape) -> list[int]:
    """Output axes the op may be cut along, in the order to try (N, H, C, others)."""
    out = op.results[0]
    rank = len(out)
    kind = op.kind
    if len(op.results) != 1:
        return []
    if kind in op_kinds.ELEMENTWISE:
        if kind == "lut" and op.operands[1] is not None and len(op.operands[1]) == 2 and rank < 2:
            return []
        return _nhc(rank)
    if kind == "fold_taps":
        # An output channel mixes a tap and an input channel: not cut. Only whole folds
        # (columns too) are cut along rows: a fold by rows keeps the input's width and
        # runs alone (`first_conv`).
        return [0, 2] if rank == 4 and list(op.attrs.get("kernel_shape") or [1, 1])[1] > 1 else []
    if kind in op_kinds.WINDOW:
        if rank not in (4, 5):
            return [0]
        group = int(op.attrs.get("group", 1))
        channels = kind != "conv" or group == 1 or (op.operands[0] is not None and group == op.operands[0][1] == out[1])
        # 3-D windows (video) also cut frames (axis 2) and rows (axis 3).
        spatial = [2] if rank == 4 else [2, 3]
        return [0, *spatial, 1] if channels else [0, *spatial]
    if kind == "deconv":
        return [0, 2, 1] if rank == 4 and int(op.attrs.get("group", 1)) == 1 else [0]
    if kind == "matmul":
        if op.attrs.get("left_transpose"):
            return []
        return [*range(rank - 2), rank - 2, rank - 1] if rank >= 2 else []
    if kind in op_kinds.RESIZE:
        if rank != 4:
            return []
        return [0, 2, 1] if _nearest(op) else [0, 1]
    if kind in ("softmax", "log_softmax"):
        axis = int(op.attrs.get("axis", -1)) % rank
        return [a for a in _nhc(rank) if a != axis]
    if kind == "layer_norm":
        axis = int(op.attrs.get("axis", -1)) % rank
        return [a for a in _nhc(rank) if a < axis]
    if kind == "reduce":
        if len(out) != len(op.operands[0] or ()):  # without keepdims: every output axis is kept
            return _nhc(rank)
        reduced = _reduced_axes(op)
        return [a for a in _nhc(rank) if a not in reduced]
    if kind == "concat":
        axis = int(op.attrs.get("axis", 0)) % rank
        return [a for a in _nhc(rank) if a != axis]
    if kind == "grid_sample":
        return [0, 2, 1]
    return []


def _nhc(rank: int) -> list[int]:
    """N, H, C, then the remaining axes."""
    order = [a for a in (0, 2, 1) if a < rank]
    return order + [a for a in range(rank) if a not in order]


def _reduced_axes(op: OpShape) -> set[int]:
    rank = len(op.operands[0] or ())
    axes = op.attrs.get("axes") or list(range(rank))
    return {int(a) % rank for a in axes}


def plan(op: OpShape, out_box: Box) -> SlicePlan:
    """The operand boxes and attributes for output box `out_box`."""
    kind = op.kind
    if kind in op_kinds.ELEMENTWISE:
        return _elementwise(op, out_box)
    if kind in op_kinds.WINDOW or kind == "fold_taps":
        return _window(op, out_box)
    if kind == "deconv":
        return _deconv(op, out_box)
    if kind == "matmul":
        return _matmul(op, out_box)
    if kind in ("softmax", "log_softmax", "layer_norm", "reduce"):
        return _rows(op, out_box)
    if kind in op_kinds.RESIZE:
        return _resize(op, out_box)
    if kind == "concat":
        return _concat(op, out_box)
    if kind == "grid_sample":
        return _grid_sample(op, out_box)
    if out_box != whole(op.results[0]):
        raise ValueError(f"{kind} cannot be sliced")
    operands = [None if s is None else whole(s) for s in op.operands]
    return SlicePlan([whole(r) for r in op.results], operands, dict(op.attrs))


# -- families ---------------------------------------------------------------------------------


def _channel_range(out_box: Box) -> tuple[int, int]:
    return out_box[1] if len(out_box) > 1 else (0, 1)


def _channel_attrs(attrs: dict[str, Any], kind: str, channels: int, box: tuple[int, int]) -> dict[str, Any]:
    """Per-channel multipliers/shifts (axis 1) restricted to the channels `box`."""
    start, size = box
    if channels <= 1 or (start, size) == (0, channels):
        return dict(attrs)
    sliced = dict(attrs)
    for key in ("multiplier", "rshift"):
        values = attrs.get(key)
        if not values:
            continue
        if kind in ("add", "sub") and key == "multiplier" and len(values) == 2 * channels:
            sliced[key] = list(values[start : start + size]) + list(values[channels + start : channels + start + size])
        elif len(values) == channels:
            sliced[key] = list(values[start : start + size])
    return sliced


def _broadcast_box(shape: Sequence[int], out_box: Box) -> Box:
    """The box of an operand broadcast (numpy rules) against the output box."""
    offset = len(out_box) - len(shape)
    return tuple((0, 1) if d == 1 else out_box[offset + j] for j, d in enumerate(shape))


def _elementwise(op: OpShape, out_box: Box) -> SlicePlan:
    out = op.results[0]
    # A requant names its channel axis `axis`; other ops `channel_axis` (absent: 1).
    key = "axis" if op.kind == "requant" else "channel_axis"
    axis = int(op.attrs.get(key, 1) or 1) % max(len(out), 1)
    channels = out[axis] if len(out) > 1 else 1
    crange = out_box[axis] if len(out_box) > 1 else (0, 1)
    boxes: list[Box | None] = []
    for index, shape in enumerate(op.operands):
        if shape is None:
            boxes.append(None)
        elif op.kind == "lut" and index == 1:  # the table: [256] or a row per channel
            boxes.append(((crange[0], crange[1]), (0, 256)) if len(shape) == 2 else whole(shape))
        elif (  # per-channel scales
            op.kind == "cast" and index == 1
            or op.kind in CHANNEL_VECTORS and index > 0 and len(shape) == 1 and shape[0] == channels
        ):
            boxes.append((crange,))
        else:
            boxes.append(_broadcast_box(shape, out_box))
    return SlicePlan([out_box], boxes, _channel_attrs(op.attrs, op.kind, channels, crange))


def _window_rows(out_start: int, out_size: int, in_size: int, kernel: int, stride: int, dilation: int,
                 pad_begin: int, pad_end: int) -> tuple[tuple[int, int], int, int]:
    """Input rows (start, size) for output rows [out_start, out_start + out_size), and the
    pads of the slice (never more than the op's own)."""
    first = out_start * stride - pad_begin
    last = (out_start + out_size - 1) * stride - pad_begin + (kernel - 1) * dilation  # inclusive
    start, end = max(0, first), min(in_size, last + 1)
    return (start, max(0, end - start)), min(pad_begin, max(0, -first)), min(pad_end, max(0, last + 1 - in_size))


def _window(op: OpShape, out_box: Box) -> SlicePlan:
    x_shape = op.operands[0]
    assert x_shape is not None
    out = op.results[0]
    attrs = dict(op.attrs)
    spatial = len(out) - 2
    kernel, strides, pads, dilations = spatial_params(attrs, spatial)
    (n0, nn), (c0, cn) = out_box[0], out_box[1]
    in_box = [(n0, nn), (0, x_shape[1])] + [(0, d) for d in x_shape[2:]]
    group = int(attrs.get("group", 1))
    # Pools and depthwise convs read the channels they write; a conv or a fold reads all.
    per_channel_input = op.kind in op_kinds.POOL or (
        op.kind == "conv" and group > 1 and group == x_shape[1] == out[1]
    )
    if per_channel_input:
        in_box[1] = (c0, cn)
        if op.kind == "conv":
            attrs["group"] = cn
    if spatial in (2, 3):
        # The cut spatial axes (2-D: rows; 3-D: frames and rows) read their window's halo;
        # the slice's pads are the op's own only at the edges of the input.
        pads = list(pads)
        for s in range(spatial - 1):
            rows, begin, end = _window_rows(out_box[2 + s][0], out_box[2 + s][1], x_shape[2 + s], kernel[s],
                                            strides[s], dilations[s], pads[s], pads[s + spatial])
            in_box[2 + s] = rows
            pads[s], pads[s + spatial] = begin, end
        attrs["pads"] = pads
    boxes: list[Box | None] = [tuple(in_box)]
    for shape in op.operands[1:]:  # filter [OC, IC/g, ...] and bias [OC]
        if shape is None:
            boxes.append(None)
        else:
            boxes.append(((c0, cn), *whole(shape[1:])))
    return SlicePlan([out_box], boxes, _channel_attrs(attrs, op.kind, out[1], (c0, cn)))


def _deconv(op: OpShape, out_box: Box) -> SlicePlan:
    x_shape = op.operands[0]
    assert x_shape is not None
    out = op.results[0]
    attrs = dict(op.attrs)
    spatial = len(out) - 2
    (n0, nn), (c0, cn) = out_box[0], out_box[1]
    in_box = [(n0, nn)] + [(0, d) for d in x_shape[1:]]
    if spatial == 2 and out_box[2] != (0, out[2]):
        kernel, strides, pads, dilations = spatial_params(attrs, spatial)
        out_pad = list(attrs.get("output_padding") or [0] * spatial)
        o0, on = out_box[2]
        s, k, d, p = strides[0], kernel[0], dilations[0], pads[0]
        # Output row o (before cropping p rows) takes input rows i with i*s <= o + p <= i*s + (k-1)*d.
        first = max(0, math.ceil((o0 + p - (k - 1) * d) / s))
        last = min(x_shape[2] - 1, (o0 + on - 1 + p) // s)
        in_box[2] = (first, last - first + 1)
        full = (last - first) * s + (k - 1) * d + 1
        begin = o0 + p - first * s
        pads = [begin, pads[1], 0, pads[3]]
        attrs["pads"] = pads
        attrs["output_padding"] = [max(0, begin + on - full), out_pad[1]]
    boxes: list[Box | None] = [tuple(in_box)]
    grouped = int(attrs.get("group", 1)) != 1  # not cut along channels (`_axes`)
    for index, shape in enumerate(op.operands[1:], start=1):  # filter [C, OC / group, ...], bias [OC]
        if shape is None:
            boxes.append(None)
        elif index == 1:
            boxes.append(whole(shape) if grouped else ((0, shape[0]), (c0, cn), *whole(shape[2:])))
        else:
            boxes.append(((c0, cn),))
    return SlicePlan([out_box], boxes, _channel_attrs(attrs, op.kind, out[1], (c0, cn)))


def _matmul(op: OpShape, out_box: Box) -> SlicePlan:
    a_shape, b_shape, bias_shape = op.operands
    assert a_shape is not None and b_shape is not None
    out = op.results[0]
    rank = len(out)
    rows, cols = out_box[rank - 2], out_box[rank - 1]
    batch = out_box[: rank - 2]
    a_box = _broadcast_box(a_shape[:-2], batch) + (rows, (0, a_shape[-1]))
    if op.attrs.get("right_transpose"):
        b_box = _broadcast_box(b_shape[:-2], batch) + (cols, (0, b_shape[-1]))
    else:
        b_box = _broadcast_box(b_shape[:-2], batch) + ((0, b_shape[-2]), cols)
    bias_box = None if bias_shape is None else _broadcast_box(bias_shape, out_box)
    attrs = dict(op.attrs)
    for key in ("multiplier", "rshift"):
        values = attrs.get(key)
        if values and len(values) == out[-1] > 1:
            attrs[key] = list(values[cols[0] : cols[0] + cols[1]])
    return SlicePlan([out_box], [a_box, b_box, bias_box], attrs)


def _rows(op: OpShape, out_box: Box) -> SlicePlan:
    x_shape = op.operands[0]
    assert x_shape is not None
    out = op.results[0]
    # Output axis j is input axis kept[j]: the same axis, or for a reduce without keepdims
    # the j-th axis it does not reduce.
    kept = list(range(len(x_shape))) if len(out) == len(x_shape) else [
        a for a in range(len(x_shape)) if a not in _reduced_axes(op)
    ]
    in_box = list(whole(x_shape))
    for j, a in enumerate(kept):
        if out[j] == x_shape[a]:
            in_box[a] = out_box[j]
    boxes: list[Box | None] = [tuple(in_box)]
    for shape in op.operands[1:]:
        boxes.append(None if shape is None else whole(shape))
    # An INT8 reduce requantizes with one multiplier per output channel (axis 1) when it has them.
    channels = out[1] if len(out) > 1 else 1
    return SlicePlan([out_box], boxes, _channel_attrs(op.attrs, op.kind, channels, _channel_range(out_box)))


def _concat(op: OpShape, out_box: Box) -> SlicePlan:
    """Each input's part of the output box: the same box, whole along the concat axis (the
    output box never cuts that axis)."""
    axis = int(op.attrs.get("axis", 0)) % len(out_box)
    boxes: list[Box | None] = []
    for shape in op.operands:
        assert shape is not None
        boxes.append(tuple((0, shape[a]) if a == axis else out_box[a] for a in range(len(out_box))))
    attrs = dict(op.attrs)
    inputs = len(op.operands)
    if len(attrs.get("multiplier") or []) > inputs:  # C per input, per channel of `channel_axis`
        channel = int(attrs.get("channel_axis", 1) or 1) % len(out_box)
        count = op.results[0][channel]
        start, size = out_box[channel]
        for key in ("multiplier", "rshift"):
            values = list(attrs[key])
            attrs[key] = [v for i in range(inputs) for v in values[i * count + start : i * count + start + size]]
    return SlicePlan([out_box], boxes, attrs)


def _nearest(op: OpShape) -> bool:
    """A resize whose output rows each copy one input row: upsample, nearest interp."""
    return op.kind == "upsample" or (op.kind == "interp" and op.attrs.get("mode") == "nearest")


def _resize(op: OpShape, out_box: Box) -> SlicePlan:
    """N and channels of the box; for a nearest resize also rows: the input rows its
    output rows copy (the kernel's own map, `source_rows`), with the map given to the
    kernel relative to them. Columns whole."""
    x_shape = op.operands[0]
    assert x_shape is not None
    rows_box = whole(x_shape[2:])
    attrs = dict(op.attrs)
    start, size = out_box[2]
    if (start, size) != (0, op.results[0][2]):
        if not _nearest(op):
            raise ValueError(f"{op.kind} in mode {op.attrs.get('mode')} cannot be cut along its rows")
        rows = source_rows(op)[start : start + size]
        low = int(rows.min())
        rows_box = ((low, int(rows.max()) - low + 1), *rows_box[1:])
        attrs["source_rows"] = [int(r) - low for r in rows]
    box = (out_box[0], out_box[1], *rows_box)
    return SlicePlan([out_box], [box, *(None if s is None else whole(s) for s in op.operands[1:])], attrs)


def source_rows(op: OpShape) -> np.ndarray:
    """The input row each output row of a nearest resize copies: its kernel run on the
    row numbers."""
    from tpu_xdsl.kernels import ResultSpec, load_all

    x_shape, out = op.operands[0], op.results[0]
    assert x_shape is not None
    index = np.arange(x_shape[2], dtype=np.float64).reshape(1, 1, -1, 1)
    (mapped,) = load_all()[op.kind]([index], dict(op.attrs), [ResultSpec((1, 1, out[2], 1), np.dtype(np.float64))])
    return np.asarray(mapped)[0, 0, :, 0].astype(np.int64)


def _grid_sample(op: OpShape, out_box: Box) -> SlicePlan:
    """Output [N, C, *out]: the input's N and channels whole spatially (a point may read
    anywhere), the grid's N and the output points of the box."""
    x_shape, grid_shape = op.operands
    assert x_shape is not None and grid_shape is not None
    x_box = (out_box[0], out_box[1], *whole(x_shape[2:]))
    grid_box = (out_box[0], *out_box[2:], (0, grid_shape[-1]))
    return SlicePlan([out_box], [x_box, grid_box], dict(op.attrs))
