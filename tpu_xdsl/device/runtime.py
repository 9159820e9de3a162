"""Run a compiled model on the device model: inputs in, outputs (and every named tensor) out.

The runtime places the coefficients at DDR address 0, writes the inputs where
the model says (quantizing float data for INT8 inputs as the chip's runtime
does), executes the program and reads the outputs back. With `dump_all` it
copies each named tensor out of DDR when the instruction that completes it
has written (DDR is reused, so later is too late). The profile of a run (per
layer group, per layer outside groups, against the roofline bound) is here
too. No xDSL here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from tpu_xdsl.device.chip import ChipConfig, chip_config
from tpu_xdsl.device.isa import Compute, DdrView, numpy_dtype
from tpu_xdsl.device.model_file import GroupDesc, IoDesc, TensorDesc, TpuModel
from tpu_xdsl.device.simulator import Device, Scheduled, Timeline, dma_bytes
from tpu_xdsl.device.timing import ideal_compute_cycles
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.feeds import accepts_dtype, held_feed, in_input_order
from tpu_xdsl.kernels.malloc import keep_freed_memory
from tpu_xdsl.kernels.quant import ChannelQParams, QParams


class DeviceInputError(TpuXdslError):
    """Inputs given to a compiled model do not match its input descriptors."""


@dataclass
class RunResult:
    outputs: dict[str, np.ndarray]
    timeline: Timeline
    tensors: dict[str, np.ndarray] = field(default_factory=dict)


def qparams_of(desc: IoDesc | TensorDesc) -> QParams | ChannelQParams | None:
    if desc.scales is not None:
        return ChannelQParams(np.asarray(desc.scales), numpy_dtype(desc.dtype), axis=desc.channel_axis)
    if desc.scale is not None:
        return QParams(desc.scale, desc.zero_point, numpy_dtype(desc.dtype))
    return None


def real_value(desc: IoDesc | TensorDesc, value: np.ndarray) -> np.ndarray:
    """The real values an INT8 tensor stands for (float tensors as they are)."""
    qparams = qparams_of(desc)
    return value if qparams is None else qparams.dequantize(value)


def _arrange(model: TpuModel, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    given = in_input_order([d.name for d in model.inputs], inputs, DeviceInputError)
    arranged = []
    for desc, value in zip(model.inputs, given, strict=True):
        value = np.asarray(value)
        dtype = numpy_dtype(desc.dtype)
        if tuple(value.shape) != tuple(desc.shape):
            raise DeviceInputError(
                f"input '{desc.name}' has shape {list(value.shape)}, the model expects {list(desc.shape)}"
            )
        qparams = qparams_of(desc)
        if qparams is not None and value.dtype.kind == "f":
            value = qparams.quantize(value)
        elif not accepts_dtype(value.dtype, dtype):
            raise DeviceInputError(
                f"input '{desc.name}' has dtype {value.dtype}, the model expects {dtype}; save it as {dtype}"
            )
        arranged.append(held_feed(desc.name, value, dtype, DeviceInputError))
    return arranged


class LoadedModel:
    """A compiled model on a device, as a chip's runtime holds it: the program checked,
    timed and bound once, then run on any number of inputs."""

    def __init__(self, model: TpuModel, chip: ChipConfig | None = None):
        keep_freed_memory()
        self.model = model
        self.chip = chip or chip_config(model.chip)
        if len(model.coefficients) > model.ddr_bytes:
            raise DeviceInputError("the model's coefficients do not fit its own DDR size; compile it again")
        self.device = Device(self.chip, model.ddr_bytes)
        self.program = self.device.load(model.instructions)

    @property
    def timeline(self) -> Timeline:
        return self.program.timeline

    def start(self, inputs: Mapping[str, np.ndarray]) -> None:
        """DDR cleared, coefficients and inputs written: ready for `program.run()` or, one
        instruction at a time, `program.steps()`."""
        model, device = self.model, self.device
        coefficients = len(model.coefficients)
        device.ddr[:coefficients] = np.frombuffer(model.coefficients, dtype=np.uint8)
        device.ddr[coefficients:] = 0
        for desc, value in zip(model.inputs, _arrange(model, inputs), strict=True):
            device.write_ddr(_whole(desc), value, f"input '{desc.name}'")

    def completed_by(self) -> dict[int, list[TensorDesc]]:
        """The named tensors each instruction's write completes (by instruction index)."""
        completes: dict[int, list[TensorDesc]] = {}
        for desc in self.model.tensors:
            completes.setdefault(desc.written_by, []).append(desc)
        return completes

    def read(self, desc: IoDesc | TensorDesc) -> np.ndarray:
        """A tensor as DDR holds it now (a copy)."""
        return self.device.read_ddr(_whole(desc))

    def run(self, inputs: Mapping[str, np.ndarray], dump_all: bool = False) -> RunResult:
        """DDR cleared, coefficients and inputs written, the program run, outputs read."""
        self.start(inputs)
        tensors: dict[str, np.ndarray] = {}
        after_write: Callable[[int], None] | None = None
        if dump_all:
            completes = self.completed_by()

            def dump(index: int) -> None:
                for desc in completes.get(index, ()):
                    tensors[desc.name] = self.read(desc)

            after_write = dump
        self.program.run(after_write)
        outputs = {desc.name: self.read(desc) for desc in self.model.outputs}
        return RunResult(outputs, self.program.timeline, tensors)


