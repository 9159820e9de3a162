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
from dataclasses import dataclass

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
    nbytes,
    op_macs,
    starts_sizes,
)
from tpu_xdsl.backend.lanes import local_tensor
from tpu_xdsl.backend.op_shapes import op_shape
from tpu_xdsl.backend.slicing import Box, OpShape, SlicePlan
from tpu_xdsl.device.isa import Compute, DmaLoad, DmaStore, LocalTensor
from tpu_xdsl.dialects.module import is_none, tensor_names
from tpu_xdsl.weights import is_weight


def emit_compute(state: CodegenState, op: Operation, kind: str, layer: str, prologue: Operation | None = None) -> None:
    """The op computed over slices of its output that fit local memory; with a
    `prologue` cast (`prologue_casts`), that cast runs in each slice first, on the box
    of its input the op reads (falling back to the cast alone, then the op, when the
    slices do not take the cast's input beside the op's)."""
    operands: list[SSAValue | None] = [None if is_none(v) else v for v in op.operands]
    shape = op_shape(op, is_weight)
    dtypes = [None if v is None else state.places[v].dtype for v in operands]
    result_dtypes = [state.places[r].dtype for r in op.results]
    if prologue is not None:
        if _emit_with_prologue(state, op, shape, operands, dtypes, result_dtypes, layer, prologue):
            return
        emit_compute(state, prologue, "cast", (tensor_names(prologue) or ["cast"])[0])
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


def _emit_with_prologue(state: CodegenState, op: Operation, shape: OpShape, operands: list[SSAValue | None],
                        dtypes: list, result_dtypes: list, layer: str, cast: Operation) -> bool:
    """The op's slices with `cast` run first in each: its input loaded, the cast into one
    scratch buffer, the op on that. Slices are chosen as for the op alone; False (nothing
    emitted) when the cast's input buffers and the scratch do not fit beside the op's."""
    try:
        slices, buffers = choose_slices(state.chip, op, shape, dtypes, result_dtypes, layer)
    except CodegenError:
        return False
    source = cast.operands[0]
    # The slices read the cast's input while they write the op's result: they must not
    # share bytes (tpu-assign-memory keeps that input live until the op; a module
    # addressed otherwise may not).
    read, written = state.places[source], state.places[op.results[0]]
    if read.addr < written.addr + nbytes(written) and written.addr < read.addr + nbytes(read):
        return False
    # The cast's other operands (per-channel scales): constants every slice reads whole,
    # loaded once; otherwise the cast runs alone.
    cast_shape = op_shape(cast, is_weight)
    boxes = [slicing.plan(cast_shape, plan.operands[0]).operands for plan in slices]  # type: ignore[arg-type]
    extras = []
    for j, value in enumerate(cast.operands[1:], start=1):
        if is_none(value):
            continue
        if not is_weight(value) or any(b[j] != boxes[0][j] for b in boxes) or boxes[0][j] is None:
            return False
        extras.append((j, value, boxes[0][j]))
    prologue = _Prologue(source, state.places[source].dtype, cast_shape, (tensor_names(cast) or ["cast"])[0],
                         tuple(extras))
    try:  # reserves local memory, emits nothing (the op has no constant operand)
        emitter = _SliceEmitter(state, op, shape, operands, slices, [], layer, dtypes, result_dtypes, buffers,
                                prologue)
    except CodegenError:
        return False
    emitter.run()
    return True


@dataclass(frozen=True)
class _Prologue:
    """A cast run in each slice of the op reading it: the tensor it reads, its dtype, its
    shape (for each slice's attributes) and its layer name."""

    source: SSAValue
    dtype: str
    shape: OpShape
    layer: str
    extras: tuple[tuple[int, SSAValue, Box], ...] = ()  # (operand index, constant, its box)


