"""Codegen: an addressed TPU module (`tpu-assign-memory`) -> a device program (`TpuModel`).

Op by op, in program order (layer groups come later):

- data movement that only reorders elements (reshape, permute, slice, expand,
  depth2space, split, concat without rescaling, pad, tile) becomes DMA copies
  DDR -> DDR through strided views: the view of a kernel is found by running
  it on an array of element indices and reading off the strides;
- every other op computes in local memory over slices of its output sized so
  that the slices fit (N first, then H with the halos of windows, then C;
  `slicing`): per slice, DMA loads of its operand boxes, one compute, one
  DMA store. Constant operands read whole are loaded once per op. With two or
  more slices the buffers are doubled, so the load of slice i+1 overlaps the
  compute of slice i (loads run one slice ahead on the DMA queue; the
  dependency tokens guard buffer reuse).

DDR hazards need no tokens: every DDR access is on the DMA queue, which runs
in program order. Local-memory hazards between the two engines are explicit
dependencies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
)
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.backend import channel_parts, recurrent, slicing
from tpu_xdsl.backend.lanes import lane_bytes, local_tensor
from tpu_xdsl.backend.layer_groups import GroupPlan, GroupPlanner, Layout, ginfo_layout
from tpu_xdsl.backend.layer_groups.cost import resident_keys
from tpu_xdsl.backend.layer_groups.layout import layout_problem, weights_clear_of
from tpu_xdsl.backend.op_shapes import kernel_attrs, op_shape
from tpu_xdsl.backend.slicing import Box, OpShape
from tpu_xdsl.device.chip import ChipConfig, chip_config
from tpu_xdsl.device.isa import (
    Compute,
    DdrView,
    DmaCopy,
    DmaFill,
    DmaLoad,
    DmaStore,
    Instruction,
    LocalTensor,
    dtype_name,
)
from tpu_xdsl.device.model_file import GroupDesc, IoDesc, TensorDesc, TpuModel
from tpu_xdsl.dialects.attr_values import op_attrs, to_py
from tpu_xdsl.dialects.module import is_none, main_func, tensor_names
from tpu_xdsl.dialects.quant_types import qparams_of
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.kernels import ResultSpec, load_all
from tpu_xdsl.kernels.dtypes import numpy_dtype
from tpu_xdsl.kernels.quant import ChannelQParams
from tpu_xdsl.weights import is_weight, weight_name, weights_of

_REORDER = {
    "reshape", "flatten", "squeeze", "unsqueeze", "permute", "slice", "expand", "depth2space", "upsample",
}


def _reorders(kind: str, attrs: dict[str, Any]) -> bool:
    """Whether the op only moves elements (its kernel on an index array says where from);
    a resize only in nearest mode (the others compute new values)."""
    return kind in _REORDER or kind == "interp" and attrs.get("mode") == "nearest"


class CodegenError(TpuXdslError):
    """An op cannot be compiled for the chip (too large for local memory, unsupported)."""


@dataclass
class _Tensor:
    """A value's place in DDR."""

    addr: int
    shape: tuple[int, ...]
    dtype: str

    def view(self) -> DdrView:
        return DdrView.contiguous(self.addr, self.dtype, self.shape)


@dataclass
class _PreparedGroup:
    """A tpu.group ready to emit: its plan, lane layout, DDR places and stored values by
    key, and the weights a group before it loaded ahead (key -> local tensor, load)."""

    plan: GroupPlan
    layout: Layout
    ddr: dict[str, _Tensor]
    written: dict[str, SSAValue]
    prefetched: dict[str, tuple[LocalTensor, int]] = field(default_factory=dict)


@dataclass
class _Program:
    chip: ChipConfig
    instructions: list[Instruction] = field(default_factory=list)

    def emit(self, cls, *args, deps: Sequence[int] = (), layer: str = "", **kwargs) -> int:
        index = len(self.instructions)
        self.instructions.append(cls(index, *args, deps=tuple(sorted(set(deps))), layer=layer, **kwargs))
        return index


def _ddr_addresses(op: Operation) -> list[int]:
    attr = op.attributes.get("ddr")
    if not isinstance(attr, ArrayAttr):
        raise CodegenError(f"'{op.name}' ({', '.join(tensor_names(op))}) has no DDR address: run tpu-assign-memory first")
    return [a.value.data for a in attr.data if isinstance(a, IntegerAttr)]


def _tensor_of(value: SSAValue, places: dict[SSAValue, _Tensor]) -> _Tensor:
    return places[value]


