"""Local memory for an op computed alone: how to slice its output so that the slices fit,
and the lane addresses of their buffers.

The output is cut in halves along N, then H (with the halos of windows), then C
(`slicing`), each time along the axis whose cut shrinks the working set most, until
the slices fit local memory: resident operands once, the others with two buffers so
that loads overlap computes (one when even the smallest slices need all of it).
"""

from __future__ import annotations

import itertools

from xdsl.ir import Operation

from tpu_xdsl.backend import slicing
from tpu_xdsl.backend.codegen.state import CodegenError
from tpu_xdsl.backend.lanes import lane_bytes, local_tensor
from tpu_xdsl.backend.slicing import Box, OpShape, SlicePlan
from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.device.isa import LocalTensor


class LocalAllocator:
    """Lane addresses handed out in order, each aligned to the execution units."""

    def __init__(self, chip: ChipConfig):
        self.chip = chip
        self.next = 0

    def lane_bytes(self, dtype: str, box: Box | None, constant: bool = False) -> int:
        if box is None:
            return 0
        return lane_bytes(dtype, box, constant, self.chip.npu_num, self.chip.eu_bytes)

    def reserve(self, size: int) -> int:
        addr = self.next
        self.next += -(-size // self.chip.eu_bytes) * self.chip.eu_bytes
        if self.next > self.chip.lmem_bytes:
            raise CodegenError(f"local memory overflow: {self.next} bytes of {self.chip.lmem_bytes} per lane")
        return addr

    def tensor(self, dtype: str, box: Box, constant: bool = False) -> LocalTensor:
        return local_tensor(self.reserve(self.lane_bytes(dtype, box, constant)), dtype, box, constant)


def choose_slices(chip: ChipConfig, op: Operation, shape: OpShape, dtypes, result_dtypes,
                  layer: str) -> tuple[list[SlicePlan], int]:
    """Few slices whose working set fits local memory, and the buffers per streamed
    tensor: the output is cut in halves along N, then H, then C (the first of them
    whose cut makes the slices smaller: halving 20 channels saves nothing on 32 lanes),
    with two buffers (loads overlap computes); one when even the smallest slices
    need all of local memory."""
    for buffers in (2, 1):
        found = _fitting_slices(chip, shape, dtypes, result_dtypes, buffers)
        if found is not None:
            return found
    raise CodegenError(
        f"'{op.name}' ({layer}) does not fit local memory ({chip.npu_num} lanes of "
        f"{chip.lmem_bytes} bytes) even in the smallest slices it can be cut into"
    )


def _fitting_slices(chip: ChipConfig, shape: OpShape, dtypes, result_dtypes,
                    buffers: int) -> tuple[list[SlicePlan], int] | None:
    """Slices that fit with `buffers` buffers (one when there is one slice), or None."""
    out = shape.results[0]
    axes = slicing.splittable_axes(shape)
    counts = [1] * len(out)
    plans = slice_plans(shape, counts)
    while True:
        used = buffers if len(plans) > 1 else 1
        if footprint(chip, shape, plans, dtypes, result_dtypes, used) <= chip.lmem_bytes:
            return plans, used
        open_axes = [a for a in axes if counts[a] < out[a]]
        if not open_axes or len(plans) > 1 << 16:
            return None
        counts, plans = _halve(chip, shape, counts, plans, open_axes, dtypes, result_dtypes, buffers)


def _halve(chip: ChipConfig, shape: OpShape, counts: list[int], plans: list[SlicePlan], open_axes: list[int],
           dtypes, result_dtypes, buffers: int) -> tuple[list[int], list[SlicePlan]]:
    """Halve the axis that shrinks the working set most (the first open one when no cut
    helps at once): a filter larger than the rows it reads is cut along its output
    channels, rows of a large image along H."""
    out = shape.results[0]
    need = footprint(chip, shape, plans, dtypes, result_dtypes, buffers)
    choice = None
    for axis in open_axes:
        trial = list(counts)
        trial[axis] = min(out[axis], counts[axis] * 2)
        trial_plans = slice_plans(shape, trial)
        size = footprint(chip, shape, trial_plans, dtypes, result_dtypes, buffers)
        if choice is None or size < choice[0] and size < need:
            choice = size, trial, trial_plans
    assert choice is not None
    return choice[1], choice[2]


def slice_plans(shape: OpShape, counts: list[int]) -> list[SlicePlan]:
    """The slices of the output cut into `counts` pieces along each axis."""
    out = shape.results[0]
    pieces = [slicing.split_axis(d, c) for d, c in zip(out, counts)]
    return [slicing.plan(shape, tuple(box)) for box in itertools.product(*pieces)]


def footprint(chip: ChipConfig, shape: OpShape, plans: list[SlicePlan], dtypes, result_dtypes, buffers: int) -> int:
    """Bytes per lane the slices need: resident constants once, the rest `buffers` times."""
    per_lane = LocalAllocator(chip).lane_bytes
    streamed = 0
    resident = 0
    for i, operand in enumerate(shape.operands):
        if operand is None:
            continue
        dtype = dtypes[i]
        biggest = max(
            per_lane(dtype, p.operands[i], shape.constants[i]) for p in plans if p.operands[i] is not None
        )
        same = all(p.operands[i] == plans[0].operands[i] for p in plans)
        if same and (shape.constants[i] or len(plans) > 1):
            resident += biggest
        else:
            streamed += biggest
    for j in range(len(shape.results)):
        streamed += max(per_lane(result_dtypes[j], p.outputs[j]) for p in plans)
    return resident + buffers * streamed


def resident_operands(operands, shape: OpShape, slices: list[SlicePlan]) -> list[int]:
    """The operands loaded once: constants, or with more than one slice, operands every
    slice reads at the same box."""
    return [
        i for i, v in enumerate(operands)
        if v is not None and (shape.constants[i] or len(slices) > 1)
        and all(s.operands[i] == slices[0].operands[i] for s in slices)
    ]
