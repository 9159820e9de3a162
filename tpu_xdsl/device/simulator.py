"""The Python TPU: executes a program on DDR and lane-split local memory, and times it.

Timing first: each engine (DMA, compute) takes its instructions in program
order; an instruction starts when its engine is free and all its `deps` have
finished, and lasts `timing.cycles`. The total is the makespan of both engines.

Function follows the timing, as on a chip: an instruction reads its sources
when it starts and writes its results when it finishes (writes first when
both happen in the same cycle), so a dependency the compiler forgot shows up
as a wrong result, not as a silently correct one. Compute kernels are the TPU
interpreter's (`kernels.tpu`), so integer results are bit-exact with it.

This module knows nothing of xDSL.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tpu_xdsl.device import timing
from tpu_xdsl.device.attributes import check_compute
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
    where,
)
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.kernels import ResultSpec
from tpu_xdsl.kernels.tpu import has_tpu_kernel, run_tpu_kernel
from tpu_xdsl.limits import check_tensor_size


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
        end = start + _cycles(chip, instruction, position)
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
            layer.dma_bytes += dma_bytes(instruction)
    return Timeline(scheduled, max(free.values()), layers)


def _cycles(chip: ChipConfig, instruction: Instruction, position: int) -> int:
    try:
        return timing.cycles(chip, instruction)
    except TpuXdslError:
        raise
    except Exception as e:  # operands a model file made up, that check_compute does not know to refuse
        raise IllegalProgramError(
            f"{_where(instruction, position)}: its operands or attributes cannot be timed "
            f"({type(e).__name__}: {_first_line(e)}); recompile the model"
        ) from e


def _where(instruction: Instruction, position: int) -> str:
    return where(instruction, position)


def _first_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= 200 else text[:197] + "..."


def dma_bytes(instruction: Instruction) -> int:
    """Bytes a DMA instruction moves through DDR (a copy reads and writes each); 0 for Compute."""
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
        check_tensor_size("the program's DDR", (ddr_bytes,), 1)
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

    def _local_reader(self, tensor: LocalTensor, where: str) -> Callable[[], np.ndarray]:
        """What copies the tensor out of its lanes (channel p * lanes + lane is plane p of
        that lane): whole planes in one go, the last, partial plane in another."""
        n, c, h, w = tensor.shape4
        lanes = self._lanes(tensor, where)
        npu, full, whole, partial = _lane_parts(lanes, c)
        shape, view = (n, c, h * w), tensor.view
        if not full and partial is not None:  # fewer channels than lanes: one copy
            return lambda: np.array(partial).reshape(view)
        if full and partial is None:  # whole planes only: one copy
            return lambda: np.array(whole).reshape(view)

        def read() -> np.ndarray:
            out = np.empty(shape, lanes.dtype)
            if full:
                out[:, : full * npu].reshape(n, full, npu, h * w)[...] = whole
            if partial is not None:
                out[:, full * npu :] = partial
            return out.reshape(view)

        return read

    def _local_writer(self, tensor: LocalTensor, where: str) -> Callable[[np.ndarray], None]:
        """What puts values (any shape of the tensor's size) into its lanes."""
        n, c, h, w = tensor.shape4
        npu, full, whole, partial = _lane_parts(self._lanes(tensor, where), c)
        if not full and partial is not None:  # fewer channels than lanes

            def write_partial(values: np.ndarray) -> None:
                partial[...] = np.asarray(values).reshape(n, c, h * w)

            return write_partial

        def write(values: np.ndarray) -> None:
            values = np.asarray(values).reshape(n, c, h * w)
            if full:
                whole[...] = values[:, : full * npu].reshape(n, full, npu, h * w)
            if partial is not None:
                partial[...] = values[:, full * npu :]

        return write

    def read_local(self, tensor: LocalTensor, where: str = "read") -> np.ndarray:
        return self._local_reader(tensor, where)()

    def write_local(self, tensor: LocalTensor, values: np.ndarray, where: str = "write") -> None:
        self._local_writer(tensor, where)(values)

    # -- instructions --------------------------------------------------------------------

    def bind(self, instruction: Instruction) -> tuple[Callable[[], Any], Callable[[Any], None]]:
        """The instruction's two halves on this device, every address checked once: what
        reads its sources (and computes) when it starts, and what writes its results when
        it finishes."""
        where = _where(instruction, instruction.id)
        match instruction:
            case DmaLoad(src=src, dst=dst):
                return self._ddr_array(src, where).copy, self._local_writer(dst, where)
            case DmaStore(src=src, dst=dst):
                return self._local_reader(src, where), self._ddr_writer(dst, where)
            case DmaCopy(src=src, dst=dst):
                return self._ddr_array(src, where).copy, self._ddr_writer(dst, where)
            case DmaFill(dst=dst, value=value):
                target = self._ddr_array(dst, where)
                return lambda: value, target.fill
            case Compute():
                return self._compute(instruction, where)
        raise IllegalProgramError(f"{where}: unknown instruction")

    def _ddr_writer(self, view: DdrView, where: str) -> Callable[[np.ndarray], None]:
        target = self._ddr_array(view, where)

        def write(values: np.ndarray) -> None:
            target[...] = values.reshape(target.shape)

        return write

    def _compute(self, instruction: Compute, where: str) -> tuple[Callable[[], Any], Callable[[Any], None]]:
        if not has_tpu_kernel(instruction.kind):
            raise IllegalProgramError(f"{where}: no compute kernel '{instruction.kind}'")
        readers = [None if t is None else self._local_reader(t, where) for t in instruction.inputs]
        writers = [self._local_writer(t, where) for t in instruction.outputs]
        specs = [ResultSpec(tuple(t.view), numpy_dtype(t.dtype)) for t in instruction.outputs]
        kind, attrs = instruction.kind, instruction.attrs

        def read() -> list[np.ndarray]:
            inputs = [None if r is None else r() for r in readers]
            try:
                return run_tpu_kernel(kind, inputs, attrs, specs)
            except TpuXdslError:
                raise
            except Exception as e:  # see _kernel_failed
                raise _kernel_failed(where, kind, e) from e

        def write(outputs: list[np.ndarray]) -> None:
            try:
                for writer, value in zip(writers, outputs, strict=True):
                    writer(value)
            except (ValueError, TypeError, AttributeError) as e:
                raise _kernel_failed(where, kind, e) from e

        return read, write

    def load(self, instructions: list[Instruction]) -> Program:
        """The program checked (dependencies, addresses, kernels and their attributes), timed,
        and bound to this device, ready to run any number of times."""
        for position, instruction in enumerate(instructions):
            if isinstance(instruction, Compute):
                check_compute(instruction, _where(instruction, position))
        timeline = schedule(self.chip, instructions)
        halves = [self.bind(instruction) for instruction in instructions]
        events = []
        for item in timeline.scheduled:
            events.append((item.start, 1, item.instruction.id))
            events.append((item.finish, 0, item.instruction.id))
        events.sort()
        return Program(timeline, halves, [(index, started == 1) for _, started, index in events])

    def execute(
        self, instructions: list[Instruction], after_write: Callable[[int], None] | None = None
    ) -> Timeline:
        """Run the program once: reads at each instruction's start, writes at its finish
        (`after_write(id)` is told of each write, e.g. to copy out a finished tensor)."""
        program = self.load(instructions)
        program.run(after_write)
        return program.timeline


def _kernel_failed(where: str, kind: str, error: Exception) -> IllegalProgramError:
    """A kernel that raised on operands and attributes that passed check_compute: a model
    file can still pair them in ways no compiled program does (a mode string of another op,
    an axis past the rank, operands of mismatched shapes); the run stops with one line
    naming the instruction, not a traceback."""
    return IllegalProgramError(
        f"{where}: the {kind} kernel cannot run on these operands and attributes "
        f"({type(error).__name__}: {_first_line(error)}); recompile the model"
    )


def _lane_parts(lanes: np.ndarray, c: int) -> tuple[int, int, np.ndarray, np.ndarray | None]:
    """Of a [L, N, P, HW] lane view holding C channels: L, the number of whole planes, those
    planes as [N, whole, L, HW], and the last, partial plane as [N, C % L, HW] (or None)."""
    npu = lanes.shape[0]
    full, rest = divmod(c, npu)
    whole = lanes[:, :, :full].transpose(1, 2, 0, 3)
    partial = lanes[:rest, :, full].transpose(1, 0, 2) if rest else None
    return npu, full, whole, partial


@dataclass
class Program:
    """A program bound to a device: per instruction its read and write halves, and the
    order of their events in simulated time (writes before reads in the same cycle)."""

    timeline: Timeline
    halves: list[tuple[Callable[[], Any], Callable[[Any], None]]]
    events: list[tuple[int, bool]]

    def run(self, after_write: Callable[[int], None] | None = None) -> None:
        """The whole run: the events of `steps` in one flat loop (no generator, the halves
        looked up once), each write followed by `after_write(index)`."""
        reads = [read for read, _ in self.halves]
        writes = [write for _, write in self.halves]
        pending: list[Any] = [None] * len(self.halves)
        for index, starts in self.events:
            if starts:
                pending[index] = reads[index]()
            else:
                value, pending[index] = pending[index], None
                writes[index](value)
                if after_write is not None:
                    after_write(index)

    def steps(self) -> Generator[int, None, None]:
        """The run one instruction at a time (the debugger's `next`): yields the index of
        the instruction whose write comes next, and does that write when resumed. The
        reads of instructions that start earlier in simulated time are done by then."""
        halves = self.halves
        pending: dict[int, Any] = {}
        for index, starts in self.events:
            if starts:
                pending[index] = halves[index][0]()
            else:
                yield index
                halves[index][1](pending.pop(index))
