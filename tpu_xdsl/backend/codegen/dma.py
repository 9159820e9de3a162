"""Ops that only move data, emitted as DMA copies DDR -> DDR through strided views.

Reshape, permute, slice, expand, depth2space, nearest resizes and the like become
one strided copy when their kernel maps output elements to input elements affinely
(`strided.strided_view`); split, concat without rescaling, pad and tile become a few
copies (and a fill). Every function returns whether it emitted the op: when it did
not, codegen computes the op in local memory instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.ir import Operation

from tpu_xdsl.backend.codegen.state import CodegenState, DdrTensor, dtype_size
from tpu_xdsl.backend.codegen.strided import strided_view
from tpu_xdsl.device.isa import DdrView, DmaCopy, DmaFill
from tpu_xdsl.kernels import ResultSpec, load_all

_REORDER = {
    "reshape", "flatten", "squeeze", "unsqueeze", "permute", "slice", "expand", "depth2space", "upsample",
}


def reorders(kind: str, attrs: dict[str, Any]) -> bool:
    """Whether the op only moves elements (its kernel on an index array says where from);
    a resize only in nearest mode (the others compute new values)."""
    return kind in _REORDER or kind == "interp" and attrs.get("mode") == "nearest"


def _copy(state: CodegenState, src: DdrView, dst: DdrView, layer: str) -> int:
    return state.program.emit(DmaCopy, src, dst, layer=layer)


def emit_reorder(state: CodegenState, op: Operation, attrs: dict[str, Any], layer: str) -> bool:
    """One strided copy when the op's kernel maps output elements to input elements affinely."""
    source = state.places[op.operands[0]]
    target = state.places[op.results[0]]
    index = np.arange(int(np.prod(source.shape)), dtype=np.int64).reshape(source.shape)
    kind = op.name.split(".", 1)[1]
    (mapped,) = load_all()[kind]([index], attrs, [ResultSpec(target.shape, np.dtype(np.int64))])
    found = strided_view(np.asarray(mapped))
    if found is None:
        return False
    offset, shape, steps = found
    size = dtype_size(source.dtype)
    src = DdrView(source.addr + offset * size, source.dtype, shape, steps)
    dst = DdrView.contiguous(target.addr, target.dtype, shape)
    state.written_by[op.results[0]] = _copy(state, src, dst, layer)
    return True


def emit_move(state: CodegenState, op: Operation, kind: str, attrs: dict[str, Any], layer: str) -> bool:
    """split, concat (without rescaling), pad or tile as copies; False for others."""
    emit = _MOVES.get(kind)
    return emit is not None and emit(state, op, attrs, layer)


def _concat(state: CodegenState, op: Operation, attrs: dict[str, Any], layer: str) -> bool:
    """Each input copied into its part of the output."""
    if attrs.get("multiplier"):
        return False
    target = state.places[op.results[0]]
    axis = int(attrs["axis"]) % len(target.shape)
    start = 0
    last = -1
    for value in op.operands:
        part = state.places[value]
        box = [(0, d) for d in target.shape]
        box[axis] = (start, part.shape[axis])
        dst = target.view().box(tuple(s for s, _ in box), tuple(n for _, n in box))
        last = _copy(state, part.view(), dst, layer)
        start += part.shape[axis]
    state.written_by[op.results[0]] = last
    return True


def _split(state: CodegenState, op: Operation, attrs: dict[str, Any], layer: str) -> bool:
    """Each output copied from its part of the input."""
    source = state.places[op.operands[0]]
    axis = int(attrs.get("axis", 0)) % len(source.shape)
    start = 0
    for value in op.results:
        part = state.places[value]
        starts = tuple(start if a == axis else 0 for a in range(len(source.shape)))
        state.written_by[value] = _copy(state, source.view().box(starts, part.shape), part.view(), layer)
        start += part.shape[axis]
    return True


def _tile(state: CodegenState, op: Operation, attrs: dict[str, Any], layer: str) -> bool:
    """One copy whose source repeats each axis (stride 0) as often as the tile says."""
    source, target = state.places[op.operands[0]], state.places[op.results[0]]
    repeats = [int(r) for r in attrs["repeats"]]
    dst_strides = target.view().strides
    shape, dst_s, src_s = [], [], []
    for r, d, ts, ss in zip(repeats, source.shape, dst_strides, source.view().strides, strict=True):
        shape += [r, d]
        dst_s += [d * ts, ts]
        src_s += [0, ss]
    src = DdrView(source.addr, source.dtype, tuple(shape), tuple(src_s))
    dst = DdrView(target.addr, target.dtype, tuple(shape), tuple(dst_s))
    state.written_by[op.results[0]] = _copy(state, src, dst, layer)
    return True


def _pad(state: CodegenState, op: Operation, attrs: dict[str, Any], layer: str) -> bool:
    """The input copied into the middle of the output; around it the constant (a fill
    first), or for reflect and edge modes copies of the output's own rows read
    backwards (stride -1) or repeated (stride 0), one axis after the other."""
    mode = attrs.get("mode", "constant")
    pads = [int(p) for p in attrs["pads"]]
    source, target = state.places[op.operands[0]], state.places[op.results[0]]
    rank = len(source.shape)
    begins, ends = pads[:rank], pads[rank:]
    if min(pads, default=0) < 0 or mode not in ("constant", "reflect", "edge"):
        return False
    if mode == "reflect" and any(max(b, e) >= d for b, e, d in zip(begins, ends, source.shape)):
        return False  # reflections of reflections
    if mode == "constant":
        state.program.emit(DmaFill, target.view(), float(attrs.get("value", 0.0)), layer=layer)
    last = _copy(state, source.view(), target.view().box(tuple(begins), source.shape), layer)
    border = None if mode == "constant" else _pad_borders(state, source, target, begins, ends, mode == "reflect", layer)
    if border is not None:
        last = border
    state.written_by[op.results[0]] = last
    return True


