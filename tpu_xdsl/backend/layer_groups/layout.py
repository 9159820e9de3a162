"""The local memory of a layer group: where each lane keeps its tensors.

Streamed tensors (one or two buffers each: two when the group runs more than one
step, so that loads and stores overlap computes) and each member's local copies
go from lane address 0, each on a bank boundary when they all fit that way
(packed to the execution units otherwise); the weights, loaded once, go above
them, first fit in member order, first into space clear of what the group
before uses (there they can be loaded while it runs). `layout_problem` checks
a layout read back from the IR against the one the plan needs.

No xDSL here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tpu_xdsl.backend import slicing
from tpu_xdsl.backend.layer_groups.steps import Member, Step


@dataclass
class Layout:
    """Where a group keeps its tensors in each lane: constants once (`resident`), every
    streamed tensor in `buffers` buffers of `sizes[key]` bytes from `streamed[key]`
    (buffer b at streamed[key] + b * sizes[key]), and each member's local copies in a
    buffer of its own (`buffer[m]`, `buffer_sizes[m]`, buffer b likewise; the copies of
    member m one after the other in operand order, at `copy_offsets`). `banked`: every
    streamed buffer starts on a bank boundary, so an op's inputs and output never share
    a bank (the chip reads and writes one bank per cycle)."""

    buffers: int
    resident: dict[str, int]
    resident_sizes: dict[str, int]
    streamed: dict[str, int]
    sizes: dict[str, int]
    buffer: dict[int, int]
    buffer_sizes: dict[int, int]
    copy_offsets: dict[tuple[int, int], int]
    total: int
    banked: bool
    # Bytes per lane each streamed tensor and each member's copies need at the least.
    minimum: dict[str, int] = field(default_factory=dict)
    buffer_minimum: dict[int, int] = field(default_factory=dict)


def _up(size: int, align: int) -> int:
    return -(-size // align) * align


@dataclass
class _Needs:
    """Bytes per lane a group's tensors need at the least: each weight (its planes packed
    or execution-unit aligned, `compact_weights`; its size rounded up to one), each
    streamed tensor and each local copy (member, operand) at its largest box over the
    steps (execution-unit aligned); copies in (member, operand) order."""

    buffers: int
    weights: dict[str, int]
    streamed: dict[str, int]
    copies: dict[tuple[int, int], int]


def compact_weights(members: Sequence[Member]) -> set[str]:
    """The weights a group keeps without execution-unit padding between their planes: a
    convolution's or deconvolution's filter and bias (operands 1 and 2), as TPU-MLIR keeps
    them on BM168x (its `is_eu_align`); a weight any other op reads keeps aligned planes.
    Each still starts on an execution unit."""
    compact: set[str] = set()
    aligned: set[str] = set()
    for member in members:
        for index, key in enumerate(member.operands):
            if key is not None:
                filters = member.shape.kind in ("conv", "deconv") and index in (1, 2)
                (compact if filters else aligned).add(key)
    return compact - aligned


def _needs(
    members: Sequence[Member], steps: Sequence[Step], constants: set[str],
    lane_bytes: Callable[..., int], dtypes: dict[str, str], eu_bytes: int,
) -> _Needs:
    weights: dict[str, int] = {}
    compact = compact_weights(members)
    for member in members:
        for key, shape in zip(member.operands, member.shape.operands, strict=True):
            if key is not None and key in constants and key not in weights:
                assert shape is not None
                weights[key] = _up(lane_bytes(dtypes[key], slicing.whole(shape), True, key not in compact), eu_bytes)
    streamed = {k: _up(max(lane_bytes(dtypes[k], s.boxes[k], False) for s in steps), eu_bytes) for k in steps[0].boxes}
    sites = sorted({w for s in steps for w in s.copies})
    copies = {
        w: _up(max(lane_bytes(dtypes[members[w[0]].operands[w[1]] or ""], s.copies[w], False)
                   for s in steps if w in s.copies), eu_bytes)
        for w in sites
    }
    return _Needs(2 if len(steps) > 1 else 1, weights, streamed, copies)


def allocate(
    members: Sequence[Member], steps: Sequence[Step], constants: set[str],
    lane_bytes: Callable[..., int], dtypes: dict[str, str],
    lmem_bytes: int, bank_bytes: int, eu_bytes: int, avoid: Sequence[tuple[int, int]] = (),
) -> Layout | None:
    """Lane addresses for a group's tensors: the streamed buffers from address 0, each on a
    bank boundary when they fit that way (packed to the execution units otherwise), the
    weights above them, first fit in member order. Weights go first into space clear of
    the `avoid` ranges (what the group before uses: there they can be loaded while it
    runs), then anywhere left. None when they do not fit."""
    needs = _needs(members, steps, constants, lane_bytes, dtypes, eu_bytes)
    for align in (bank_bytes, eu_bytes):
        layout = _place(needs, align, eu_bytes, lmem_bytes, avoid, align == bank_bytes and align != eu_bytes)
        if layout is not None:
            return layout
    return None


def _copy_offsets(copies: dict[tuple[int, int], int]) -> tuple[dict[tuple[int, int], int], dict[int, int]]:
    """Each copy's offset in its member's buffer (one after the other in operand order),
    and the bytes each member's copies take together."""
    offsets: dict[tuple[int, int], int] = {}
    totals: dict[int, int] = {}
    for (m, i), size in copies.items():
        offsets[m, i] = totals.get(m, 0)
        totals[m] = offsets[m, i] + size
    return offsets, totals


