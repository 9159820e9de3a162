"""An op computed alone in local memory, slice by slice of its output.

Per slice: DMA loads of its operand boxes, one compute, one DMA store. Constant
operands read whole (and operands every slice reads at the same box) are loaded once.
With two or more slices the buffers are doubled, so the load of slice i+1 overlaps the
compute of slice i (loads run one slice ahead on the DMA queue; the dependency tokens
guard buffer reuse). A float conv too large even in its smallest output slices is
also cut along its input channels (`channel_parts`), a float softmax whose rows are
longer than a lane holds along its axis (`axis_parts`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.backend import slicing
from tpu_xdsl.backend.codegen import axis_parts, channel_parts
from tpu_xdsl.backend.codegen.allocation import (
    LocalAllocator,
    choose_slices,
    resident_operands,
)
from tpu_xdsl.backend.codegen.state import (
    CodegenError,
    CodegenState,
    op_macs,
    starts_sizes,
)
from tpu_xdsl.backend.lanes import local_tensor
from tpu_xdsl.backend.op_shapes import op_shape
from tpu_xdsl.backend.slicing import Box, OpShape, SlicePlan
from tpu_xdsl.device.isa import Compute, DmaLoad, DmaStore, LocalTensor
from tpu_xdsl.dialects.module import is_none
from tpu_xdsl.weights import is_weight


def emit_compute(state: CodegenState, op: Operation, kind: str, layer: str) -> None:
    """The op computed over slices of its output that fit local memory."""
    operands: list[SSAValue | None] = [None if is_none(v) else v for v in op.operands]
    shape = op_shape(op, is_weight)
    dtypes = [None if v is None else state.places[v].dtype for v in operands]
    result_dtypes = [state.places[r].dtype for r in op.results]
    try:
        slices, buffers = choose_slices(state.chip, op, shape, dtypes, result_dtypes, layer)
    except CodegenError:
        # A float conv too large even in the smallest output slices: also cut along
        # its input channels, summing the parts (codegen/channel_parts.py).
        if channel_parts.applies(shape, dtypes) and channel_parts.emit(
            state, op, shape, operands, dtypes, result_dtypes[0], layer, op_macs(kind, op)
        ):
            return
        # A float softmax whose rows are longer than a lane holds: also cut along its axis
        # (codegen/axis_parts.py).
        if axis_parts.applies(shape, dtypes) and axis_parts.emit(
            state, op, shape, operands, dtypes, result_dtypes[0], layer
        ):
            return
        raise
    resident = resident_operands(operands, shape, slices)
    _SliceEmitter(state, op, shape, operands, slices, resident, layer, dtypes, result_dtypes, buffers).run()


class _SliceEmitter:
    """The instructions of one op's slices. An operand is loaded only when its box changes
    from the slice before (slices run N, C, H, W from the outside in, so a filter's box
    stays while the rows of one channel slice go by); each new box goes into the
    operand's other buffer, once the last compute that read that buffer is done."""

    def __init__(self, state: CodegenState, op: Operation, shape: OpShape, operands: Sequence[SSAValue | None],
                 slices: list[SlicePlan], resident: list[int], layer: str, dtypes, result_dtypes, buffers: int):
        self.state, self.op, self.shape, self.operands = state, op, shape, operands
        self.slices, self.layer, self.dtypes, self.result_dtypes, self.buffers = (
            slices, layer, dtypes, result_dtypes, buffers)
        alloc = LocalAllocator(state.chip)
        self.resident_local: dict[int, LocalTensor] = {}
        self.resident_loads: list[int] = []
        for i in resident:
            self._load_resident(alloc, i)
        self.streamed = [i for i, v in enumerate(operands) if v is not None and i not in resident]
        constant = shape.constants
        sizes_in = {
            i: max(alloc.lane_bytes(dtypes[i], s.operands[i], constant[i]) for s in slices) for i in self.streamed
        }
        sizes_out = [
            max(alloc.lane_bytes(result_dtypes[j], s.outputs[j]) for s in slices) for j in range(len(op.results))
        ]
        self.bases_in = [{i: alloc.reserve(sizes_in[i]) for i in self.streamed} for _ in range(buffers)]
        self.bases_out = [[alloc.reserve(size) for size in sizes_out] for _ in range(buffers)]
        self.loads: dict[int, list[int]] = {}
        self.stores: dict[int, list[int]] = {}
        self.held: dict[int, Box | None] = {i: None for i in self.streamed}
        self.version = {i: -1 for i in self.streamed}
        self.current: dict[int, int] = {}  # operand -> the load of its current box
        self.buffer_of: dict[tuple[int, int], int] = {}  # (slice, operand) -> its buffer
        self.last_reader: dict[tuple[int, int], int] = {}  # (operand, buffer) -> the compute reading it last

    def _load_resident(self, alloc: LocalAllocator, i: int) -> None:
        box = self.slices[0].operands[i]
        assert box is not None
        local = alloc.tensor(self.dtypes[i], box, constant=self.shape.constants[i])
        self.resident_local[i] = local
        src = self.state.places[self.operands[i]].view().box(*starts_sizes(box))  # type: ignore[index]
        self.resident_loads.append(self.state.program.emit(DmaLoad, src, local, layer=self.layer))

    def run(self) -> None:
        """With two buffers the loads run one slice ahead (overlapping the compute before
        them); with one, each slice's loads wait for the previous compute."""
        self._emit_loads(0)
        for k, plan in enumerate(self.slices):
            if k > 0 and self.buffers == 1:
                self._emit_loads(k)
            if self.buffers == 2 and k + 1 < len(self.slices):
                self._emit_loads(k + 1)
            compute, outputs = self._emit_compute(k, plan)
            self._emit_stores(k, plan, compute, outputs)

    def _emit_loads(self, k: int) -> None:
        plan = self.slices[k]
        ids = []
        for i in self.streamed:
            box = plan.operands[i]
            assert box is not None
            if box != self.held[i]:
                self._load(i, box)
            self.buffer_of[k, i] = self.version[i] % self.buffers
            ids.append(self.current[i])
        self.loads[k] = ids

    def _load(self, i: int, box: Box) -> None:
        """Operand i's new box into its next buffer."""
        self.held[i] = box
        self.version[i] += 1
        b = self.version[i] % self.buffers
        src = self.state.places[self.operands[i]].view().box(*starts_sizes(box))  # type: ignore[index]
        local = local_tensor(self.bases_in[b][i], self.dtypes[i], box, self.shape.constants[i])
        deps = [self.last_reader[i, b]] if (i, b) in self.last_reader else []
        self.current[i] = self.state.program.emit(DmaLoad, src, local, deps=deps, layer=self.layer)

    def _inputs(self, k: int, plan: SlicePlan) -> tuple[LocalTensor | None, ...]:
        inputs: list[LocalTensor | None] = []
        for i, v in enumerate(self.operands):
            if v is None:
                inputs.append(None)
            elif i in self.resident_local:
                inputs.append(self.resident_local[i])
            else:
                box = plan.operands[i]
                assert box is not None
                inputs.append(local_tensor(self.bases_in[self.buffer_of[k, i]][i], self.dtypes[i], box,
                                           self.shape.constants[i]))
        return tuple(inputs)

    def _emit_compute(self, k: int, plan: SlicePlan) -> tuple[int, tuple[LocalTensor, ...]]:
        op, b = self.op, k % self.buffers
        outputs = tuple(local_tensor(self.bases_out[b][j], self.result_dtypes[j], plan.outputs[j])
                        for j in range(len(op.results)))
        deps = [*self.loads[k], *self.resident_loads, *self.stores.get(k - self.buffers, [])]
        total_out = max(1, int(np.prod(self.state.places[op.results[0]].shape)))
        share = int(np.prod(slicing.sizes(plan.outputs[0]))) / total_out
        macs = round(op_macs(self.shape.kind, op) * share)
        compute = self.state.program.emit(Compute, self.shape.kind, self._inputs(k, plan), outputs, plan.attrs,
                                          deps=deps, layer=self.layer, macs=macs)
        for i in self.streamed:
            self.last_reader[i, self.buffer_of[k, i]] = compute
        return compute, outputs

    def _emit_stores(self, k: int, plan: SlicePlan, compute: int, outputs: tuple[LocalTensor, ...]) -> None:
        ids = []
        for j, value in enumerate(self.op.results):
            dst = self.state.places[value].view().box(*starts_sizes(plan.outputs[j]))
            ids.append(self.state.program.emit(DmaStore, outputs[j], dst, deps=[compute], layer=self.layer))
            self.state.written_by[value] = ids[-1]
        self.stores[k] = ids
