"""Run a compiled model on the device model: inputs in, outputs (and every named tensor) out.

The runtime places the coefficients at DDR address 0, writes the inputs where
the model says (quantizing float data for INT8 inputs as the chip's runtime
does), executes the program and reads the outputs back. With `dump_all` it
copies each named tensor out of DDR when the instruction that completes it
has written (DDR is reused, so later is too late). No xDSL here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from tpu_xdsl.device.chip import ChipConfig, chip_config
from tpu_xdsl.device.isa import DdrView, numpy_dtype
from tpu_xdsl.device.model_file import IoDesc, TensorDesc, TpuModel
from tpu_xdsl.device.simulator import Device, Timeline
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.feeds import in_input_order
from tpu_xdsl.quant import ChannelQParams, QParams


class DeviceInputError(TpuXdslError):
    """Inputs given to a compiled model do not match its input descriptors."""


@dataclass
class RunResult:
    outputs: dict[str, np.ndarray]
    timeline: Timeline
    tensors: dict[str, np.ndarray] = field(default_factory=dict)


def qparams_of(desc: IoDesc | TensorDesc) -> QParams | ChannelQParams | None:
    if desc.scales is not None:
        return ChannelQParams(np.asarray(desc.scales), numpy_dtype(desc.dtype))
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
        elif value.dtype != dtype and not (value.dtype.kind == "f" and dtype.kind in "fV"):
            raise DeviceInputError(f"input '{desc.name}' has dtype {value.dtype}, the model expects {desc.dtype}")
        arranged.append(value.astype(dtype))
    return arranged


class LoadedModel:
    """A compiled model on a device, as a chip's runtime holds it: the program checked,
    timed and bound once, then run on any number of inputs."""

    def __init__(self, model: TpuModel, chip: ChipConfig | None = None):
        self.model = model
        self.chip = chip or chip_config(model.chip)
        if len(model.coefficients) > model.ddr_bytes:
            raise DeviceInputError("the model's coefficients do not fit its own DDR size; compile it again")
        self.device = Device(self.chip, model.ddr_bytes)
        self.program = self.device.load(model.instructions)

    @property
    def timeline(self) -> Timeline:
        return self.program.timeline

    def run(self, inputs: Mapping[str, np.ndarray], dump_all: bool = False) -> RunResult:
        """DDR cleared, coefficients and inputs written, the program run, outputs read."""
        model, device = self.model, self.device
        coefficients = len(model.coefficients)
        device.ddr[:coefficients] = np.frombuffer(model.coefficients, dtype=np.uint8)
        device.ddr[coefficients:] = 0
        for desc, value in zip(model.inputs, _arrange(model, inputs), strict=True):
            device.write_ddr(_whole(desc), value, f"input '{desc.name}'")
        tensors: dict[str, np.ndarray] = {}
        after_write = None
        if dump_all:
            completes: dict[int, list[TensorDesc]] = {}
            for desc in model.tensors:
                completes.setdefault(desc.written_by, []).append(desc)

            def after_write(index: int) -> None:
                for desc in completes.get(index, ()):
                    tensors[desc.name] = device.read_ddr(_whole(desc))

        self.program.run(after_write)
        outputs = {desc.name: device.read_ddr(_whole(desc)) for desc in model.outputs}
        return RunResult(outputs, self.program.timeline, tensors)


def _whole(desc: IoDesc | TensorDesc) -> DdrView:
    return DdrView.contiguous(desc.addr, desc.dtype, desc.shape)


def run_model(
    model: TpuModel, inputs: Mapping[str, np.ndarray], dump_all: bool = False, chip: ChipConfig | None = None
) -> RunResult:
    """Load `model` on its chip (or `chip`) and run it once."""
    return LoadedModel(model, chip).run(inputs, dump_all)


def profile_lines(model: TpuModel, timeline: Timeline, chip: ChipConfig | None = None) -> list[str]:
    """Per layer: span and engine cycles, MACs and utilization of the MAC array, DMA bytes;
    then the totals."""
    chip = chip or chip_config(model.chip)
    peak = chip.macs_per_cycle.get(model.mode, max(chip.macs_per_cycle.values()))
    lines = [
        f"{'layer':<40} {'cycles':>10} {'compute':>10} {'dma':>10} {'MACs':>12} {'util':>6} {'DMA bytes':>11}"
    ]
    for layer in timeline.layers.values():
        util = layer.macs / (layer.compute_cycles * peak) if layer.compute_cycles and layer.macs else 0.0
        lines.append(
            f"{layer.name[:40]:<40} {layer.last - layer.first:>10} {layer.compute_cycles:>10} {layer.dma_cycles:>10} "
            f"{layer.macs:>12} {util:>6.1%} {layer.dma_bytes:>11}"
        )
    macs = sum(layer.macs for layer in timeline.layers.values())
    dma = sum(layer.dma_bytes for layer in timeline.layers.values())
    seconds = chip.cycles_to_seconds(timeline.total_cycles)
    lines.append(
        f"total: {timeline.total_cycles} cycles = {seconds * 1e3:.3f} ms at {chip.clock_hz / 1e9:g} GHz; "
        f"{macs} MACs, {dma} DMA bytes; compute busy {timeline.engine_busy('compute') / max(1, timeline.total_cycles):.0%}, "
        f"DMA busy {timeline.engine_busy('dma') / max(1, timeline.total_cycles):.0%}"
    )
    return lines