def _whole(desc: IoDesc | TensorDesc) -> DdrView:
    return DdrView.contiguous(desc.addr, desc.dtype, desc.shape)


def run_model(
    model: TpuModel, inputs: Mapping[str, np.ndarray], dump_all: bool = False, chip: ChipConfig | None = None
) -> RunResult:
    """Load `model` on its chip (or `chip`) and run it once."""
    return LoadedModel(model, chip).run(inputs, dump_all)


def peak_macs_per_cycle(model: TpuModel, chip: ChipConfig) -> int:
    """The chip's peak MACs per cycle in the model's mode (its best mode if it has no such mode)."""
    return chip.macs_per_cycle.get(model.mode, max(chip.macs_per_cycle.values()))


def roofline_terms(model: TpuModel, chip: ChipConfig | None = None) -> tuple[float, float]:
    """The two lower bounds on the model's cycles: its MACs at the peak of its mode, and the
    bytes that must cross DDR at least once (weights, inputs, outputs; not the lane images
    of weights codegen adds) at the DDR -> local memory bandwidth."""
    chip = chip or chip_config(model.chip)
    macs = sum(i.macs for i in model.instructions if isinstance(i, Compute))
    io = sum(_nbytes(d) for d in (*model.inputs, *model.outputs))
    ddr_bytes_per_cycle = chip.ddr_to_lmem_bytes_per_s / chip.clock_hz
    return macs / peak_macs_per_cycle(model, chip), (model.own_weight_bytes + io) / ddr_bytes_per_cycle


def roofline_cycles(model: TpuModel, chip: ChipConfig | None = None) -> float:
    """The roofline bound: max(MACs / peak MACs per cycle, (coefficient + input + output
    bytes) / DDR bytes per cycle). No schedule of the model can take fewer cycles."""
    return max(roofline_terms(model, chip))


def kind_bound_cycles(model: TpuModel, chip: ChipConfig | None = None) -> float:
    """A roofline bound that knows each op kind's engine: max(the sum over compute
    instructions of their work on their own unit at full lanes (`timing.ideal_compute_cycles`:
    a depthwise MAC on the vector path, not the array), the byte bound of `roofline_terms`)."""
    chip = chip or chip_config(model.chip)
    compute = sum(ideal_compute_cycles(chip, i) for i in model.instructions if isinstance(i, Compute))
    return max(compute, roofline_terms(model, chip)[1])


def _nbytes(desc: IoDesc | TensorDesc) -> int:
    return _whole(desc).nbytes


@dataclass
class ProfileRow:
    """A row of the profile: a layer group (`group` set) or a layer outside any group, and
    its instructions as scheduled."""

    name: str
    group: GroupDesc | None
    scheduled: list[Scheduled] = field(default_factory=list)

    @property
    def first(self) -> int:
        return min(s.start for s in self.scheduled)

    @property
    def span(self) -> int:
        """Cycles from its first instruction's start to its last one's finish."""
        return max(s.finish for s in self.scheduled) - self.first

    def busy(self, engine: str) -> int:
        """Cycles its own instructions keep `engine` busy."""
        return sum(s.finish - s.start for s in self.scheduled if s.instruction.engine == engine)

    @property
    def macs(self) -> int:
        return sum(s.instruction.macs for s in self.scheduled if isinstance(s.instruction, Compute))

    @property
    def dma_bytes(self) -> int:
        return sum(dma_bytes(s.instruction) for s in self.scheduled)

    def ideal_compute(self, chip: ChipConfig) -> float:
        """Cycles its compute work takes on each op kind's own unit at full lanes."""
        return sum(ideal_compute_cycles(chip, s.instruction) for s in self.scheduled
                   if isinstance(s.instruction, Compute))


