"""The cost of a layer group: the device's timing of the instructions codegen emits.

Every instruction codegen will emit for the group is timed with `device.timing`
(the same functions the simulator uses) and the two in-order engines are
replayed in codegen's order (`pipeline_cycles`). tests/test_tpu_layer_group.py
checks the estimate against the simulator.

No xDSL here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tpu_xdsl.backend import slicing
from tpu_xdsl.backend.lanes import local_tensor
from tpu_xdsl.backend.layer_groups.steps import Member, Step
from tpu_xdsl.backend.slicing import Box
from tpu_xdsl.device import timing
from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.device.isa import DTYPE_SIZES, Compute, LocalTensor


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


def group_cost(chip: ChipConfig, members: Sequence[Member], steps: Sequence[Step], constants: set[str],
               dtypes: dict[str, str], stored: Sequence[str]) -> tuple[int, int]:
    """The estimated cycles of a group on `chip` and the bytes its DMA moves."""
    resident, dma_bytes = _resident_cost(chip, members, constants, dtypes)
    maker = {k: m for m, member in enumerate(members) for k in member.results}
    costs = []
    for step in steps:
        cost, nbytes = _step_cost(chip, members, step, constants, dtypes, stored, maker)
        costs.append(cost)
        dma_bytes += nbytes
    return pipeline_cycles(resident, costs), dma_bytes


def _resident_cost(chip: ChipConfig, members: Sequence[Member], constants: set[str],
                   dtypes: dict[str, str]) -> tuple[list[int], int]:
    """The cycles to load each member's weights, and their bytes: one transfer a member, as
    codegen loads adjacent weights in one lane image (`codegen/constants.py`)."""
    shapes = {k: _operand_shape(m, i) for m in members for i, k in enumerate(m.operands) if k is not None}
    dma_bytes = 0
    resident = []
    for keys in resident_keys(members, constants):
        nbytes = sum(_nbytes(dtypes[k], slicing.whole(shapes[k])) for k in keys)
        dma_bytes += nbytes
        resident.append(timing.dma_load_cycles(chip, nbytes) if keys else 0)
    return resident, dma_bytes


def _step_cost(chip: ChipConfig, members: Sequence[Member], step: Step, constants: set[str],
               dtypes: dict[str, str], stored: Sequence[str], maker: dict[str, int]) -> tuple[StepCost, int]:
    """One step's engine cycles, and the bytes its loads and stores move."""
    produced = set(maker)
    dma_bytes = 0
    load = 0
    for k, box in step.boxes.items():
        if k not in produced:
            nbytes = _nbytes(dtypes[k], box)
            load += timing.dma_load_cycles(chip, nbytes)
            dma_bytes += nbytes
    computes = [_member_cycles(chip, index, member, step, constants, dtypes) for index, member in enumerate(members)]
    stores = []
    for k in stored:
        nbytes = _nbytes(dtypes[k], step.boxes[k])
        stores.append((maker[k], timing.dma_store_cycles(chip, nbytes)))
        dma_bytes += nbytes
    return StepCost(load, computes, stores), dma_bytes


def _member_cycles(chip: ChipConfig, index: int, member: Member, step: Step, constants: set[str],
                   dtypes: dict[str, str]) -> int:
    """The compute cycles of member `index` in `step`, its local copies included."""
    cycles = 0
    inputs: list[LocalTensor | None] = []
    for i, k in enumerate(member.operands):
        if k is None:
            inputs.append(None)
        elif k in constants:
            inputs.append(local_tensor(0, dtypes[k], slicing.whole(_operand_shape(member, i)), True))
        elif (index, i) in step.copies:
            part = local_tensor(0, dtypes[k], step.copies[index, i])
            cycles += timing.compute_cycles(chip, Compute(0, "slice", (part,), (part,), {}))
            inputs.append(part)
        else:
            inputs.append(local_tensor(0, dtypes[k], step.boxes[k]))
    (result,) = member.results
    out = local_tensor(0, dtypes[result], step.boxes[result])
    plan = step.plans[index]
    return cycles + timing.compute_cycles(chip, Compute(0, member.shape.kind, tuple(inputs), (out,), plan.attrs))


def _operand_shape(member: Member, i: int) -> tuple[int, ...]:
    """The shape of a member's operand `i` that has a key: only an absent operand (no
    key) has no shape."""
    shape = member.shape.operands[i]
    if shape is None:
        raise ValueError(f"{member.shape.kind}: operand {i} ({member.operands[i]}) has no shape")
    return shape


def _nbytes(dtype: str, box: Box) -> int:
    count = 1
    for _, size in box:
        count *= size
    return count * DTYPE_SIZES[dtype]
