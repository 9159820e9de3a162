"""Layer groups: consecutive ops that run slice by slice out of local memory.

A group's ops ("members") keep their intermediate tensors in local memory; only
the group's inputs are loaded from DDR and only the tensors used after the
group are stored. The group is cut into steps along N and H of its last
member's output (the anchor). For each step, backward slice inference
(`slicing.plan`, member by member from the anchor back) gives the box every
tensor must be computed at: the bounding box of what its consumers in the
group read (the halos of windows grow it step by step backwards). A consumer
that reads less than that box gets a local copy of its part (a `slice` on the
compute engine), as the chip's local-to-local copy does.

Legality: every member is a rank-4 op that can be cut along N and H; every
constant operand is read whole (loaded once and kept while the steps run);
every tensor stored from the group is written whole over the steps; and the
working set of a step fits local memory, with every streamed buffer doubled so
that the loads of step k+1 and the stores of step k-1 overlap the computes of
step k (the 3-stage pipeline).

No xDSL here: members are `OpShape`s with tensor keys.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tpu_xdsl.backend import slicing
from tpu_xdsl.backend.slicing import Box, OpShape, SlicePlan

GROUPABLE = slicing.ELEMENTWISE | slicing.WINDOW | {"concat"}


@dataclass(frozen=True)
class Member:
    """One op of a group: its shape and the keys of its operands (None: absent) and results."""

    shape: OpShape
    operands: tuple[str | None, ...]
    results: tuple[str, ...]


@dataclass
class Step:
    """One slice of a group: each member's plan, the box each non-constant tensor is held
    at in local memory, and the local copies consumers need (member index, operand
    index) -> the box they read."""

    plans: list[SlicePlan]
    boxes: dict[str, Box]
    copies: dict[tuple[int, int], Box] = field(default_factory=dict)


def can_join(shape: OpShape) -> bool:
    """Whether an op may be a member: one rank-4 result cut along N and H, rank-4 (or
    per-channel constant) operands."""
    if shape.kind not in GROUPABLE or len(shape.results) != 1 or len(shape.results[0]) != 4:
        return False
    axes = slicing.splittable_axes(shape)
    return 0 in axes and 2 in axes


def union(boxes: Sequence[Box]) -> Box:
    """The bounding box of `boxes`."""
    first = boxes[0]
    out = []
    for axis in range(len(first)):
        low = min(b[axis][0] for b in boxes)
        high = max(b[axis][0] + b[axis][1] for b in boxes)
        out.append((low, high - low))
    return tuple(out)


def plan_step(members: Sequence[Member], constants: set[str], anchor_box: Box) -> Step | None:
    """Backward slice inference for one step whose anchor (the last member's result) is
    `anchor_box`; None when a member cannot produce the box asked of it."""
    needs: dict[str, list[Box]] = {members[-1].results[0]: [anchor_box]}
    plans: list[SlicePlan | None] = [None] * len(members)
    boxes: dict[str, Box] = {}
    for index in range(len(members) - 1, -1, -1):
        member = members[index]
        result = member.results[0]
        if result not in needs:
            return None  # computed for nothing in this step: not a chain ending at the anchor
        box = union(needs[result])
        boxes[result] = box
        try:
            plan = slicing.plan(member.shape, box)
        except ValueError:
            return None
        plans[index] = plan
        for key, shape, operand_box in zip(member.operands, member.shape.operands, plan.operands, strict=True):
            if key is None or shape is None or operand_box is None:
                continue
            if key in constants:
                if operand_box != slicing.whole(shape):
                    return None  # a constant read in parts: not resident
                continue
            needs.setdefault(key, []).append(operand_box)
    for key, wanted in needs.items():
        if key not in boxes:
            boxes[key] = union(wanted)  # a group input: loaded at the union of its reads
    step = Step([p for p in plans if p is not None], boxes)
    for index, member in enumerate(members):
        for i, key in enumerate(member.operands):
            read = step.plans[index].operands[i]
            if key is not None and key not in constants and read is not None and read != boxes[key]:
                step.copies[index, i] = read
    return step


def plan_steps(members: Sequence[Member], constants: set[str], n_slices: int, h_slices: int) -> list[Step] | None:
    """The steps of the group cut into n_slices x h_slices pieces of its anchor, or None
    when a step cannot be inferred."""
    n, c, h, w = members[-1].shape.results[0]
    steps = []
    for n0, n_size in slicing.split_axis(n, n_slices):
        for h0, h_size in slicing.split_axis(h, h_slices):
            step = plan_step(members, constants, ((n0, n_size), (0, c), (h0, h_size), (0, w)))
            if step is None:
                return None
            steps.append(step)
    return steps


def covers(steps: Sequence[Step], key: str, shape: Sequence[int]) -> bool:
    """Whether the boxes of `key` over the steps cover the whole tensor (it can be stored
    from the group): rows of every image, along N and H."""
    n, _, h, _ = shape
    rows = [[False] * h for _ in range(n)]
    for step in steps:
        box = step.boxes.get(key)
        if box is None:
            continue
        (n0, ns), _, (h0, hs), _ = box
        for image in range(n0, n0 + ns):
            rows[image][h0 : h0 + hs] = [True] * hs
    return all(all(r) for r in rows)


def footprint(
    members: Sequence[Member], steps: Sequence[Step], constants: set[str],
    lane_bytes: Callable[[str, Box, bool], int], dtypes: dict[str, str],
) -> int:
    """Bytes per lane a group needs: constants once, every other tensor and local copy at
    its largest box over the steps, twice when there is more than one step."""
    resident = 0
    seen: set[str] = set()
    for member in members:
        for key, shape in zip(member.operands, member.shape.operands, strict=True):
            if key is not None and key in constants and key not in seen:
                assert shape is not None
                seen.add(key)
                resident += lane_bytes(dtypes[key], slicing.whole(shape), True)
    streamed = 0
    for key in steps[0].boxes:
        streamed += max(lane_bytes(dtypes[key], step.boxes[key], False) for step in steps)
    for where in {w for step in steps for w in step.copies}:
        key = members[where[0]].operands[where[1]]
        assert key is not None
        streamed += max(lane_bytes(dtypes[key], step.copies[where], False) for step in steps if where in step.copies)
    return resident + (2 if len(steps) > 1 else 1) * streamed


def choose_slices(
    members: Sequence[Member], constants: set[str], stored: Sequence[str],
    lane_bytes: Callable[[str, Box, bool], int], dtypes: dict[str, str], budget: int, max_steps: int = 1024,
) -> tuple[int, int, list[Step]] | None:
    """The fewest steps (N cut first, then H) whose working set fits `budget` bytes per
    lane and whose stored tensors are written whole; None when no cut works."""
    n, _, h, _ = members[-1].shape.results[0]
    shapes = {key: shape for m in members for key, shape in zip(m.results, m.shape.results, strict=True)}
    for n_slices in _cuts(n):
        for h_slices in _cuts(h):
            if n_slices * h_slices > max_steps:
                break
            steps = plan_steps(members, constants, n_slices, h_slices)
            if steps is None:
                continue
            if not all(covers(steps, key, shapes[key]) for key in stored):
                continue
            if footprint(members, steps, constants, lane_bytes, dtypes) <= budget:
                return n_slices, h_slices, steps
    return None


def _cuts(size: int) -> list[int]:
    """Slice counts worth trying along an axis of `size`: each gives different slices."""
    counts, seen = [], set()
    for parts in range(1, size + 1):
        pieces = len(slicing.split_axis(size, parts))
        if pieces not in seen:
            seen.add(pieces)
            counts.append(pieces)
    return counts


# -- local memory of a group ------------------------------------------------------------


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


def allocate(
    members: Sequence[Member], steps: Sequence[Step], constants: set[str],
    lane_bytes: Callable[[str, Box, bool], int], dtypes: dict[str, str],
    lmem_bytes: int, bank_bytes: int, eu_bytes: int, avoid: Sequence[tuple[int, int]] = (),
) -> Layout | None:
    """Lane addresses for a group's tensors: the streamed buffers from address 0, each on a
    bank boundary when they fit that way (packed to the execution units otherwise), the
    weights above them, first fit in member order. Weights go first into space clear of
    the `avoid` ranges (what the group before uses: there they can be loaded while it
    runs), then anywhere left. None when they do not fit."""
    def up(size: int, align: int) -> int:
        return -(-size // align) * align

    buffers = 2 if len(steps) > 1 else 1
    weights: dict[str, int] = {}
    for member in members:
        for key, shape in zip(member.operands, member.shape.operands, strict=True):
            if key is not None and key in constants and key not in weights:
                assert shape is not None
                weights[key] = up(lane_bytes(dtypes[key], slicing.whole(shape), True), eu_bytes)
    streamed_keys = list(steps[0].boxes)
    raw = {k: up(max(lane_bytes(dtypes[k], s.boxes[k], False) for s in steps), eu_bytes) for k in streamed_keys}
    sites = sorted({w for s in steps for w in s.copies})
    copy_raw = {
        w: up(max(lane_bytes(dtypes[members[w[0]].operands[w[1]] or ""], s.copies[w], False)
                  for s in steps if w in s.copies), eu_bytes)
        for w in sites
    }
    for align in (bank_bytes, eu_bytes):
        at = 0
        streamed, sizes = {}, {}
        for k in streamed_keys:
            streamed[k], sizes[k] = at, up(raw[k], align)
            at += buffers * sizes[k]
        buffer, buffer_sizes, offsets = {}, {}, {}
        for w in sites:
            m = w[0]
            if m not in buffer_sizes:
                buffer_sizes[m] = 0
            offsets[w] = buffer_sizes[m]
            buffer_sizes[m] += copy_raw[w]
        for m in sorted(buffer_sizes):
            buffer[m] = at = up(at, align)
            buffer_sizes[m] = up(buffer_sizes[m], align)
            at += buffers * buffer_sizes[m]
        resident = _place_weights(weights, up(at, eu_bytes), lmem_bytes, avoid) if at <= lmem_bytes else None
        if resident is not None:
            minimum = {m: sum(copy_raw[w] for w in sites if w[0] == m) for m in buffer}
            top = max([at, *(resident[k] + weights[k] for k in resident)])
            return Layout(buffers, resident, dict(weights), streamed, sizes, buffer, buffer_sizes, offsets, top,
                          align == bank_bytes and align != eu_bytes, raw, minimum)
    return None


def _place_weights(sizes: dict[str, int], low: int, high: int, avoid: Sequence[tuple[int, int]]) -> dict[str, int] | None:
    """First-fit addresses in [low, high) for weights of `sizes` (in order): into free space
    clear of `avoid` first, the rest into any free space; None when they do not fit."""
    free = [(low, high)]  # free ranges, by address

    def take(size: int, clear: bool) -> int | None:
        for index, (start, end) in enumerate(free):
            at = start
            while at + size <= end:
                hit = next(((a0, a1) for a0, a1 in avoid if clear and a0 < at + size and at < a1), None)
                if hit is None:
                    free[index:index + 1] = [r for r in ((start, at), (at + size, end)) if r[1] > r[0]]
                    return at
                at = hit[1]
        return None

    placed: dict[str, int] = {}
    later = []
    for key, size in sizes.items():
        at = take(size, True) if avoid else None
        if at is None:
            later.append(key)
        else:
            placed[key] = at
    for key in later:
        at = take(sizes[key], False)
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


# -- cost ----------------------------------------------------------------------------------


@dataclass
class StepCost:
    """Engine cycles of one step: the DMA loads of its inputs, each member's compute
    (with its local copies), and each DMA store as (index of the member that makes the
    tensor, cycles)."""

    load: int
    computes: list[int]
    stores: list[tuple[int, int]]


def resident_keys(members: Sequence[Member], constants: set[str]) -> list[list[str]]:
    """The constants each member loads: those no earlier member needed."""
    seen: set[str] = set()
    out = []
    for member in members:
        keys = [k for k in member.operands if k is not None and k in constants and k not in seen]
        seen.update(keys)
        out.append(list(dict.fromkeys(keys)))
    return out


def pipeline_cycles(resident: Sequence[int], steps: Sequence[StepCost]) -> int:
    """Makespan of a group's program as codegen orders it on the two in-order engines.
    DMA: the weights of member 0 (`resident[m]`: the cycles to load member m's weights),
    the loads of step 0, the other members' weights; then per step s the loads of step
    s+1 (once compute s-1 freed their buffer) and the stores of step s (each after its
    member's compute). Compute: per step, each member once its weights, the step's
    loads and the stores of step s-2 (its buffer) are done. One step: load, compute,
    store in turn."""
    buffers = 2 if len(steps) > 1 else 1
    dma = resident[0] + steps[0].load
    load_done = {0: dma}
    weights_done = [resident[0]]
    for cycles in resident[1:]:
        dma += cycles
        weights_done.append(dma)
    compute_done: dict[int, int] = {}
    store_done: dict[int, int] = {}
    compute = 0
    for s, step in enumerate(steps):
        if buffers == 1 and s > 0:
            dma = max(dma, compute_done[s - 1]) + step.load
            load_done[s] = dma
        if buffers == 2 and s + 1 < len(steps):
            dma = max(dma, compute_done.get(s - 1, 0)) + steps[s + 1].load
            load_done[s + 1] = dma
        finished = []
        for m, cycles in enumerate(step.computes):
            compute = max(compute, load_done[s], weights_done[m], store_done.get(s - buffers, 0)) + cycles
            finished.append(compute)
        compute_done[s] = compute
        for m, cycles in step.stores:
            dma = max(dma, finished[m]) + cycles
        store_done[s] = dma
    return max(dma, compute)


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
            return f"the buffer of op {m} has {layout.buffer_sizes[m]} bytes per lane and needs {needed.buffer_minimum[m]}"
        areas.append((addr, layout.buffers * layout.buffer_sizes[m], f"the buffer of op {m}"))
    areas.sort()
    for (a0, s0, n0), (a1, _, n1) in itertools.pairwise(areas):
        if a0 + s0 > a1:
            return f"{n0} at lane address {a0} overlaps {n1} at {a1}"
    if areas and areas[-1][0] + areas[-1][1] > lmem_bytes:
        addr, size, what = areas[-1]
        return f"{what} ends at lane byte {addr + size}, past the {lmem_bytes} bytes of local memory"
    return None