class _SliceEmitter:
    """The instructions of one op's slices. An operand is loaded only when its box changes
    from the slice before (slices run N, C, H, W from the outside in, so a filter's box
    stays while the rows of one channel slice go by); each new box goes into the
    operand's other buffer, once the last compute that read that buffer is done."""

    def __init__(self, state: CodegenState, op: Operation, shape: OpShape, operands: Sequence[SSAValue | None],
                 slices: list[SlicePlan], resident: list[int], layer: str, dtypes, result_dtypes, buffers: int,
                 prologue: _Prologue | None = None):
        self.state, self.op, self.shape, self.operands = state, op, shape, operands
        self.slices, self.layer, self.dtypes, self.result_dtypes, self.buffers = (
            slices, layer, dtypes, result_dtypes, buffers)
        self.prologue = prologue
        # What operand i's loads read, and in what dtype: a prologue's cast reads operand 0's
        # source.
        self.loaded = list(operands)
        self.loaded_dtypes = list(dtypes)
        if prologue is not None:
            self.loaded[0], self.loaded_dtypes[0] = prologue.source, prologue.dtype
        alloc = LocalAllocator(state.chip)
        self.resident_local: dict[int, LocalTensor] = {}
        self.resident_loads: list[int] = []
        for i in resident:
            self._load_resident(alloc, i)
        self.streamed = [i for i, v in enumerate(operands) if v is not None and i not in resident]
        constant = shape.constants
        sizes_in = {
            i: max(alloc.lane_bytes(self.loaded_dtypes[i], s.operands[i], constant[i]) for s in slices)
            for i in self.streamed
        }
        sizes_out = [
            max(alloc.lane_bytes(result_dtypes[j], s.outputs[j]) for s in slices) for j in range(len(op.results))
        ]
        self.bases_in = [{i: alloc.reserve(sizes_in[i]) for i in self.streamed} for _ in range(buffers)]
        self.bases_out = [[alloc.reserve(size) for size in sizes_out] for _ in range(buffers)]
        self.scratch = (alloc.reserve(max(alloc.lane_bytes(dtypes[0], s.operands[0]) for s in slices))
                        if prologue is not None else 0)
        # The prologue cast's constants: reserved here, loaded when the slices start.
        self.extra_locals: dict[int, LocalTensor] = {}
        self.extra_loads: list[int] = []
        if prologue is not None:
            for j, value, box in prologue.extras:
                constant = prologue.shape.constants[j]
                self.extra_locals[j] = alloc.tensor(state.places[value].dtype, box, constant=constant)
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
        prologue = self.prologue
        for j, value, box in prologue.extras if prologue is not None else ():
            src = self.state.places[value].view().box(*starts_sizes(box))
            self.extra_loads.append(self.state.program.emit(DmaLoad, src, self.extra_locals[j],
                                                            layer=prologue.layer))  # type: ignore[union-attr]
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
        src = self.state.places[self.loaded[i]].view().box(*starts_sizes(box))  # type: ignore[index]
        local = local_tensor(self.bases_in[b][i], self.loaded_dtypes[i], box, self.shape.constants[i])
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
                inputs.append(local_tensor(self.bases_in[self.buffer_of[k, i]][i], self.loaded_dtypes[i], box,
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
        inputs = self._inputs(k, plan)
        reader = None
        if self.prologue is not None:
            box = plan.operands[0]
            assert box is not None
            scratch = local_tensor(self.scratch, self.dtypes[0], box)
            cast_plan = slicing.plan(self.prologue.shape, box)
            cast_inputs: list[LocalTensor | None] = [inputs[0], *([None] * (len(self.prologue.shape.operands) - 1))]
            for j, local in self.extra_locals.items():
                cast_inputs[j] = local
            reader = self.state.program.emit(Compute, "cast", tuple(cast_inputs), (scratch,), cast_plan.attrs,
                                             deps=[*deps, *self.extra_loads], layer=self.prologue.layer)
            inputs, deps = (scratch, *inputs[1:]), [reader, *deps]
        compute = self.state.program.emit(Compute, self.shape.kind, inputs, outputs, plan.attrs,
                                          deps=deps, layer=self.layer, macs=macs)
        for i in self.streamed:
            self.last_reader[i, self.buffer_of[k, i]] = reader if reader is not None and i == 0 else compute
        return compute, outputs

    def _emit_stores(self, k: int, plan: SlicePlan, compute: int, outputs: tuple[LocalTensor, ...]) -> None:
        ids = []
        for j, value in enumerate(self.op.results):
            dst = self.state.places[value].view().box(*starts_sizes(plan.outputs[j]))
            ids.append(self.state.program.emit(DmaStore, outputs[j], dst, deps=[compute], layer=self.layer))
            self.state.written_by[value] = ids[-1]
        self.stores[k] = ids
