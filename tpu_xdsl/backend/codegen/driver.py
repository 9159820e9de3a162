"""The whole module: every value placed in DDR, the weights written into the coefficients,
each op emitted in program order (DMA copies, sliced computes, recurrent layers, layer
groups), and the `TpuModel` the device runs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.backend import recurrent
from tpu_xdsl.backend.codegen.constants import lay_out_coefficients
from tpu_xdsl.backend.codegen.dma import emit_move, emit_reorder, reorders
from tpu_xdsl.backend.codegen.dma_order import order_dma
from tpu_xdsl.backend.codegen.groups import GroupCodegen, WeightLoads
from tpu_xdsl.backend.codegen.slices import emit_compute
from tpu_xdsl.backend.codegen.state import (
    CodegenError,
    CodegenState,
    DdrTensor,
    Program,
    ddr_addresses,
    nbytes,
)
from tpu_xdsl.backend.fused_casts import epilogue_casts, prologue_casts
from tpu_xdsl.backend.op_shapes import kernel_attrs
from tpu_xdsl.backend.views import operand_offsets, result_offsets
from tpu_xdsl.device.chip import ChipConfig, chip_config
from tpu_xdsl.device.isa import dtype_name
from tpu_xdsl.device.model_file import IoDesc, TensorDesc, TpuModel
from tpu_xdsl.device.simulator import schedule
from tpu_xdsl.dialects.attr_values import to_py
from tpu_xdsl.dialects.module import is_none, main_func, tensor_names
from tpu_xdsl.dialects.quant_types import qparams_of
from tpu_xdsl.kernels.dtypes import numpy_dtype
from tpu_xdsl.kernels.quant import ChannelQParams
from tpu_xdsl.weights import is_weight, weight_name, weights_of

_MOVES = ("split", "concat", "pad", "tile")


class Codegen:
    """The device program of one addressed TPU module on one chip."""

    def __init__(self, module: ModuleOp, chip: ChipConfig, loads: WeightLoads | None = None):
        self.module = module
        self.chip = chip
        self.state = CodegenState(chip, Program(chip))
        self.groups = GroupCodegen(self.state, loads or WeightLoads())
        self.weights = weights_of(module)
        self.coefficients = bytearray()
        self.weight_bytes = 0  # the weights' own bytes, without the coefficient images
        self.moved = 0  # how far the coefficient images moved the activations up
        # (a value no instruction writes, the values whose writes complete it), in program
        # order: views and concatenations written in place (`backend/views.py`)
        self.complete_with: list[tuple[SSAValue, list[SSAValue]]] = []

    # -- the whole module ------------------------------------------------------------

    def run(self) -> TpuModel:
        main = main_func(self.module)
        ops = [op for op in main.body.block.ops if op.name not in ("func.return", "top.none")]
        for op in ops:  # every place first: a group loads the next group's weights ahead
            self._place(op)
        prologues, epilogues = prologue_casts(ops), epilogue_casts(ops)
        fused = set(prologues.values()) | set(epilogues.values())
        for op in ops:
            if op.name == "top.weight":
                self._place_weight(op)
            elif op.name == "tpu.group":
                self.groups.emit(op)
            elif op.name != "top.input" and op not in fused:
                self.lower(op, prologues.get(op), epilogues.get(op))
        self._place_images()
        program = self.state.program
        program.instructions, new_id = order_dma(self.chip, program.instructions)
        written_by = self.state.written_by = {value: new_id[i] for value, i in self.state.written_by.items()}
        for value, sources in self.complete_with:
            if all(source in written_by for source in sources):
                written_by[value] = max(written_by[source] for source in sources)
        return self._model(main)

    def _place_images(self) -> None:
        """The coefficients laid out again with the groups' weight images, the activations
        moved by the difference (`constants.lay_out_coefficients`)."""
        self.weight_bytes = len(self.coefficients)
        if not self.state.images:
            return
        places = self.state.places
        weights = [(p.addr, nbytes(p)) for v, p in places.items() if is_weight(v)]
        activations = min((p.addr for v, p in places.items() if not is_weight(v)), default=len(self.coefficients))
        returned = main_func(self.module).body.block.last_op
        kept = [places[v].addr for v in (returned.operands if returned is not None else ()) if is_weight(v)]
        self.coefficients, self.moved, weight_moved = lay_out_coefficients(
            self.chip, self.state.images, self.state.program.instructions, bytes(self.coefficients), weights,
            activations, kept,
        )
        for value, place in places.items():
            if place.addr >= activations:
                places[value] = dataclasses.replace(place, addr=place.addr + self.moved)
            elif is_weight(value) and place.addr in weight_moved:  # a weight the model returns
                places[value] = dataclasses.replace(place, addr=weight_moved[place.addr])

    def _place(self, op: Operation) -> None:
        addresses = ddr_addresses(op)
        # A recurrent layer's unused outputs are none results: no place.
        tensors = [value for value in op.results if isinstance(value.type, TensorType)]
        for value, addr in zip(tensors, addresses, strict=True):
            t = value.type
            assert isinstance(t, TensorType)
            self.state.places[value] = DdrTensor(addr, tuple(t.get_shape()), dtype_name(numpy_dtype(t.element_type)))

    def _place_weight(self, op: Operation) -> None:
        place = self.state.places[op.results[0]]
        dtype = numpy_dtype(op.results[0].type.element_type)  # type: ignore[attr-defined]
        data = np.ascontiguousarray(np.asarray(self.weights[weight_name(op)]).astype(dtype))
        raw = data.tobytes()
        end = place.addr + len(raw)
        if end > len(self.coefficients):
            self.coefficients.extend(bytes(end - len(self.coefficients)))
        self.coefficients[place.addr : end] = raw

    # -- the model file's description ---------------------------------------------------

    def _io(self, value: SSAValue, name: str) -> IoDesc:
        place = self.state.places[value]
        qparams = qparams_of(value.type, self.weights)
        if isinstance(qparams, ChannelQParams):
            scales = tuple(float(s) for s in qparams.scales)
            return IoDesc(name, place.shape, place.dtype, place.addr, scales=scales, channel_axis=qparams.axis)
        if qparams is not None:
            return IoDesc(name, place.shape, place.dtype, place.addr, qparams.scale, qparams.zero_point)
        return IoDesc(name, place.shape, place.dtype, place.addr)

    def _outputs(self, main) -> list[IoDesc]:
        outputs = []
        for i, value in enumerate(main.body.block.last_op.operands):
            owner = value.owner
            names = tensor_names(owner) if isinstance(owner, Operation) else []
            index = owner.results.index(value) if isinstance(owner, Operation) else 0
            outputs.append(self._io(value, names[index] if index < len(names) else f"output{i}"))
        return outputs

    def _tensors(self) -> list[TensorDesc]:
        """The named tensors the program writes, with the instruction completing each."""
        tensors = []
        for value, writer in self.state.written_by.items():
            owner = value.owner
            assert isinstance(owner, Operation)
            names = tensor_names(owner)
            index = owner.results.index(value)
            if index >= len(names):
                continue
            io = self._io(value, names[index])
            tensors.append(TensorDesc(io.name, io.shape, io.dtype, io.addr, writer, io.scale, io.zero_point, io.scales,
                                      io.channel_axis))
        return tensors

    def _model(self, main) -> TpuModel:
        inputs = [self._io(op.results[0], (tensor_names(op) or ["input"])[0])
                  for op in main.body.block.ops if op.name == "top.input"]
        outputs = self._outputs(main)
        tensors = self._tensors()
        attr = self.module.attributes.get("module.ddr_bytes")
        ddr_bytes = attr.value.data + self.moved if isinstance(attr, IntegerAttr) else max(
            (p.addr + nbytes(p) for p in self.state.places.values()), default=0
        )
        name = self.module.attributes.get("module.name")
        mode = self.module.attributes.get("module.mode")
        preprocess = self.module.attributes.get("module.preprocess")
        return TpuModel(
            name=name.data if isinstance(name, StringAttr) else "model",
            chip=self.chip.name,
            mode=mode.data if isinstance(mode, StringAttr) else "F32",
            instructions=self.state.program.instructions,
            coefficients=bytes(self.coefficients),
            ddr_bytes=int(ddr_bytes),
            inputs=inputs,
            outputs=outputs,
            tensors=tensors,
            groups=self.state.group_descs,
            preprocess=to_py(preprocess) if preprocess is not None else None,
            weight_bytes=self.weight_bytes,
        )

    # -- one op ----------------------------------------------------------------------------

    def lower(self, op: Operation, prologue: Operation | None = None, epilogue: Operation | None = None) -> None:
        """One op outside groups (with the casts that run in its slices, `fused_casts`)."""
        kind = op.name.split(".", 1)[1]
        layer = (tensor_names(op) or [kind])[0]
        if self._placed_as_view(op):
            return
        attrs = kernel_attrs(op)
        if reorders(kind, attrs) and emit_reorder(self.state, op, attrs, layer):
            return
        if kind in _MOVES and emit_move(self.state, op, kind, attrs, layer):
            return
        if kind in ("lstm", "gru"):
            self._recurrent(op, kind, attrs, layer)
            return
        emit_compute(self.state, op, kind, layer, prologue, epilogue)

    def _placed_as_view(self, op: Operation) -> bool:
        """Whether tpu-assign-memory placed the op's results inside its input, where its
        bytes already are, or the inputs of a concatenation inside its result, where
        their ops wrote them (`backend/views.py`): then the op has no instructions."""
        places = self.state.places
        offsets = result_offsets(op)
        if offsets is not None and op.operands[0] in places:
            source = places[op.operands[0]]
            if all(places[r].addr == source.addr + o for r, o in zip(op.results, offsets, strict=True)):
                self.complete_with += [(r, [op.operands[0]]) for r in op.results]
                return True
        parts = operand_offsets(op)
        if parts is not None:
            out = places[op.results[0]]
            if all(places[v].addr == out.addr + o for v, o in zip(op.operands, parts, strict=True)):
                self.complete_with.append((op.results[0], list(op.operands)))
                return True
        return False

    def _recurrent(self, op: Operation, kind: str, attrs: dict[str, Any], layer: str) -> None:
        """tpu.lstm / tpu.gru split over the lanes by hidden unit (`backend.recurrent`)."""
        places = self.state.places
        operands = [None if is_none(v) else places[v].view() for v in op.operands]
        results = [places[r].view() if r in places else None for r in op.results]
        x, w = operands[0], operands[1]
        assert x is not None and w is not None
        has_cell = len(results) > 2 and results[2] is not None
        shape = recurrent.recurrent_shape(kind, attrs, x.shape, x.dtype, w.dtype, has_cell)
        where = recurrent.RecurrentPlaces(x, w, operands[2], operands[3], operands[4],  # type: ignore[arg-type]
                                          operands[5] if len(operands) > 5 else None, *results,
                                          *([None] if len(results) < 3 else []))
        try:
            emitter = recurrent.RecurrentEmitter(self.chip, self.state.program.emit, shape, where, attrs, layer)
        except recurrent.RecurrentFitError as e:
            raise CodegenError(f"'{op.name}' ({layer}): {e}") from None
        emitter.run()
        for value, name in zip(op.results, ("y", "y_h", "y_c")):
            if name in emitter.written:
                self.state.written_by[value] = emitter.written[name]


# How layer groups may load their weights (`groups.WeightLoads`), the default first.
POLICIES = (
    WeightLoads(),
    WeightLoads(members_together=True),
    WeightLoads(ahead_together=False),
    WeightLoads(images=False),
)


def codegen(module: ModuleOp, chip_name: str | None = None) -> TpuModel:
    """The device program of an addressed TPU module (its tpu.groups run as layer groups):
    with groups, the fastest on the timing model of the programs each way of loading their
    weights gives (`POLICIES`; codegen takes a fraction of a second, the choice is
    per model)."""
    chip_attr = module.attributes.get("module.chip")
    chip = chip_config(chip_name or (chip_attr.data if isinstance(chip_attr, StringAttr) else "bm1684x"))
    grouped = any(op.name == "tpu.group" for op in main_func(module).body.block.ops)
    best, best_cycles = None, 0
    for loads in POLICIES if grouped else POLICIES[:1]:
        model = Codegen(module, chip, loads).run()
        cycles = schedule(chip, model.instructions).total_cycles
        if best is None or cycles < best_cycles:
            best, best_cycles = model, cycles
    assert best is not None
    return best
