"""A layer group of TPU ops, planned: its members, steps, local-memory layout and cycles.

The bridge between the IR and `groups` (which knows no xDSL): members are built
from the ops' types and attributes, the steps chosen by `groups.choose_slices`,
the local memory laid out by `groups.allocate`, and the cycles estimated by an
analytic copy of the device's timing: every instruction codegen will emit for
the group is timed with `device.timing` (the same functions the simulator
uses), and the two in-order engines are replayed by `groups.pipeline_cycles`.
tests/test_tpu_layer_group.py checks the estimate against the simulator.

`tpu-layer-group` plans candidate groups with this to choose them; codegen
plans a `tpu.group` again to emit it (the plan is deterministic).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.backend import groups, lanes, slicing
from tpu_xdsl.backend.lanes import local_tensor
from tpu_xdsl.backend.slicing import Box, OpShape
from tpu_xdsl.device import timing
from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.device.isa import DTYPE_SIZES, Compute, dtype_name
from tpu_xdsl.dialects.attr_values import op_attrs
from tpu_xdsl.dialects.module import is_none
from tpu_xdsl.kernels.dtypes import numpy_dtype

# Attributes of the IR, not of the kernel.
IR_ONLY_ATTRS = ("names", "ddr", "ginfo")


def kernel_attrs(op: Operation) -> dict:
    return {k: v for k, v in op_attrs(op).items() if k not in IR_ONLY_ATTRS}


def value_shape(value: SSAValue) -> tuple[int, ...]:
    t = value.type
    assert isinstance(t, TensorType)
    return tuple(int(d) for d in t.get_shape())


def value_dtype(value: SSAValue) -> str:
    t = value.type
    assert isinstance(t, TensorType)
    return dtype_name(numpy_dtype(t.element_type))


def op_shape(op: Operation, is_constant) -> OpShape:
    """What slicing needs of `op`, from its types; `is_constant(value)`: a weight."""
    operands = [None if is_none(v) else v for v in op.operands]
    return OpShape(
        op.name.split(".", 1)[1],
        kernel_attrs(op),
        tuple(None if v is None else value_shape(v) for v in operands),
        tuple(v is not None and is_constant(v) for v in operands),
        tuple(value_shape(r) for r in op.results),
    )


@dataclass
class GroupPlan:
    """A legal group: members (keys name tensors), the values behind the keys, the cut,
    its steps, the local layout, the keys stored to DDR, and the estimated cycles."""

    ops: list[Operation]
    members: list[groups.Member]
    values: dict[str, SSAValue]
    constants: set[str]
    dtypes: dict[str, str]
    n_slices: int
    h_slices: int
    steps: list[groups.Step]
    layout: groups.Layout
    stored: list[str]
    cycles: int
    dma_bytes: int


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

    def lane_bytes(self, dtype: str, box: Box | None, constant: bool = False) -> int:
        if box is None:
            return 0
        return lanes.lane_bytes(dtype, box, constant, self.chip.npu_num, self.chip.eu_bytes)

    def joinable(self, op: Operation) -> bool:
        # Only the kinds groups take: others (an LSTM with none results) have no OpShape.
        kind = op.name.split(".", 1)[1]
        return op.name.startswith("tpu.") and kind in groups.GROUPABLE and groups.can_join(self.op_shape(op))

    def plan(self, ops: Sequence[Operation], stored: Sequence[SSAValue],
             counts: tuple[int, int] | None = None) -> GroupPlan | None:
        """The plan of `ops` run as one group writing `stored` to DDR, or None when they
        cannot be (an op that cannot join, no cut whose steps fit local memory).
        `counts` (n_slices, h_slices) fixes the cut instead of choosing the fewest steps."""
        keys: dict[SSAValue, str] = {}

        def key(value: SSAValue) -> str:
            value = self.source(value)
            return keys.setdefault(value, f"t{len(keys)}")

        members, constants = [], set()
        for op in ops:
            shape = self.op_shape(op)
            if not groups.can_join(shape):
                return None
            operand_keys: list[str | None] = []
            for v in op.operands:
                if is_none(v):
                    operand_keys.append(None)
                    continue
                operand_keys.append(key(v))
                if self.is_constant(v):
                    constants.add(key(v))
            members.append(groups.Member(shape, tuple(operand_keys), tuple(key(r) for r in op.results)))
        values = {k: v for v, k in keys.items()}
        dtypes = {k: self._dtype(v) for k, v in values.items()}
        stored_keys = [keys[self.source(v)] for v in stored]
        if counts is None:
            choice = groups.choose_slices(members, constants, stored_keys, self.lane_bytes, dtypes, self.chip.lmem_bytes)
            if choice is None:
                return None
            n_slices, h_slices, steps = choice
        else:
            n_slices, h_slices = counts
            found = groups.plan_steps(members, constants, n_slices, h_slices)
            if found is None:
                return None
            steps = found
        chip = self.chip
        layout = groups.allocate(members, steps, constants, self.lane_bytes, dtypes,
                                 chip.lmem_bytes, chip.lmem_bank_bytes, chip.eu_bytes)
        if layout is None:
            return None
        cycles, dma_bytes = self._cost(members, steps, constants, dtypes, stored_keys)
        return GroupPlan(list(ops), members, values, constants, dtypes, n_slices, h_slices, steps, layout,
                         stored_keys, cycles, dma_bytes)

    def relayout(self, plan: GroupPlan, avoid: Sequence[tuple[int, int]]) -> groups.Layout | None:
        """The plan's layout with its weights clear of `avoid` where they fit, or None."""
        chip = self.chip
        return groups.allocate(plan.members, plan.steps, plan.constants, self.lane_bytes, plan.dtypes,
                               chip.lmem_bytes, chip.lmem_bank_bytes, chip.eu_bytes, avoid)

    # -- the cost model: the device's timing of what codegen emits -----------------------

    def _cost(self, members, steps, constants, dtypes, stored) -> tuple[int, int]:
        chip = self.chip
        produced = {k for m in members for k in m.results}
        maker = {k: m for m, member in enumerate(members) for k in member.results}
        shapes = {k: shape for m in members for k, shape in zip(m.operands, m.shape.operands, strict=True) if k is not None}
        dma_bytes = 0
        resident = []
        for keys in groups.resident_keys(members, constants):
            cycles = 0
            for k in keys:
                nbytes = _nbytes(dtypes[k], slicing.whole(shapes[k]))
                cycles += timing.dma_load_cycles(chip, nbytes)
                dma_bytes += nbytes
            resident.append(cycles)
        costs = []
        for step in steps:
            load = 0
            for k, box in step.boxes.items():
                if k not in produced:
                    nbytes = _nbytes(dtypes[k], box)
                    load += timing.dma_load_cycles(chip, nbytes)
                    dma_bytes += nbytes
            computes = []
            for index, (member, plan) in enumerate(zip(members, step.plans, strict=True)):
                compute = 0
                inputs = []
                for i, k in enumerate(member.operands):
                    if k is None:
                        inputs.append(None)
                    elif k in constants:
                        inputs.append(local_tensor(0, dtypes[k], slicing.whole(member.shape.operands[i]), True))
                    elif (index, i) in step.copies:
                        part = local_tensor(0, dtypes[k], step.copies[index, i])
                        compute += timing.compute_cycles(chip, Compute(0, "slice", (part,), (part,), {}))
                        inputs.append(part)
                    else:
                        inputs.append(local_tensor(0, dtypes[k], step.boxes[k]))
                (result,) = member.results
                out = local_tensor(0, dtypes[result], step.boxes[result])
                compute += timing.compute_cycles(chip, Compute(0, member.shape.kind, tuple(inputs), (out,), plan.attrs))
                computes.append(compute)
            stores = []
            for k in stored:
                nbytes = _nbytes(dtypes[k], step.boxes[k])
                stores.append((maker[k], timing.dma_store_cycles(chip, nbytes)))
                dma_bytes += nbytes
            costs.append(groups.StepCost(load, computes, stores))
        return groups.pipeline_cycles(resident, costs), dma_bytes


def _nbytes(dtype: str, box: Box) -> int:
    count = 1
    for _, size in box:
        count *= size
    return count * DTYPE_SIZES[dtype]