def _pad_borders(state: CodegenState, source: DdrTensor, target: DdrTensor, begins: list[int], ends: list[int],
                 reflect: bool, layer: str) -> int | None:
    """The borders of a reflect or edge pad, axis by axis; the last copy (None: no border)."""
    last = None
    for axis, (begin, end) in enumerate(zip(begins, ends)):
        inner = begin + source.shape[axis]  # one past the input's last row

        def rows(start: int, size: int, step: int, axis: int = axis) -> DdrView:
            return _pad_rows(source, target, begins, axis, start, size, step)

        if begin:
            src = rows(2 * begin if reflect else begin, begin, -1 if reflect else 0)
            last = _copy(state, src, rows(0, begin, 1), layer)
        if end:
            src = rows(inner - 2 if reflect else inner - 1, end, -1 if reflect else 0)
            last = _copy(state, src, rows(inner, end, 1), layer)
    return last


def _pad_rows(source: DdrTensor, target: DdrTensor, begins: list[int], axis: int, start: int, size: int,
              step: int) -> DdrView:
    """Along `axis` rows start, start + step, ... of the padded output; axes before it
    whole (their borders are done), axes after it the input's part."""
    rank = len(source.shape)
    starts = [0 if a < axis else begins[a] for a in range(rank)]
    sizes = [target.shape[a] if a < axis else source.shape[a] for a in range(rank)]
    starts[axis], sizes[axis] = start, size
    box = target.view().box(tuple(starts), tuple(sizes))
    strides = list(box.strides)
    strides[axis] *= step
    return DdrView(box.addr, box.dtype, box.shape, tuple(strides))


def _fold_taps(state: CodegenState, op: Operation, attrs: dict[str, Any], layer: str) -> bool:
    """Per tap, its window's rows and columns inside the input as one strided copy into the
    tap's channels, and the strips of padding around them as fills of zeros."""
    source, target = state.places[op.operands[0]], state.places[op.results[0]]
    n, c = source.shape[:2]
    sh, sw = (int(s) for s in attrs["strides"])
    src_strides = source.view().strides
    strides = (src_strides[0], src_strides[1], src_strides[2] * sh, src_strides[3] * sw)
    last = -1
    for tap, (r0, q0, rows, cols), (row, col), strips in fold_plan(source.shape, target.shape, attrs):
        box = target.view().box((0, tap * c, 0, 0), (n, c, *target.shape[2:]))
        for at_r, at_q, fill_rows, fill_cols in strips:
            last = state.program.emit(DmaFill, box.box((0, 0, at_r, at_q), (n, c, fill_rows, fill_cols)), 0.0,
                                      layer=layer)
        if rows and cols:
            start = source.view().box((0, 0, row, col), (n, c, rows, cols))
            src = DdrView(start.addr, start.dtype, start.shape, strides)
            last = _copy(state, src, box.box((0, 0, r0, q0), (n, c, rows, cols)), layer)
    state.written_by[op.results[0]] = last
    return True


Box4 = tuple[int, int, int, int]  # first row, first column, rows, columns


def fold_plan(
    in_shape: tuple[int, ...], out_shape: tuple[int, ...], attrs: dict[str, Any]
) -> list[tuple[int, Box4, tuple[int, int], list[Box4]]]:
    """A `fold_taps` op's DMA work per tap: (tap, the box of its output rows and columns read
    from inside the input, the input row and column that box starts at, the strips around
    it that the padding fills)."""
    h, w = in_shape[2:]
    oh, ow = out_shape[2:]
    kh, kw = (int(k) for k in attrs["kernel_shape"])
    sh, sw = (int(s) for s in attrs["strides"])
    top, left = (int(p) for p in (attrs.get("pads") or [0, 0, 0, 0])[:2])
    plan = []
    for i in range(kh):
        r0, r1 = _inside(i - top, sh, h, oh)
        for j in range(kw):
            q0, q1 = _inside(j - left, sw, w, ow)
            strips = [(0, 0, r0, ow), (r1, 0, oh - r1, ow), (r0, 0, r1 - r0, q0), (r0, q1, r1 - r0, ow - q1)]
            plan.append((i * kw + j, (r0, q0, r1 - r0, q1 - q0), (i - top + r0 * sh, j - left + q0 * sw),
                         [s for s in strips if s[2] > 0 and s[3] > 0]))
    return plan


def _inside(offset: int, step: int, size: int, count: int) -> tuple[int, int]:
    """[first, end) of the k in [0, count) with offset + k * step in [0, size)."""
    first = -(offset // step) if offset < 0 else 0
    end = min(count, (size - 1 - offset) // step + 1) if size - 1 - offset >= 0 else 0
    first = min(first, count)
    return first, max(first, end)


_MOVES = {"concat": _concat, "split": _split, "pad": _pad, "tile": _tile, "fold_taps": _fold_taps}
