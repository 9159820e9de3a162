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


def emit_compute(state: CodegenState, op: Operation, kind: str, layer: str, prologue: Operation | None = None,
                 epilogue: Operation | None = None) -> None:
    """The op computed over slices of its output that fit local memory; with a
    `prologue` cast (`fused_casts.prologue_casts`), that cast runs in each slice first, on
    the box of its input the op reads; with an `epilogue` cast (`epilogue_casts`), it runs
    in each slice on the op's result, and the slice stores the cast's. When the slices do
    not take a cast beside the op, that cast runs alone (before or after the op)."""
    operands: list[SSAValue | None] = [None if is_none(v) else v for v in op.operands]
    shape = op_shape(op, is_weight)
    dtypes = [None if v is None else state.places[v].dtype for v in operands]
    result_dtypes = [state.places[r].dtype for r in op.results]

    def fused(before: Operation | None, after: Operation | None) -> bool:
        return _emit_fused(state, op, shape, operands, dtypes, result_dtypes, layer, before, after)

    if prologue is not None or epilogue is not None:
        if fused(prologue, epilogue):
            return
        if prologue is not None and epilogue is not None and fused(prologue, None):
            _emit_cast(state, epilogue)
            return
        if prologue is not None:
            _emit_cast(state, prologue)
        if epilogue is not None and fused(None, epilogue):
            return
    _emit_alone(state, op, kind, layer, shape, operands, dtypes, result_dtypes)
    if epilogue is not None:
        _emit_cast(state, epilogue)


def _emit_cast(state: CodegenState, cast: Operation) -> None:
    emit_compute(state, cast, "cast", (tensor_names(cast) or ["cast"])[0])


def _emit_alone(state: CodegenState, op: Operation, kind: str, layer: str, shape: OpShape,
                operands: list[SSAValue | None], dtypes: list, result_dtypes: list) -> None:
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


def _overlap(state: CodegenState, a: SSAValue, b: SSAValue) -> bool:
    one, other = state.places[a], state.places[b]
    return one.addr < other.addr + nbytes(other) and other.addr < one.addr + nbytes(one)


def _fused_cast(state: CodegenState, cast: Operation, boxes: list[Box]) -> _Cast | None:
    """A cast to run in each slice, whose first operand is at `boxes` (one per slice); None
    when its other operands (per-channel scales) are not constants every slice reads
    whole (they are loaded once)."""
    cast_shape = op_shape(cast, is_weight)
    plans = [slicing.plan(cast_shape, box).operands for box in boxes]
    extras = []
    for j, value in enumerate(cast.operands[1:], start=1):
        if is_none(value):
            continue
        if not is_weight(value) or any(p[j] != plans[0][j] for p in plans) or plans[0][j] is None:
            return None
        extras.append((j, value, plans[0][j]))
    return _Cast(cast, cast_shape, (tensor_names(cast) or ["cast"])[0], tuple(extras))  # type: ignore[arg-type]


def _emit_fused(state: CodegenState, op: Operation, shape: OpShape, operands: list[SSAValue | None],
                dtypes: list, result_dtypes: list, layer: str, prologue: Operation | None,
                epilogue: Operation | None) -> bool:
    """The op's slices with `prologue` run first in each (its input loaded, the cast into
    one scratch buffer, the op on that) and `epilogue` run last (the op into a scratch
    buffer, the cast into the buffer the slice stores). Slices are chosen as for the op
    alone; False (nothing emitted) when the casts' buffers do not fit beside the op's."""
    try:
        slices, buffers = choose_slices(state.chip, op, shape, dtypes, result_dtypes, layer)
    except CodegenError:
        return False
    # The slices read the op's input (or the prologue's) while they write its result (or
    # the epilogue's): they must not share bytes (tpu-assign-memory sees to it; a module
    # addressed otherwise may not).
    read = prologue.operands[0] if prologue is not None else op.operands[0]
    written = epilogue.results[0] if epilogue is not None else op.results[0]
    if _overlap(state, read, written):
        return False
    before = after = None
    if prologue is not None:
        before = _fused_cast(state, prologue, [plan.operands[0] for plan in slices])  # type: ignore[misc]
        if before is None:
            return False
    if epilogue is not None:
        after = _fused_cast(state, epilogue, [plan.outputs[0] for plan in slices])
        if after is None:
            return False
    try:  # reserves local memory, emits nothing (the op has no constant operand)
        emitter = _SliceEmitter(state, op, shape, operands, slices, [], layer, dtypes, result_dtypes, buffers,
                                before, after)
    except CodegenError:
        return False
    emitter.run()
    return True


@dataclass(frozen=True)
class _Cast:
    """A cast run in each slice of the op next to it: the cast, its shape (for each
    slice's attributes), its layer name and its constants."""

    op: Operation
    shape: OpShape
    layer: str
    extras: tuple[tuple[int, SSAValue, Box], ...] = ()  # (operand index, constant, its box)

    @property
    def source(self) -> SSAValue:
        return self.op.operands[0]

    @property
    def result(self) -> SSAValue:
        return self.op.results[0]