class Codegen:
    def __init__(self, module: ModuleOp, chip: ChipConfig):
        self.module = module
        self.chip = chip
        self.program = _Program(chip)
        self.places: dict[SSAValue, _Tensor] = {}
        self.written_by: dict[SSAValue, int] = {}
        self.weights = weights_of(module)
        self.coefficients = bytearray()
        self.group_descs: list[GroupDesc] = []
        self.prepared: dict[Operation, _PreparedGroup] = {}  # instructions of group i carry group=i

    # -- the whole module ------------------------------------------------------------

    def run(self) -> TpuModel:
        main = main_func(self.module)
        ops = [op for op in main.body.block.ops if op.name not in ("func.return", "top.none")]
        for op in ops:  # every place first: a group loads the next group's weights ahead
            addresses = _ddr_addresses(op)
            # A recurrent layer's unused outputs are none results: no place.
            tensors = [value for value in op.results if isinstance(value.type, TensorType)]
            for value, addr in zip(tensors, addresses, strict=True):
                t = value.type
                assert isinstance(t, TensorType)
                self.places[value] = _Tensor(addr, tuple(t.get_shape()), dtype_name(numpy_dtype(t.element_type)))
        for op in ops:
            if op.name == "top.weight":
                self._place_weight(op)
            elif op.name == "tpu.group":
                self._lower_tpu_group(op)
            elif op.name != "top.input":
                self.lower(op)
        return self._model(main)

    def _place_weight(self, op: Operation) -> None:
        place = self.places[op.results[0]]
        data = np.ascontiguousarray(np.asarray(self.weights[weight_name(op)]).astype(numpy_dtype(op.results[0].type.element_type)))  # type: ignore[attr-defined]
        raw = data.tobytes()
        end = place.addr + len(raw)
        if end > len(self.coefficients):
            self.coefficients.extend(bytes(end - len(self.coefficients)))
        self.coefficients[place.addr : end] = raw

    def _io(self, value: SSAValue, name: str) -> IoDesc:
        place = self.places[value]
        qparams = qparams_of(value.type, self.weights)
        if isinstance(qparams, ChannelQParams):
            scales = tuple(float(s) for s in qparams.scales)
            return IoDesc(name, place.shape, place.dtype, place.addr, scales=scales, channel_axis=qparams.axis)
        if qparams is not None:
            return IoDesc(name, place.shape, place.dtype, place.addr, qparams.scale, qparams.zero_point)
        return IoDesc(name, place.shape, place.dtype, place.addr)

    def _model(self, main) -> TpuModel:
        inputs = [self._io(op.results[0], (tensor_names(op) or ["input"])[0]) for op in main.body.block.ops if op.name == "top.input"]
        ret = main.body.block.last_op
        outputs = []
        for i, value in enumerate(ret.operands):
            owner = value.owner
            names = tensor_names(owner) if isinstance(owner, Operation) else []
            index = owner.results.index(value) if isinstance(owner, Operation) else 0
            outputs.append(self._io(value, names[index] if index < len(names) else f"output{i}"))
        tensors = []
        for value, writer in self.written_by.items():
            owner = value.owner
            assert isinstance(owner, Operation)
            names = tensor_names(owner)
            index = owner.results.index(value)
            if index >= len(names):
                continue
            io = self._io(value, names[index])
            tensors.append(TensorDesc(io.name, io.shape, io.dtype, io.addr, writer, io.scale, io.zero_point, io.scales, io.channel_axis))
        attr = self.module.attributes.get("module.ddr_bytes")
        ddr_bytes = attr.value.data if isinstance(attr, IntegerAttr) else max(
            (p.addr + _nbytes(p) for p in self.places.values()), default=0
        )
        name = self.module.attributes.get("module.name")
        mode = self.module.attributes.get("module.mode")
        preprocess = self.module.attributes.get("module.preprocess")
        return TpuModel(
            name=name.data if isinstance(name, StringAttr) else "model",
            chip=self.chip.name,
            mode=mode.data if isinstance(mode, StringAttr) else "F32",
            instructions=self.program.instructions,
            coefficients=bytes(self.coefficients),
            ddr_bytes=int(ddr_bytes),
            inputs=inputs,
            outputs=outputs,
            tensors=tensors,
            groups=self.group_descs,
            preprocess=to_py(preprocess) if preprocess is not None else None,
        )

    # -- one op ----------------------------------------------------------------------------

    def lower(self, op: Operation) -> None:
        kind = op.name.split(".", 1)[1]
        layer = (tensor_names(op) or [kind])[0]
        attrs = kernel_attrs(op)
        if _reorders(kind, attrs) and self._reorder(op, attrs, layer):
            return
        if kind in ("split", "concat", "pad", "tile") and self._moves(op, kind, attrs, layer):
            return
        if kind in ("lstm", "gru"):
            self._recurrent(op, kind, attrs, layer)
            return
        self._compute(op, kind, attrs, layer)

    def _recurrent(self, op: Operation, kind: str, attrs: dict[str, Any], layer: str) -> None:
        """tpu.lstm / tpu.gru split over the lanes by hidden unit (`backend.recurrent`)."""
        operands = [None if is_none(v) else self.places[v].view() for v in op.operands]
        results = [self.places[r].view() if r in self.places else None for r in op.results]
        x, w = operands[0], operands[1]
        assert x is not None and w is not None
        shape = recurrent.recurrent_shape(kind, attrs, x.shape, x.dtype, w.dtype, len(results) > 2 and results[2] is not None)
        places = recurrent.RecurrentPlaces(x, w, operands[2], operands[3], operands[4],  # type: ignore[arg-type]
                                           operands[5] if len(operands) > 5 else None, *results,
                                           *([None] if len(results) < 3 else []))
        try:
            emitter = recurrent.RecurrentEmitter(self.chip, self.program.emit, shape, places, attrs, layer)
        except recurrent.RecurrentFitError as e:
            raise CodegenError(f"'{op.name}' ({layer}): {e}") from None
        emitter.run()
        for value, name in zip(op.results, ("y", "y_h", "y_c")):
            if name in emitter.written:
                self.written_by[value] = emitter.written[name]

    # layer groups --------------------------------------------------------------------

    def _prepare_group(self, group: Operation) -> _PreparedGroup:
        """A tpu.group's plan (its steps planned again from its ops and its cut, n_slices x
        h_slices), the lane addresses of its ginfo, and where its tensors are in DDR."""
        if group in self.prepared:
            return self.prepared[group]
        body = list(group.regions[0].block.ops)
        loaded = {op.results[0]: op.operands[0] for op in body if op.name == "tpu.load"}
        stores = [op for op in body if op.name == "tpu.store"]
        ops = [op for op in body if op.name not in ("tpu.load", "tpu.store", "tpu.yield")]
        planner = GroupPlanner(self.chip, lambda v: is_weight(loaded.get(v, v)), lambda v: loaded.get(v, v))
        counts = (_int_attr(group, "n_slices"), _int_attr(group, "h_slices"))
        name = (tensor_names(group) or ["group"])[0]
        plan = planner.plan(ops, [store.operands[0] for store in stores], counts)
        if plan is None:
            raise CodegenError(
                f"tpu.group '{name}' cannot run on {self.chip.name} in {counts[0]}x{counts[1]} steps "
                "(an op cannot join a group, or the steps do not fit local memory): run tpu-layer-group again"
            )
        keys = {v: k for k, v in plan.values.items()}
        ddr = {k: self.places[v] for k, v in plan.values.items() if v in self.places}
        written = {}
        for store, result in zip(stores, group.results, strict=True):
            k = keys[store.operands[0]]
            ddr[k], written[k] = self.places[result], result
        layout = ginfo_layout(plan, body, keys)
        problem = layout_problem(layout, plan.layout, self.chip.lmem_bytes)
        if problem:
            raise CodegenError(f"tpu.group '{name}': {problem}; run tpu-layer-group again")
        prepared = self.prepared[group] = _PreparedGroup(plan, layout, ddr, written)
        return prepared

    def _lower_tpu_group(self, group: Operation) -> None:
        """A tpu.group, emitted as a 3-stage pipeline; when the op after it is a group whose
        weights lie clear of this one's lane memory, their loads go in while this one runs."""
        prepared = self._prepare_group(group)
        after = group.next_op
        while after is not None and after.name in ("top.weight", "top.none"):
            after = after.next_op
        following, ahead = None, []
        if after is not None and after.name == "tpu.group":
            following = self._prepare_group(after)
            ahead = weights_clear_of(following.layout, prepared.layout)
        self._emit_group(prepared, following, ahead)

    def _emit_group(self, prepared: _PreparedGroup, following: _PreparedGroup | None = None,
                    ahead: Sequence[str] = ()) -> None:
        program = self.program
        plan, layout, ddr, written = prepared.plan, prepared.layout, prepared.ddr, prepared.written
        ops, members, steps, constants, dtypes = plan.ops, plan.members, plan.steps, plan.constants, plan.dtypes
        produced = {k for m in members for k in m.results}
        layer = (tensor_names(ops[-1]) or ["group"])[0]
        names = tuple((tensor_names(op) or [member.shape.kind])[0] for op, member in zip(ops, members, strict=True))
        group = len(self.group_descs)
        self.group_descs.append(GroupDesc(layer, names, plan.n_slices, plan.h_slices))
        before = next((i.id for i in reversed(program.instructions) if isinstance(i, Compute)), None)
        # Weights stay resident. Member 0's are loaded first, then the inputs of step 0, then
        # the others' in member order: each member waits only for its own weights, so later
        # weights arrive while the first members compute. Weights the group before loaded
        # ahead (`prefetched`) are not loaded again.
        resident: dict[str, LocalTensor] = {}
        resident_load: dict[str, int] = {}
        for k, (early, load) in prepared.prefetched.items():
            resident[k], resident_load[k] = early, load
        by_member = resident_keys(members, constants)

        def emit_weights(m: int) -> None:
            for k in by_member[m]:
                if k in resident:
                    continue
                place = ddr[k]
                resident[k] = local_tensor(layout.resident[k], place.dtype, slicing.whole(place.shape), constant=True)
                resident_load[k] = program.emit(DmaLoad, place.view(), resident[k], layer=layer, group=group)

        buffers = layout.buffers
        inputs = [k for k in steps[0].boxes if k not in produced]
        loads: dict[int, list[int]] = {}
        last_compute: dict[int, int] = {}
        stores: dict[int, list[int]] = {}

        def local(k: str, box: Box, b: int) -> LocalTensor:
            return local_tensor(layout.streamed[k] + b * layout.sizes[k], dtypes[k], box)

        def emit_loads(s: int) -> None:
            b = s % buffers
            deps = [last_compute[s - buffers]] if s - buffers in last_compute else []
            loads[s] = [
                program.emit(DmaLoad, ddr[k].view().box(*_starts_sizes(steps[s].boxes[k])),
                             local(k, steps[s].boxes[k], b), deps=deps, layer=layer, group=group)
                for k in inputs
            ]

        emit_weights(0)
        emit_loads(0)
        for m in range(1, len(members)):
            emit_weights(m)
        if following is not None:
            # The next group's weights that lie in lane memory this group does not touch,
            # once whatever ran before this group is done with it.
            next_plan, next_layer = following.plan, (tensor_names(following.plan.ops[-1]) or ["group"])[0]
            for keys in resident_keys(next_plan.members, next_plan.constants):
                for k in (k for k in keys if k in ahead):
                    place = following.ddr[k]
                    early = local_tensor(following.layout.resident[k], place.dtype, slicing.whole(place.shape),
                                         constant=True)
                    load = program.emit(DmaLoad, place.view(), early, deps=[] if before is None else [before],
                                        layer=next_layer, group=group + 1)
                    following.prefetched[k] = (early, load)
        for s, step in enumerate(steps):
            b = s % buffers
            if buffers == 1 and s > 0:
                emit_loads(s)
            if buffers == 2 and s + 1 < len(steps):
                emit_loads(s + 1)
            produced_by: dict[str, int] = {}
            for index, (op, member, step_plan) in enumerate(zip(ops, members, step.plans, strict=True)):
                deps = [*loads[s], *stores.get(s - buffers, []),
                        *(resident_load[k] for k in member.operands if k is not None and k in constants)]
                operands_local: list[LocalTensor | None] = []
                for i, k in enumerate(member.operands):
                    if k is None:
                        operands_local.append(None)
                    elif k in constants:
                        operands_local.append(resident[k])
                    elif (index, i) in step.copies:
                        held, read = step.boxes[k], step.copies[index, i]
                        dims = slicing.sizes(read)
                        addr = layout.buffer[index] + b * layout.buffer_sizes[index] + layout.copy_offsets[index, i]
                        part = local_tensor(addr, dtypes[k], read)
                        starts = [r[0] - h[0] for r, h in zip(read, held, strict=True)]
                        attrs = {"axes": [0, 1, 2, 3], "starts": starts,
                                 "ends": [a + d for a, d in zip(starts, dims, strict=True)], "steps": [1, 1, 1, 1]}
                        program.emit(Compute, "slice", (local(k, held, b),), (part,), attrs, deps=deps, layer=layer,
                                     group=group)
                        operands_local.append(part)
                    else:
                        operands_local.append(local(k, step.boxes[k], b))
                (result,) = member.results
                out = local(result, step.boxes[result], b)
                share = int(np.prod(slicing.sizes(step.boxes[result]))) / max(1, int(np.prod(member.shape.results[0])))
                produced_by[result] = program.emit(
                    Compute, member.shape.kind, tuple(operands_local), (out,), step_plan.attrs, deps=deps,
                    layer=names[index], macs=round(op_macs(member.shape.kind, op) * share), group=group,
                )
            last_compute[s] = max(produced_by.values())
            stores[s] = []
            for k in plan.stored:
                dst = ddr[k].view().box(*_starts_sizes(step.boxes[k]))
                stores[s].append(program.emit(DmaStore, local(k, step.boxes[k], b), dst, deps=[produced_by[k]],
                                              layer=layer, group=group))
                self.written_by[written[k]] = stores[s][-1]

    # DMA-only ops ------------------------------------------------------------------

    def _copy(self, src: DdrView, dst: DdrView, layer: str) -> int:
        return self.program.emit(DmaCopy, src, dst, layer=layer)

    def _reorder(self, op: Operation, attrs: dict[str, Any], layer: str) -> bool:
        """One strided copy when the op's kernel maps output elements to input elements affinely."""
        source = self.places[op.operands[0]]
        target = self.places[op.results[0]]
        index = np.arange(int(np.prod(source.shape)), dtype=np.int64).reshape(source.shape)
        kind = op.name.split(".", 1)[1]
        (mapped,) = load_all()[kind]([index], attrs, [ResultSpec(target.shape, np.dtype(np.int64))])
        found = _strided_view(np.asarray(mapped))
        if found is None:
            return False
        offset, shape, steps = found
        size = numpy_dtype_size(source.dtype)
        src = DdrView(source.addr + offset * size, source.dtype, shape, steps)
        dst = DdrView.contiguous(target.addr, target.dtype, shape)
        self.written_by[op.results[0]] = self._copy(src, dst, layer)
        return True

    def _moves(self, op: Operation, kind: str, attrs: dict[str, Any], layer: str) -> bool:
        if kind == "concat":
            if attrs.get("multiplier"):
                return False
            target = self.places[op.results[0]]
            axis = int(attrs["axis"]) % len(target.shape)
            start = 0
            last = -1
            for value in op.operands:
                part = self.places[value]
                box = [(0, d) for d in target.shape]
                box[axis] = (start, part.shape[axis])
                dst = target.view().box(tuple(s for s, _ in box), tuple(n for _, n in box))
                last = self._copy(part.view(), dst, layer)
                start += part.shape[axis]
            self.written_by[op.results[0]] = last
            return True
        if kind == "split":
            source = self.places[op.operands[0]]
            axis = int(attrs.get("axis", 0)) % len(source.shape)
            start = 0
            for value in op.results:
                part = self.places[value]
                starts = tuple(start if a == axis else 0 for a in range(len(source.shape)))
                self.written_by[value] = self._copy(source.view().box(starts, part.shape), part.view(), layer)
                start += part.shape[axis]
            return True
        if kind == "pad":
            return self._pad(op, attrs, layer)
        if kind == "tile":
            source, target = self.places[op.operands[0]], self.places[op.results[0]]
            repeats = [int(r) for r in attrs["repeats"]]
            dst_strides = target.view().strides
            shape, dst_s, src_s = [], [], []
            for r, d, ts, ss in zip(repeats, source.shape, dst_strides, source.view().strides, strict=True):
                shape += [r, d]
                dst_s += [d * ts, ts]
                src_s += [0, ss]
            src = DdrView(source.addr, source.dtype, tuple(shape), tuple(src_s))
            dst = DdrView(target.addr, target.dtype, tuple(shape), tuple(dst_s))
            self.written_by[op.results[0]] = self._copy(src, dst, layer)
            return True
        return False

    def _pad(self, op: Operation, attrs: dict[str, Any], layer: str) -> bool:
        """The input copied into the middle of the output; around it the constant (a fill
        first), or for reflect and edge modes copies of the output's own rows read
        backwards (stride -1) or repeated (stride 0), one axis after the other."""
        mode = attrs.get("mode", "constant")
        pads = [int(p) for p in attrs["pads"]]
        source, target = self.places[op.operands[0]], self.places[op.results[0]]
        rank = len(source.shape)
        begins, ends = pads[:rank], pads[rank:]
        if min(pads, default=0) < 0 or mode not in ("constant", "reflect", "edge"):
            return False
        if mode == "reflect" and any(max(b, e) >= d for b, e, d in zip(begins, ends, source.shape)):
            return False  # reflections of reflections
        if mode == "constant":
            self._copy_fill(target, float(attrs.get("value", 0.0)), layer)
        last = self._copy(source.view(), target.view().box(tuple(begins), source.shape), layer)
        if mode != "constant":
            view = target.view()

            def written(axis: int, start: int, size: int, step: int) -> DdrView:
                """Along `axis` rows start, start + step, ...; axes before it whole (their
                borders are done), axes after it the input's part."""
                starts = [0 if a < axis else begins[a] for a in range(rank)]
                sizes = [target.shape[a] if a < axis else source.shape[a] for a in range(rank)]
                starts[axis], sizes[axis] = start, size
                box = view.box(tuple(starts), tuple(sizes))
                strides = list(box.strides)
                strides[axis] *= step
                return DdrView(box.addr, box.dtype, box.shape, tuple(strides))

            reflect = mode == "reflect"
            for axis, (begin, end) in enumerate(zip(begins, ends)):
                inner = begin + source.shape[axis]  # one past the input's last row
                if begin:
                    src = written(axis, 2 * begin if reflect else begin, begin, -1 if reflect else 0)
                    last = self._copy(src, written(axis, 0, begin, 1), layer)
                if end:
                    src = written(axis, inner - 2 if reflect else inner - 1, end, -1 if reflect else 0)
                    last = self._copy(src, written(axis, inner, end, 1), layer)
        self.written_by[op.results[0]] = last
        return True

    def _copy_fill(self, target: _Tensor, value: float, layer: str) -> int:
        return self.program.emit(DmaFill, target.view(), value, layer=layer)

    # compute ops ---------------------------------------------------------------------------

    def _compute(self, op: Operation, kind: str, attrs: dict[str, Any], layer: str) -> None:
        operands: list[SSAValue | None] = [None if is_none(v) else v for v in op.operands]
        shape = op_shape(op, is_weight)
        dtypes = [None if v is None else self.places[v].dtype for v in operands]
        result_dtypes = [self.places[r].dtype for r in op.results]
        try:
            slices, buffers = self._slices(op, shape, dtypes, result_dtypes, layer)
        except CodegenError:
            # A float conv too large even in the smallest output slices: also cut along
            # its input channels, summing the parts (backend/channel_parts.py).
            if channel_parts.applies(shape, dtypes) and channel_parts.emit(
                self, op, shape, operands, dtypes, result_dtypes[0], layer, op_macs(kind, op)
            ):
                return
            raise
        resident = [
            i for i, v in enumerate(operands)
            if v is not None and (shape.constants[i] or len(slices) > 1) and all(s.operands[i] == slices[0].operands[i] for s in slices)
        ]
        self._emit_slices(op, shape, operands, slices, resident, layer, dtypes, result_dtypes, buffers)

    def _slices(self, op: Operation, shape: OpShape, dtypes, result_dtypes, layer: str) -> tuple[list[slicing.SlicePlan], int]:
        """Few slices whose working set fits local memory, and the buffers per streamed
        tensor: the output is cut in halves along N, then H, then C (the first of them
        whose cut makes the slices smaller: halving 20 channels saves nothing on 32 lanes),
        with two buffers (loads overlap computes); one when even the smallest slices
        need all of local memory."""
        out = shape.results[0]
        axes = slicing.splittable_axes(shape)
        for buffers in (2, 1):
            counts = [1] * len(out)
            plans = self._plans(shape, counts)
            while True:
                if self._footprint(shape, plans, dtypes, result_dtypes, buffers if len(plans) > 1 else 1) <= self.chip.lmem_bytes:
                    return plans, buffers if len(plans) > 1 else 1
                open_axes = [a for a in axes if counts[a] < out[a]]
                if not open_axes or len(plans) > 1 << 16:
                    break
                need = self._footprint(shape, plans, dtypes, result_dtypes, buffers)
                # Halve the axis that shrinks the working set most (the first open one when
                # no cut helps at once): a filter larger than the rows it reads is cut along
                # its output channels, rows of a large image along H.
                choice = None
                for axis in open_axes:
                    trial = list(counts)
                    trial[axis] = min(out[axis], counts[axis] * 2)
                    trial_plans = self._plans(shape, trial)
                    size = self._footprint(shape, trial_plans, dtypes, result_dtypes, buffers)
                    if choice is None or size < choice[0] and size < need:
                        choice = size, trial, trial_plans
                assert choice is not None
                _, counts, plans = choice
        raise CodegenError(
            f"'{op.name}' ({layer}) does not fit local memory ({self.chip.npu_num} lanes of "
            f"{self.chip.lmem_bytes} bytes) even in the smallest slices it can be cut into"
        )

    @staticmethod
    def _plans(shape: OpShape, counts: list[int]) -> list[slicing.SlicePlan]:
        out = shape.results[0]
        pieces = [slicing.split_axis(d, c) for d, c in zip(out, counts)]
        boxes = [tuple(combo) for combo in _product(pieces)]
        return [slicing.plan(shape, box) for box in boxes]

    def _footprint(self, shape: OpShape, plans: list[slicing.SlicePlan], dtypes, result_dtypes, buffers: int) -> int:
        """Bytes per lane the slices need: resident constants once, the rest `buffers` times."""
        per_lane = _LocalAllocator(self.chip).lane_bytes
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

    def _emit_slices(self, op, shape, operands, slices, resident, layer, dtypes, result_dtypes, buffers) -> None:
        kind, constant = shape.kind, shape.constants
        chip = self.chip
        program = self.program
        alloc = _LocalAllocator(chip)
        # resident operands: loaded once
        resident_local: dict[int, LocalTensor] = {}
        resident_loads: list[int] = []
        for i in resident:
            box = slices[0].operands[i]
            assert box is not None
            local = alloc.tensor(dtypes[i], box, constant=constant[i])
            resident_local[i] = local
            src = self.places[operands[i]].view().box(*_starts_sizes(box))
            resident_loads.append(program.emit(DmaLoad, src, local, layer=layer))
        streamed = [i for i, v in enumerate(operands) if v is not None and i not in resident]
        sizes_in = {i: max(alloc.lane_bytes(dtypes[i], s.operands[i], constant[i]) for s in slices) for i in streamed}
        sizes_out = [max(alloc.lane_bytes(result_dtypes[j], s.outputs[j]) for s in slices) for j in range(len(op.results))]
        bases_in = [{i: alloc.reserve(sizes_in[i]) for i in streamed} for _ in range(buffers)]
        bases_out = [[alloc.reserve(size) for size in sizes_out] for _ in range(buffers)]

        loads: dict[int, list[int]] = {}
        computes: dict[int, int] = {}
        stores: dict[int, list[int]] = {}
        # An operand is loaded only when its box changes from the slice before (slices run
        # N, C, H, W from the outside in, so a filter's box stays while the rows of one
        # channel slice go by); each new box goes into the operand's other buffer, once the
        # last compute that read that buffer is done.
        held: dict[int, Box | None] = {i: None for i in streamed}
        version = {i: -1 for i in streamed}
        current: dict[int, int] = {}  # operand -> the load of its current box
        buffer_of: dict[tuple[int, int], int] = {}  # (slice, operand) -> its buffer
        last_reader: dict[tuple[int, int], int] = {}  # (operand, buffer) -> the compute reading it last

        def emit_loads(k: int) -> None:
            plan = slices[k]
            ids = []
            for i in streamed:
                box = plan.operands[i]
                assert box is not None
                if box != held[i]:
                    held[i] = box
                    version[i] += 1
                    b = version[i] % buffers
                    src = self.places[operands[i]].view().box(*_starts_sizes(box))
                    local = local_tensor(bases_in[b][i], dtypes[i], box, constant[i])
                    deps = [last_reader[i, b]] if (i, b) in last_reader else []
                    current[i] = program.emit(DmaLoad, src, local, deps=deps, layer=layer)
                buffer_of[k, i] = version[i] % buffers
                ids.append(current[i])
            loads[k] = ids

        macs = op_macs(kind, op)
        total_out = max(1, int(np.prod(self.places[op.results[0]].shape)))
        # With two buffers the loads run one slice ahead (overlapping the compute before
        # them); with one, each slice's loads wait for the previous compute.
        emit_loads(0)
        for k, plan in enumerate(slices):
            if k > 0 and buffers == 1:
                emit_loads(k)
            if buffers == 2 and k + 1 < len(slices):
                emit_loads(k + 1)
            b = k % buffers
            inputs: list[LocalTensor | None] = []
            for i, v in enumerate(operands):
                if v is None:
                    inputs.append(None)
                elif i in resident_local:
                    inputs.append(resident_local[i])
                else:
                    box = plan.operands[i]
                    assert box is not None
                    inputs.append(local_tensor(bases_in[buffer_of[k, i]][i], dtypes[i], box, constant[i]))
            outputs = tuple(local_tensor(bases_out[b][j], result_dtypes[j], plan.outputs[j]) for j in range(len(op.results)))
            deps = [*loads[k], *resident_loads, *stores.get(k - buffers, [])]
            share = int(np.prod(slicing.sizes(plan.outputs[0]))) / total_out
            computes[k] = program.emit(
                Compute, kind, tuple(inputs), outputs, plan.attrs, deps=deps, layer=layer, macs=round(macs * share)
            )
            for i in streamed:
                last_reader[i, buffer_of[k, i]] = computes[k]
            ids = []
            for j, value in enumerate(op.results):
                dst = self.places[value].view().box(*_starts_sizes(plan.outputs[j]))
                ids.append(program.emit(DmaStore, outputs[j], dst, deps=[computes[k]], layer=layer))
                self.written_by[value] = ids[-1]
            stores[k] = ids


