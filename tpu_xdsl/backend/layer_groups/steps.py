"""The steps of a layer group: which box of every tensor each step computes.

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
step k (the 3-stage pipeline; `layout` places the buffers).

No xDSL here: members are `OpShape`s with tensor keys.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tpu_xdsl.backend import slicing
from tpu_xdsl.backend.slicing import Box, OpShape, SlicePlan
from tpu_xdsl.kernels import op_kinds

# Resizes join only in nearest mode and stem folds only whole (`can_join`: their rows can
# be cut, `slicing.splittable_axes`).
GROUPABLE = op_kinds.ELEMENTWISE | op_kinds.WINDOW | op_kinds.RESIZE | {"concat", "fold_taps"}


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
