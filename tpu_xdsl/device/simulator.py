"""The Python TPU: executes a program on DDR and lane-split local memory, and times it.

Timing first: each engine (DMA, compute) takes its instructions in program
order; an instruction starts when its engine is free and all its `deps` have
finished, and lasts `timing.cycles`. The total is the makespan of both engines.

Function follows the timing, as on a chip: an instruction reads its sources
when it starts and writes its results when it finishes (writes first when
both happen in the same cycle), so a dependency the compiler forgot shows up
as a wrong result, not as a silently correct one. Compute kernels are the TPU
interpreter's (`interp.kernels.tpu`), so integer results are bit-exact with it.

This module knows nothing of xDSL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tpu_xdsl.device import timing
from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.device.isa import (
    Compute,
    DdrView,
    DmaCopy,
    DmaFill,
    DmaLoad,
    DmaStore,
    IllegalProgramError,
    Instruction,
    LocalTensor,
    numpy_dtype,
)
from tpu_xdsl.interp.kernels import ResultSpec
from tpu_xdsl.interp.kernels.tpu import run_tpu_kernel


@dataclass
class Scheduled:
    instruction: Instruction
    start: int
    finish: int


@dataclass
class LayerProfile:
    """Per layer (tensor name): busy cycles of each engine, its span, MACs and DMA bytes."""

    name: str
    compute_cycles: int = 0
    dma_cycles: int = 0
    first: int = 0
    last: int = 0
    macs: int = 0
    dma_bytes: int = 0
    instructions: int = 0


@dataclass
class Timeline:
    scheduled: list[Scheduled]
    total_cycles: int
    layers: dict[str, LayerProfile] = field(default_factory=dict)

    def engine_busy(self, engine: str) -> int:
        return sum(s.finish - s.start for s in self.scheduled if s.instruction.engine == engine)


def schedule(chip: ChipConfig, instructions: list[Instruction]) -> Timeline:
    """Start and finish of every instruction; dependencies must point backwards."""
    free = {"dma": 0, "compute": 0}
    finish: dict[int, int] = {}
    scheduled = []
    layers: dict[str, LayerProfile] = {}
    for position, instruction in enumerate(instructions):
        if instruction.id != position:
            raise IllegalProgramError(f"instruction {position} carries id {instruction.id}; ids must be 0, 1, 2, ...")
        for dep in instruction.deps:
            if not 0 <= dep < position:
                raise IllegalProgramError(
                    f"instruction {position} ({type(instruction).__name__}) depends on instruction {dep}, "
                    "which does not come before it"
                )
        engine = instruction.engine
        start = max([free[engine], *(finish[d] for d in instruction.deps)])
        end = start + timing.cycles(chip, instruction)
        free[engine] = end
        finish[position] = end
        scheduled.append(Scheduled(instruction, start, end))
        layer = layers.setdefault(instruction.layer, LayerProfile(instruction.layer, first=start, last=end))
        layer.first, layer.last = min(layer.first, start), max(layer.last, end)
        layer.instructions += 1
        if engine == "compute":
            layer.compute_cycles += end - start
            layer.macs += instruction.macs  # type: ignore[attr-defined]
        else:
            layer.dma_cycles += end - start
            layer.dma_bytes += _dma_bytes(instruction)
    return Timeline(scheduled, max(free.values()), layers)


def _dma_bytes(instruction: Instruction) -> int:
    match instruction:
        case DmaLoad():
            return instruction.dst.nbytes
        case DmaStore():
            return instruction.src.nbytes
        case DmaCopy():
            return 2 * instruction.src.nbytes
        case DmaFill():
            return instruction.dst.nbytes
    return 0


class Device:
    """DDR and local memory of one chip, and the engines that work on them."""

    def __init__(self, chip: ChipConfig, ddr_bytes: int):
        if ddr_bytes > chip.ddr_bytes:
            raise IllegalProgramError(
                f"the program needs {ddr_bytes} bytes of DDR; {chip.name} has {chip.ddr_bytes}"
            )
        self.chip = chip
        self.ddr = np.zeros(ddr_bytes, dtype=np.uint8)
        self.lmem = np.zeros((chip.npu_num, chip.lmem_bytes), dtype=np.uint8)

    # -- DDR ------------------------------------------------------------------------

    def _ddr_array(self, view: DdrView, where: str) -> np.ndarray:
        low, high = view.span()
        if low < 0 or high > self.ddr.size:
            raise IllegalProgramError(
                f"{where}: DDR bytes [{low}, {high}) are outside the {self.ddr.size} bytes of the program's DDR"
            )
        dtype = numpy_dtype(view.dtype)
        if view.addr % dtype.itemsize:
            raise IllegalProgramError(f"{where}: DDR address {view.addr} is not aligned to {view.dtype}")
        return np.ndarray(
            view.shape, dtype=dtype, buffer=self.ddr, offset=view.addr,
            strides=tuple(s * dtype.itemsize for s in view.strides),
        )

    def read_ddr(self, view: DdrView, where: str = "read") -> np.ndarray:
        return self._ddr_array(view, where).copy()

    def write_ddr(self, view: DdrView, values: np.ndarray | float, where: str = "write") -> None:
        target = self._ddr_array(view, where)
        if isinstance(values, np.ndarray):
            values = values.reshape(view.shape)
        target[...] = values

    # -- local memory -------------------------------------------------------------------

    def _lanes(self, tensor: LocalTensor, where: str) -> np.ndarray:
        """A [lanes, N, ceil(C / lanes), H*W] view of the tensor's elements in local memory."""
        chip = self.chip
        if tensor.eu_align and tensor.addr % chip.eu_bytes:
            raise IllegalProgramError(
                f"{where}: local address {tensor.addr} is not aligned to the {chip.eu_bytes}-byte execution units"
            )
        size = tensor.lane_bytes(chip.npu_num, chip.eu_bytes)
        if tensor.addr < 0 or tensor.addr + size > chip.lmem_bytes:
            raise IllegalProgramError(
                f"{where}: local tensor of {size} bytes per lane at {tensor.addr} does not fit the "
                f"{chip.lmem_bytes} bytes of a lane"
            )
        n, c, h, w = tensor.shape4
        planes = -(-c // chip.npu_num)
        dtype = numpy_dtype(tensor.dtype)
        region = self.lmem[:, tensor.addr : tensor.addr + size].reshape(chip.npu_num, n, planes, -1)
        return region[..., : h * w * dtype.itemsize].view(dtype)

    def read_local(self, tensor: LocalTensor, where: str = "read") -> np.ndarray:
        n, c, h, w = tensor.shape4
        lanes = self._lanes(tensor, where)  # [L, N, P, HW]
        grouped = lanes.transpose(1, 2, 0, 3).reshape(n, -1, h * w)  # channel p * L + lane
        return np.ascontiguousarray(grouped[:, :c]).reshape(tensor.view)

    def write_local(self, tensor: LocalTensor, values: np.ndarray, where: str = "write") -> None:
        n, c, h, w = tensor.shape4
        lanes = self._lanes(tensor, where)
        npu, _, planes, _ = lanes.shape
        full = np.zeros((n, planes * npu, h * w), dtype=lanes.dtype)
        full[:, :c] = np.asarray(values, dtype=lanes.dtype).reshape(n, c, h * w)
        lanes[...] = full.reshape(n, planes, npu, h * w).transpose(2, 0, 1, 3)

    # -- instructions --------------------------------------------------------------------

    def read(self, instruction: Instruction) -> Callable[[], None]:
        """Read the instruction's sources (and compute); return what writes its results."""
        where = f"instruction {instruction.id} ({type(instruction).__name__}, layer {instruction.layer or '-'})"
        match instruction:
            case DmaLoad(src=src, dst=dst):
                values = self.read_ddr(src, where)
                return lambda: self.write_local(dst, values, where)
            case DmaStore(src=src, dst=dst):
                values = self.read_local(src, where)
                return lambda: self.write_ddr(dst, values, where)
            case DmaCopy(src=src, dst=dst):
                values = self.read_ddr(src, where)
                return lambda: self.write_ddr(dst, values, where)
            case DmaFill(dst=dst, value=value):
                return lambda: self.write_ddr(dst, value, where)
            case Compute():
                inputs = [None if t is None else self.read_local(t, where) for t in instruction.inputs]
                specs = [ResultSpec(tuple(t.view), numpy_dtype(t.dtype)) for t in instruction.outputs]
                try:
                    outputs = run_tpu_kernel(instruction.kind, inputs, instruction.attrs, specs)
                except KeyError as e:
                    raise IllegalProgramError(f"{where}: no compute kernel '{instruction.kind}'") from e

                def write() -> None:
                    for tensor, value in zip(instruction.outputs, outputs, strict=True):
                        self.write_local(tensor, value, where)

                return write
        raise IllegalProgramError(f"{where}: unknown instruction")

    def execute(
        self, instructions: list[Instruction], after_write: Callable[[int], None] | None = None
    ) -> Timeline:
        """Run the program: reads at each instruction's start, writes at its finish
        (`after_write(id)` is told of each write, e.g. to copy out a finished tensor)."""
        timeline = schedule(self.chip, instructions)
        events = []
        for item in timeline.scheduled:
            events.append((item.start, 1, item.instruction.id, "read"))
            events.append((item.finish, 0, item.instruction.id, "write"))
        events.sort()
        pending: dict[int, Callable[[], None]] = {}
        for _, _, index, kind in events:
            if kind == "read":
                pending[index] = self.read(instructions[index])
            else:
                pending.pop(index)()
                if after_write is not None:
                    after_write(index)
        return timeline