def _place(needs: _Needs, align: int, eu_bytes: int, lmem_bytes: int,
           avoid: Sequence[tuple[int, int]], banked: bool) -> Layout | None:
    """The layout with every streamed buffer and copy buffer aligned to `align`, or None."""
    at = 0
    streamed, sizes = {}, {}
    for k, size in needs.streamed.items():
        streamed[k], sizes[k] = at, _up(size, align)
        at += needs.buffers * sizes[k]
    offsets, totals = _copy_offsets(needs.copies)
    buffer, buffer_sizes = {}, {}
    for m in sorted(totals):
        buffer[m] = at = _up(at, align)
        buffer_sizes[m] = _up(totals[m], align)
        at += needs.buffers * buffer_sizes[m]
    if at > lmem_bytes:
        return None
    resident = _place_weights(needs.weights, _up(at, eu_bytes), lmem_bytes, avoid)
    if resident is None:
        return None
    top = max([at, *(resident[k] + needs.weights[k] for k in resident)])
    return Layout(needs.buffers, resident, dict(needs.weights), streamed, sizes, buffer, buffer_sizes, offsets, top,
                  banked, dict(needs.streamed), dict(totals))


def _take(free: list[tuple[int, int]], size: int, avoid: Sequence[tuple[int, int]]) -> int | None:
    """The first address in the `free` ranges where `size` bytes fit clear of `avoid`,
    taken out of `free`; None when there is none."""
    for index, (start, end) in enumerate(free):
        at = start
        while at + size <= end:
            hit = next(((a0, a1) for a0, a1 in avoid if a0 < at + size and at < a1), None)
            if hit is None:
                free[index:index + 1] = [r for r in ((start, at), (at + size, end)) if r[1] > r[0]]
                return at
            at = hit[1]
    return None


def _place_weights(
    sizes: dict[str, int], low: int, high: int, avoid: Sequence[tuple[int, int]]
) -> dict[str, int] | None:
    """First-fit addresses in [low, high) for weights of `sizes` (in order): into free space
    clear of `avoid` first, the rest into any free space; None when they do not fit."""
    free = [(low, high)]  # free ranges, by address
    placed: dict[str, int] = {}
    later = []
    for key, size in sizes.items():
        at = _take(free, size, avoid) if avoid else None
        if at is None:
            later.append(key)
        else:
            placed[key] = at
    for key in later:
        at = _take(free, sizes[key], ())
        if at is None:
            return None
        placed[key] = at
    return {key: placed[key] for key in sizes}


def areas(layout: Layout) -> list[tuple[int, int]]:
    """The (start, end) lane byte ranges a layout occupies."""
    spans = [(a, a + layout.resident_sizes[k]) for k, a in layout.resident.items()]
    spans += [(a, a + layout.buffers * layout.sizes[k]) for k, a in layout.streamed.items()]
    spans += [(a, a + layout.buffers * layout.buffer_sizes[m]) for m, a in layout.buffer.items()]
    return spans


def weights_clear_of(layout: Layout, before: Layout) -> list[str]:
    """The weights of `layout` that lie outside everything `before` (the group that runs
    first) occupies: they can be loaded while that group runs."""
    taken = areas(before)
    return [
        k for k, start in layout.resident.items()
        if all(start + layout.resident_sizes[k] <= t0 or t1 <= start for t0, t1 in taken)
    ]


def layout_problem(layout: Layout, needed: Layout, lmem_bytes: int) -> str | None:
    """What is wrong with `layout` (read from the IR) for a group whose own layout is
    `needed`: a buffer smaller than its tensor, past the end of local memory, or two that
    overlap; None when it is sound."""
    areas: list[tuple[int, int, str]] = []
    for k, addr in layout.resident.items():
        if layout.resident_sizes[k] < needed.resident_sizes[k]:
            return f"weight {k} has {layout.resident_sizes[k]} bytes per lane and needs {needed.resident_sizes[k]}"
        areas.append((addr, layout.resident_sizes[k], f"weight {k}"))
    for k, addr in layout.streamed.items():
        if layout.sizes[k] < needed.minimum[k]:
            return f"tensor {k} has {layout.sizes[k]} bytes per lane and needs {needed.minimum[k]}"
        areas.append((addr, layout.buffers * layout.sizes[k], f"tensor {k}"))
    for m, addr in layout.buffer.items():
        if layout.buffer_sizes[m] < needed.buffer_minimum[m]:
            return (
                f"the buffer of op {m} has {layout.buffer_sizes[m]} bytes per lane and needs "
                f"{needed.buffer_minimum[m]}"
            )
        areas.append((addr, layout.buffers * layout.buffer_sizes[m], f"the buffer of op {m}"))
    areas.sort()
    for (a0, s0, n0), (a1, _, n1) in itertools.pairwise(areas):
        if a0 + s0 > a1:
            return f"{n0} at lane address {a0} overlaps {n1} at {a1}"
    if areas and areas[-1][0] + areas[-1][1] > lmem_bytes:
        addr, size, what = areas[-1]
        return f"{what} ends at lane byte {addr + size}, past the {lmem_bytes} bytes of local memory"
    return None