def numpy_dtype_size(dtype: str) -> int:
    from tpu_xdsl.device.isa import DTYPE_SIZES

    return DTYPE_SIZES[dtype]


def _nbytes(place: _Tensor) -> int:
    return int(np.prod(place.shape)) * numpy_dtype_size(place.dtype)


def _starts_sizes(box: Box) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(s for s, _ in box), tuple(n for _, n in box)


def _product(pieces: list[list[tuple[int, int]]]):
    import itertools

    return itertools.product(*pieces)


def _strided_view(index: np.ndarray) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
    """(offset, shape, strides) of one strided view that reads `index` (an array of element
    indices) in row-major order, or None. The shape refines index.shape: an axis that is not
    one stride (depth2space's rows and block offsets, a row repeated by nearest upsampling)
    is split into factors that each are."""
    found = _affine_strides(index)
    if found is not None:
        return found[0], tuple(index.shape), found[1]
    shape: list[int] = []
    for axis, size in enumerate(index.shape):
        line = index[tuple(slice(None) if a == axis else 0 for a in range(index.ndim))]
        factors = _axis_factors(line - line[0])
        if factors is None:
            return None
        shape += factors
    refined = index.reshape(shape)
    found = _affine_strides(refined)
    return None if found is None else (found[0], tuple(shape), found[1])


