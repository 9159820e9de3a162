"""A simulated run as a Chrome trace-event file (JSON), for Perfetto or chrome://tracing.

One process (the model on its chip), one track per engine ("DMA", "compute"),
one complete event ("ph": "X") per instruction: named by its layer, timed in
microseconds at the chip's clock, with the instruction's op (and kernel),
the bytes it moves or the MACs it computes, and its layer group. No xDSL here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tpu_xdsl.device.chip import ChipConfig, chip_config
from tpu_xdsl.device.isa import Compute
from tpu_xdsl.device.model_file import TpuModel
from tpu_xdsl.device.simulator import Timeline, dma_bytes
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.files import write_atomic

# Track ids, in the order the viewer shows them.
ENGINE_TRACKS = {"dma": (0, "DMA"), "compute": (1, "compute")}


class TraceFileError(TpuXdslError):
    """A trace file cannot be written where the user asked."""


def trace_events(model: TpuModel, timeline: Timeline, chip: ChipConfig | None = None) -> dict[str, Any]:
    """The trace as a JSON object: {"traceEvents": [...], ...}."""
    chip = chip or chip_config(model.chip)
    microseconds = 1e6 / chip.clock_hz
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": f"{model.name} on {chip.name} ({model.mode})"}}
    ]
    for tid, track in ENGINE_TRACKS.values():
        events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": track}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": tid, "args": {"sort_index": tid}})
    for item in timeline.scheduled:
        instruction = item.instruction
        args: dict[str, Any] = {
            "id": instruction.id, "op": type(instruction).__name__, "cycles": item.finish - item.start
        }
        if isinstance(instruction, Compute):
            args["kind"] = instruction.kind
            args["macs"] = instruction.macs
        else:
            args["bytes"] = dma_bytes(instruction)
        if instruction.group >= 0:
            args["group"] = model.groups[instruction.group].name
        events.append({
            "name": instruction.layer or type(instruction).__name__,
            "cat": instruction.engine,
            "ph": "X",
            "pid": 0,
            "tid": ENGINE_TRACKS[instruction.engine][0],
            "ts": item.start * microseconds,
            "dur": (item.finish - item.start) * microseconds,
            "args": args,
        })
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"model": model.name, "chip": chip.name, "mode": model.mode, "clock_hz": chip.clock_hz,
                      "total_cycles": timeline.total_cycles},
    }


def write_trace(path: str | Path, model: TpuModel, timeline: Timeline, chip: ChipConfig | None = None) -> None:
    """Write the trace to `path` atomically (a failure leaves no file behind)."""
    path = Path(path)
    trace = trace_events(model, timeline, chip)
    try:
        write_atomic(path, lambda f: json.dump(trace, f, separators=(",", ":")))
    except OSError as e:
        raise TraceFileError(
            f"{path}: cannot write the trace ({e.strerror}); check that its folder exists and is writable"
        ) from e