def profile_rows(model: TpuModel, timeline: Timeline) -> list[ProfileRow]:
    """One row per layer group and per layer outside groups, in the order they start in
    the program."""
    rows: dict[tuple[int, str], ProfileRow] = {}
    for item in timeline.scheduled:
        index, layer = item.instruction.group, item.instruction.layer
        key = (index, "") if index >= 0 else (-1, layer)
        if key not in rows:
            group = model.groups[index] if index >= 0 else None
            rows[key] = ProfileRow(group.name if group else layer, group)
        rows[key].scheduled.append(item)
    return list(rows.values())


def profile_lines(model: TpuModel, timeline: Timeline, chip: ChipConfig | None = None) -> list[str]:
    """Per layer group (its ops below it) and per layer outside groups: span, engine busy
    cycles, MACs and utilization of the MAC array, DMA bytes, each engine's busy share of
    the span; then the totals and the roofline."""
    chip = chip or chip_config(model.chip)
    peak = peak_macs_per_cycle(model, chip)
    header = (
        f"{'layer or group':<40} {'ops':>4} {'slices':>7} {'cycles':>10} {'compute':>10} {'dma':>10} {'MACs':>12} "
        f"{'util':>6} {'DMA bytes':>11} {'compute%':>8} {'DMA%':>7}"
    )
    lines = [header]
    for row in profile_rows(model, timeline):
        compute, dma, span = row.busy("compute"), row.busy("dma"), row.span
        util = row.macs / (compute * peak) if compute and row.macs else 0.0
        if row.group is None:
            name, ops, slices = row.name, "-", "-"
        else:
            index = row.scheduled[0].instruction.group
            name, ops = f"group {index}: {row.name}", str(len(row.group.ops))
            slices = f"{row.group.n_slices}x{row.group.h_slices}"
        lines.append(
            f"{name[:40]:<40} {ops:>4} {slices:>7} {span:>10} {compute:>10} {dma:>10} {row.macs:>12} {util:>6.1%} "
            f"{row.dma_bytes:>11} {compute / max(1, span):>8.1%} {dma / max(1, span):>7.1%}"
        )
        if row.group is not None:
            lines.append(f"    ops: {', '.join(row.group.ops)}")
    return [*lines, *total_lines(model, timeline, chip)]


def total_lines(model: TpuModel, timeline: Timeline, chip: ChipConfig | None = None) -> list[str]:
    """The profile's last two lines: cycles, MACs, DMA bytes and engine busy shares of the
    whole run; the roofline bound and simulated / bound."""
    chip = chip or chip_config(model.chip)
    peak = peak_macs_per_cycle(model, chip)
    macs = sum(layer.macs for layer in timeline.layers.values())
    dma = sum(layer.dma_bytes for layer in timeline.layers.values())
    seconds = chip.cycles_to_seconds(timeline.total_cycles)
    mac_bound, byte_bound = roofline_terms(model, chip)
    bound = max(mac_bound, byte_bound)
    ratio = f"{timeline.total_cycles / bound:.2f}" if bound else "-"
    busy = {engine: timeline.engine_busy(engine) / max(1, timeline.total_cycles) for engine in ("compute", "dma")}
    total = (
        f"total: {timeline.total_cycles} cycles = {seconds * 1e3:.3f} ms at {chip.clock_hz / 1e9:g} GHz; "
        f"{macs} MACs, {dma} DMA bytes; compute busy {busy['compute']:.0%}, DMA busy {busy['dma']:.0%}"
    )
    roofline = (
        f"roofline: bound {bound:.0f} cycles = max(MACs at {peak}/cycle {mac_bound:.0f}, coefficient and I/O "
        f"bytes at {chip.ddr_to_lmem_bytes_per_s / 1e9:g} GB/s {byte_bound:.0f}); simulated / bound = {ratio}"
    )
    return [total, roofline]