class _SliceEmitter:
    """The instructions of one op's slices. An operand is loaded only when its box changes
    from the slice before (slices run N, C, H, W from the outside in, so a filter's box
    stays while the rows of one channel slice go by); each new box goes into the
    operand's other buffer, once the last compute that read that buffer is done."""

    def __init__(self, state: CodegenState, op: Operation, shape: OpShape, operands: Sequence[SSAValue | None],
                 slices: list[SlicePlan], resident: list[int], layer: str, dtypes, result_dtypes, buffers: int,
                 prologue: _Cast | None = None, epilogue: _Cast | None = None):
        self.state, self.op, self.shape, self.operands = state, op, shape, operands
        self.slices, self.layer, self.dtypes, self.result_dtypes, self.buffers = (
            slices, layer, dtypes, result_dtypes, buffers)
        self.prologue, self.epilogue = prologue, epilogue
        # What operand i's loads read, and in what dtype: a prologue's cast reads operand 0's
        # source.
        self.loaded = list(operands)
        self.loaded_dtypes = list(dtypes)
        if prologue is not None:
            self.loaded[0], self.loaded_dtypes[0] = prologue.source, state.places[prologue.source].dtype
        # What the slices store: an epilogue's cast result instead of the op's.
        self.stored = [epilogue.result] if epilogue is not None else list(op.results)
        self.stored_dtypes = [state.places[v].dtype for v in self.stored]
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
            max(alloc.lane_bytes(self.stored_dtypes[j], s.outputs[j]) for s in slices) for j in range(len(self.stored))
        ]
        self.bases_in = [{i: alloc.reserve(sizes_in[i]) for i in self.streamed} for _ in range(buffers)]
        self.bases_out = [[alloc.reserve(size) for size in sizes_out] for _ in range(buffers)]
        # One scratch buffer each for a prologue's result and the op's result an epilogue
        # reads: the compute engine runs in order, so the next slice writes them only
        # after this one has read them.
        self.scratch = (alloc.reserve(max(alloc.lane_bytes(dtypes[0], s.operands[0]) for s in slices))
                        if prologue is not None else 0)
        self.scratch_out = (alloc.reserve(max(alloc.lane_bytes(result_dtypes[0], s.outputs[0]) for s in slices))
                            if epilogue is not None else 0)
        # The casts' constants: reserved here, loaded when the slices start.
        self.cast_locals: dict[tuple[int, int], LocalTensor] = {}  # (0 prologue / 1 epilogue, operand) -> local
        self.extra_loads: list[int] = []
        for which, cast in enumerate((prologue, epilogue)):
            if cast is None:
                continue
            for j, value, box in cast.extras:
                constant = cast.shape.constants[j]
                self.cast_locals[which, j] = alloc.tensor(state.places[value].dtype, box, constant=constant)
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
        for which, cast in enumerate((self.prologue, self.epilogue)):
            if cast is None:
                continue
            for j, value, box in cast.extras:
                src = self.state.places[value].view().box(*starts_sizes(box))
                self.extra_loads.append(self.state.program.emit(DmaLoad, src, self.cast_locals[which, j],
                                                                layer=cast.layer))
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

    def _emit_cast(self, which: int, box: Box, source: LocalTensor, result: LocalTensor, deps: list[int]) -> int:
        """A fused cast (0 the prologue, 1 the epilogue) on one slice's box."""
        cast = self.prologue if which == 0 else self.epilogue
        assert cast is not None
        inputs: list[LocalTensor | None] = [source, *([None] * (len(cast.shape.operands) - 1))]
        for (w, j), local in self.cast_locals.items():
            if w == which:
                inputs[j] = local
        attrs = slicing.plan(cast.shape, box).attrs
        return self.state.program.emit(Compute, "cast", tuple(inputs), (result,), attrs,
                                       deps=[*deps, *self.extra_loads], layer=cast.layer)

    def _emit_compute(self, k: int, plan: SlicePlan) -> tuple[int, tuple[LocalTensor, ...]]:
        op, b = self.op, k % self.buffers
        stored = tuple(local_tensor(self.bases_out[b][j], self.stored_dtypes[j], plan.outputs[j])
                       for j in range(len(self.stored)))
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
            reader = self._emit_cast(0, box, inputs[0], scratch, deps)  # type: ignore[arg-type]
            inputs, deps = (scratch, *inputs[1:]), [reader, *deps]
        outputs = stored
        if self.epilogue is not None:
            outputs = (local_tensor(self.scratch_out, self.result_dtypes[0], plan.outputs[0]),)
        compute = self.state.program.emit(Compute, self.shape.kind, inputs, outputs, plan.attrs,
                                          deps=deps, layer=self.layer, macs=macs)
        for i in self.streamed:
            self.last_reader[i, self.buffer_of[k, i]] = reader if reader is not None and i == 0 else compute
        if self.epilogue is not None:
            compute = self._emit_cast(1, plan.outputs[0], outputs[0], stored[0], [compute, *deps])
        return compute, stored

    def _emit_stores(self, k: int, plan: SlicePlan, compute: int, outputs: tuple[LocalTensor, ...]) -> None:
        ids = []
        for j, value in enumerate(self.stored):
            dst = self.state.places[value].view().box(*starts_sizes(plan.outputs[j]))
            ids.append(self.state.program.emit(DmaStore, outputs[j], dst, deps=[compute], layer=self.layer))
            self.state.written_by[value] = ids[-1]
        self.stores[k] = ids
