"""A layer group of TPU ops, planned: its members, steps, local-memory layout and cycles.

The bridge between the IR and the xDSL-free rest of the package: members are built
from the ops' types and attributes (`op_shapes`), the steps chosen by
`steps.choose_slices`, the local memory laid out by `layout.allocate`, and the
cycles estimated by `cost.group_cost` (the device's timing of what codegen emits).

`tpu-layer-group` plans candidate groups with this to choose them; codegen plans a
`tpu.group` again to emit it (the plan is deterministic).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from tpu_xdsl.backend import lanes
from tpu_xdsl.backend.layer_groups.cost import group_cost
from tpu_xdsl.backend.layer_groups.layout import Layout, allocate
from tpu_xdsl.backend.layer_groups.steps import (
    GROUPABLE,
    Member,
    Step,
    can_join,
    choose_slices,
    plan_steps,
)
from tpu_xdsl.backend.op_shapes import op_shape, value_dtype
from tpu_xdsl.backend.slicing import Box, OpShape
from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.dialects.module import is_none


@dataclass
class GroupPlan:
    """A legal group: members (keys name tensors), the values behind the keys, the cut,
    its steps, the local layout, the keys stored to DDR, and the estimated cycles."""

    ops: list[Operation]
    members: list[Member]
    values: dict[str, SSAValue]
    constants: set[str]
    dtypes: dict[str, str]
    n_slices: int
    h_slices: int
    steps: list[Step]
    layout: Layout
    stored: list[str]
    cycles: int
    dma_bytes: int


@dataclass
class _Members:
    """The members of candidate ops, with the key of every value they read or write
    (t0, t1, ... in the order the ops name them) and the keys of the weights."""

    members: list[Member]
    keys: dict[SSAValue, str]
    constants: set[str]


class GroupPlanner:
    """Plans groups of a module's ops on a chip; weights are the values `is_constant`
    says (top.weight, or a tpu.load of one inside a tpu.group)."""

    def __init__(self, chip: ChipConfig, is_constant, source=lambda v: v):
        self.chip = chip
        self.is_constant = is_constant
        # The value a group reads for an operand (inside a tpu.group: what a tpu.load loads).
        self.source = source
        self._shapes: dict[Operation, OpShape] = {}
        self._dtypes: dict[SSAValue, str] = {}

    def _dtype(self, value: SSAValue) -> str:
        dtype = self._dtypes.get(value)
        if dtype is None:
            dtype = self._dtypes[value] = value_dtype(value)
        return dtype

    def op_shape(self, op: Operation) -> OpShape:
        """`op_shape` of `op`, computed once (reading attributes is the slow part)."""
        shape = self._shapes.get(op)
        if shape is None:
            shape = self._shapes[op] = op_shape(op, self.is_constant)
        return shape

    def lane_bytes(self, dtype: str, box: Box | None, constant: bool = False, eu_align: bool = True) -> int:
        if box is None:
            return 0
        return lanes.lane_bytes(dtype, box, constant, self.chip.npu_num, self.chip.eu_bytes, eu_align)

    def joinable(self, op: Operation) -> bool:
        # Only the kinds groups take: others (an LSTM with none results) have no OpShape.
        kind = op.name.split(".", 1)[1]
        return op.name.startswith("tpu.") and kind in GROUPABLE and can_join(self.op_shape(op))

    def _members(self, ops: Sequence[Operation]) -> _Members | None:
        """The members of `ops`, or None when one cannot join a group."""
        found = _Members([], {}, set())
        keys = found.keys

        def key(value: SSAValue) -> str:
            value = self.source(value)
            return keys.setdefault(value, f"t{len(keys)}")

        for op in ops:
            shape = self.op_shape(op)
            if not can_join(shape):
                return None
            operand_keys: list[str | None] = []
            for v in op.operands:
                if is_none(v):
                    operand_keys.append(None)
                    continue
                operand_keys.append(key(v))
                if self.is_constant(v):
                    found.constants.add(key(v))
            found.members.append(Member(shape, tuple(operand_keys), tuple(key(r) for r in op.results)))
        return found

    def _cut(self, found: _Members, stored: list[str], dtypes: dict[str, str],
             counts: tuple[int, int] | None) -> tuple[int, int, list[Step]] | None:
        """The fewest steps that fit (or the `counts` cut), or None."""
        if counts is None:
            return choose_slices(found.members, found.constants, stored, self.lane_bytes, dtypes, self.chip.lmem_bytes)
        steps = plan_steps(found.members, found.constants, *counts)
        return None if steps is None else (*counts, steps)

    def plan(self, ops: Sequence[Operation], stored: Sequence[SSAValue],
             counts: tuple[int, int] | None = None) -> GroupPlan | None:
        """The plan of `ops` run as one group writing `stored` to DDR, or None when they
        cannot be (an op that cannot join, no cut whose steps fit local memory).
        `counts` (n_slices, h_slices) fixes the cut instead of choosing the fewest steps."""
        found = self._members(ops)
        if found is None:
            return None
        members, constants = found.members, found.constants
        values = {k: v for v, k in found.keys.items()}
        dtypes = {k: self._dtype(v) for k, v in values.items()}
        stored_keys = [found.keys[self.source(v)] for v in stored]
        cut = self._cut(found, stored_keys, dtypes, counts)
        if cut is None:
            return None
        n_slices, h_slices, steps = cut
        chip = self.chip
        layout = allocate(members, steps, constants, self.lane_bytes, dtypes,
                          chip.lmem_bytes, chip.lmem_bank_bytes, chip.eu_bytes)
        if layout is None:
            return None
        cycles, dma_bytes = group_cost(chip, members, steps, constants, dtypes, stored_keys)
        return GroupPlan(list(ops), members, values, constants, dtypes, n_slices, h_slices, steps, layout,
                         stored_keys, cycles, dma_bytes)

    def relayout(self, plan: GroupPlan, avoid: Sequence[tuple[int, int]]) -> Layout | None:
        """The plan's layout with its weights clear of `avoid` where they fit, or None."""
        chip = self.chip
        return allocate(plan.members, plan.steps, plan.constants, self.lane_bytes, plan.dtypes,
                        chip.lmem_bytes, chip.lmem_bank_bytes, chip.eu_bytes, avoid)