def _axis_factors(line: np.ndarray) -> list[int] | None:
    """Sizes (outer to inner, product len(line)) that split `line` (starting at 0) into
    axes along each of which it steps evenly, or None."""
    size = len(line)
    if size <= 1 or np.array_equal(line, np.arange(size) * line[1]):
        return [size]
    for inner in range(2, size):
        if size % inner:
            continue
        grid = line.reshape(size // inner, inner)
        if np.array_equal(grid, grid[:, :1] + grid[:1, :]):
            outer, rest = _axis_factors(grid[:, 0]), _axis_factors(grid[0, :])
            if outer is not None and rest is not None:
                return outer + rest
    return None


def _affine_strides(index: np.ndarray) -> tuple[int, tuple[int, ...]] | None:
    """(offset, strides) with index[o] = offset + sum(o_k * strides_k) for every o, or None."""
    if index.size == 0:
        return 0, tuple(0 for _ in index.shape)
    offset = int(index.reshape(-1)[0])
    strides = []
    expected = np.full(index.shape, offset, dtype=np.int64)
    for axis, size in enumerate(index.shape):
        if size == 1:
            strides.append(0)
            continue
        at = [0] * index.ndim
        at[axis] = 1
        step = int(index[tuple(at)]) - offset
        strides.append(step)
        shape = [1] * index.ndim
        shape[axis] = size
        expected = expected + (np.arange(size, dtype=np.int64) * step).reshape(shape)
    return (offset, tuple(strides)) if np.array_equal(expected, index) else None


def op_macs(kind: str, op: Operation) -> int:
    """The multiply-accumulates of a conv, deconv or matmul (TOP or TPU op; 0 for others)."""
    if kind not in ("conv", "deconv", "matmul"):
        return 0
    out = op.results[0].type.get_shape()  # type: ignore[attr-defined]
    if kind == "matmul":
        k = op.operands[0].type.get_shape()[-1]  # type: ignore[attr-defined]
        return int(np.prod(out)) * int(k)
    w = op.operands[1].type.get_shape()  # type: ignore[attr-defined]
    per_output = int(np.prod(w[1:])) if kind == "conv" else int(np.prod(w[2:])) * int(w[0]) // max(1, int(op_attrs(op).get("group", 1)))
    if kind == "deconv":
        x = op.operands[0].type.get_shape()  # type: ignore[attr-defined]
        return int(np.prod(x)) * int(np.prod(w[1:]))
    return int(np.prod(out)) * per_output


class _LocalAllocator:
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


def codegen(module: ModuleOp, chip_name: str | None = None) -> TpuModel:
    """The device program of an addressed TPU module (its tpu.groups run as layer groups)."""
    chip = module.attributes.get("module.chip")
    name = chip_name or (chip.data if isinstance(chip, StringAttr) else "bm1684x")
    return Codegen(module, chip_config(name)).run()


def _int_attr(op: Operation, name: str) -> int:
    attr = op.attributes.get(name)
    if not isinstance(attr, IntegerAttr):
        raise CodegenError(f"'{op.name}' has no integer attribute {name}")
    return int(attr.value.data)
