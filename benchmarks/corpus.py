"""torchvision's architectures as a public corpus: ONNX -> TOP -> F16 -> the device model.

Each architecture is built with random weights (weights=None, nothing is downloaded), its
BatchNorm statistics are settled by a few forward passes in train mode on scikit-image's
photos, and it is exported by torch.onnx.export at opset 17 with the legacy TorchScript
exporter (dynamo=False). Then, as a user would, with the tpu-xdsl command:

    tpu-xdsl transform --model-def N.onnx --test-input in.npz --test-result N_top.npz -o N.mlir
    tpu-xdsl deploy N.mlir --quantize F16 --chip bm1684x --test-input in.npz
                    --test-reference N_top.npz -o N.tpumodel   # includes the device check
    tpu-xdsl run N.tpumodel --input in.npz --output N_device.npz

The table gives, per model: the last stage reached (export, transform, deploy, device),
the cosine of the final outputs of the device model against onnxruntime (the minimum over
the model's outputs), torch's own float16 cosine against the same reference (the model
run in torch with .half() on CPU; "-" where CPU half is unsupported for an op), whether
the device model's outputs keep their ONNX names, whether deploy's device check (the
device model against the TPU interpreter, tensor by tensor) passed, and the first error
(deploy's comparison of TOP with the TPU interpreter, at its default F16 tolerance, counts
as one: on deep random-weight networks an intermediate tensor can fall below it while
the final output does not).

A model passes when it reaches the device with cosine >= 0.999, or at least torch's own
float16 cosine where that is lower, with its names kept and the device check passed.

torchvision's quantized models (fbgemm, statically quantized on the photos) deploy in INT8
with the model's own scales instead (no calibration table), and their cosine is against
onnxruntime running the quantized model.

Detection models are exported as backbone and heads: torchvision's compiled ops (nms,
roi_align) do not load beside CPU torch. Random init leaves ViT's head at zero and
ConvNeXt's layer scales at 1e-6 (the outputs would not depend on the input), so those are
re-initialized. Inputs are photos at each model's usual size, 224 or smaller where the
architecture allows (video 8 frames of 112x112; s3d needs 16 frames of 224).

    python benchmarks/corpus.py --list
    python benchmarks/corpus.py [--models resnet18,s3d] [--dir DIR] [--timeout 1800] [--force]

Results accumulate in DIR/results.jsonl (a model already there is skipped unless
--force), and the table is rewritten to DIR/table.md after each model, so a background
run can be read as it goes and resumed after an interruption.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
TARGET = 0.999
STAGES = ("export", "transform", "deploy", "device")

CLASSIFIERS = (
    "alexnet", "convnext_tiny", "densenet121", "efficientnet_b0", "efficientnet_v2_s",
    "googlenet", "inception_v3", "maxvit_t", "mnasnet0_5", "mobilenet_v2",
    "mobilenet_v3_large", "mobilenet_v3_small", "regnet_x_400mf", "regnet_y_400mf",
    "resnet18", "resnet50", "resnext50_32x4d", "shufflenet_v2_x1_0", "squeezenet1_1",
    "swin_t", "swin_v2_t", "vgg11_bn", "vit_b_16", "wide_resnet50_2",
)
QUANTIZED = ("quantized_mobilenet_v2", "quantized_resnet18", "quantized_shufflenet_v2_x1_0")
SEGMENTATION = (
    "deeplabv3_mobilenet_v3_large", "deeplabv3_resnet50", "fcn_resnet50",
    "lraspp_mobilenet_v3_large",
)
DETECTION = (
    "fasterrcnn_mobilenet_v3_large_fpn", "fasterrcnn_resnet50_fpn", "fcos_resnet50_fpn",
    "retinanet_resnet50_fpn", "ssd300_vgg16", "ssdlite320_mobilenet_v3_large",
)
VIDEO = ("mc3_18", "r2plus1d_18", "r3d_18", "s3d")
OPTICAL_FLOW = ("raft_small",)
FAMILIES = {
    "classification": CLASSIFIERS, "quantized": QUANTIZED, "segmentation": SEGMENTATION,
    "detection": DETECTION, "video": VIDEO, "optical_flow": OPTICAL_FLOW,
}
MODELS = tuple(name for names in FAMILIES.values() for name in names)
# Input sizes other than 224x224 images: (frames,) height, width.
SIZES = {
    "inception_v3": (299, 299), "fasterrcnn_mobilenet_v3_large_fpn": (320, 320),
    "fasterrcnn_resnet50_fpn": (320, 320), "fcos_resnet50_fpn": (320, 320),
    "retinanet_resnet50_fpn": (320, 320), "ssd300_vgg16": (300, 300),
    "ssdlite320_mobilenet_v3_large": (320, 320), "mc3_18": (8, 112, 112),
    "r2plus1d_18": (8, 112, 112), "r3d_18": (8, 112, 112),
    # s3d ends in a (2, 7, 7) average pool: at least 16 frames of 224x224.
    "s3d": (16, 224, 224), "raft_small": (128, 128),
}


def family(name: str) -> str:
    return next(f for f, names in FAMILIES.items() if name in names)


# --- building and exporting (the worker process) -------------------------------------


def import_torchvision():
    """torchvision with its compiled ops absent: the wheel's _C does not load beside CPU
    torch, and torchvision's fake-op registrations then fail at import. The architectures
    need none of those ops (detection is exported without nms and roi_align)."""
    import torch.library

    register_fake = torch.library.register_fake

    def tolerant(op, *args, **kwargs):
        try:
            register = register_fake(op, *args, **kwargs)
        except RuntimeError:
            return lambda fn: fn

        def wrap(fn):
            try:
                return register(fn)
            except RuntimeError:
                return fn

        return wrap

    torch.library.register_fake = tolerant
    try:
        import torchvision
    finally:
        torch.library.register_fake = register_fake
    return torchvision


def photo_batch(count: int, height: int, width: int) -> np.ndarray:
    """`count` different crops of scikit-image's color photos, ImageNet-normalized, NCHW."""
    from PIL import Image

    from tpu_xdsl import zoo

    sources = [p for p in zoo.photos() if p.name not in ("page.png", "text.png")]
    images = []
    for n in range(count):
        with Image.open(sources[n % len(sources)]) as image:
            image = image.convert("RGB")
            w, h = image.size
            f = 0.7 + 0.05 * (n // len(sources) % 6)
            cw, ch = int(w * f), int(h * f)
            left, top = (w - cw) * (n % 3) // 2, (h - ch) * (n % 2)
            image = image.crop((left, top, left + cw, top + ch)).resize((width, height))
            images.append(np.asarray(image, dtype=np.float32) / 255.0)
    batch = (np.stack(images) - IMAGENET_MEAN) / IMAGENET_STD
    return np.ascontiguousarray(batch.transpose(0, 3, 1, 2), dtype=np.float32)


def video_batch(count: int, frames: int, height: int, width: int) -> np.ndarray:
    """Clips [N, 3, T, H, W]: a photo panned across `frames` frames (a moving camera)."""
    big = photo_batch(count, height + 2 * frames, width + 2 * frames)
    clips = [
        np.stack([b[:, 2 * t:2 * t + height, 2 * t:2 * t + width] for t in range(frames)], 1)
        for b in big
    ]
    return np.ascontiguousarray(np.stack(clips), dtype=np.float32)


class BackboneHeads(torch.nn.Module):
    """A detection model's backbone and heads as one module with tensor outputs (no box
    decoding, nms or roi_align)."""

    def __init__(self, name: str, model):
        super().__init__()
        self.name = name
        self.backbone = model.backbone
        self.head = model.rpn.head if name.startswith("fasterrcnn") else model.head

    def forward(self, x):
        features = list(self.backbone(x).values())
        if self.name.startswith("fasterrcnn"):
            objectness, deltas = self.head(features)
            return (*objectness, *deltas)
        if self.name.startswith("fcos"):
            cls_logits = self.head.classification_head(features)
            deltas, ctrness = self.head.regression_head(features)
            return cls_logits, deltas, ctrness
        return tuple(self.head(features).values())


def build(name: str):
    """(module, example inputs as numpy arrays, settling batches) for architecture `name`."""

    tv = import_torchvision()
    models = tv.models
    kind = family(name)
    torch.manual_seed(0)
    if kind == "classification":
        kwargs = {"aux_logits": False, "init_weights": True} if name in ("googlenet", "inception_v3") else {}
        model = models.get_model(name, weights=None, **kwargs)
    elif kind == "quantized":
        model = models.get_model(name, weights=None, quantize=False)
    elif kind in ("segmentation", "detection"):
        model = models.get_model(name, weights=None, weights_backbone=None)
    else:
        model = models.get_model(name, weights=None)
    reinitialize(name, model)
    size = SIZES.get(name, (224, 224))
    if kind == "video":
        settle = [torch.from_numpy(video_batch(2, *size))]
        example = (video_batch(1, *size),)
    elif kind == "optical_flow":
        frames = photo_batch(3, size[0] + 8, size[1] + 8)
        # Two frames of one scene, the second shifted by a few pixels: a real flow.
        first, second = frames[:, :, :-8, :-8], frames[:, :, 5:-3, 3:-5]
        settle = [(torch.from_numpy(np.ascontiguousarray(first[1:])),
                   torch.from_numpy(np.ascontiguousarray(second[1:])))]
        example = (np.ascontiguousarray(first[:1]), np.ascontiguousarray(second[:1]))
    else:
        settle = [torch.from_numpy(photo_batch(4, *size))]
        # The fifth photo: one the statistics were not settled on.
        example = (photo_batch(5, *size)[4:],)
    if kind == "detection":  # settled through backbone and heads: the whole model in
        model = BackboneHeads(name, model)  # train mode wants targets and computes losses
    settle_batchnorm(model, settle)
    if kind == "quantized":
        model = quantize(model, settle)
    if kind == "segmentation":
        model = Output(model, "out")
    if kind == "optical_flow":
        model = LastFlow(model)
    model.eval()
    return model, example


class Output(torch.nn.Module):
    """One entry of a model's dict output (segmentation's "out")."""

    def __init__(self, model, key: str):
        super().__init__()
        self.model, self.key = model, key

    def forward(self, x):
        return self.model(x)[self.key]


class LastFlow(torch.nn.Module):
    """RAFT's final flow estimate (it returns one per refinement step)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, first, second):
        return self.model(first, second)[-1]


def reinitialize(name: str, model) -> None:
    """Weights random init leaves at values that make the output ignore the input."""

    with torch.no_grad():
        for pname, param in model.named_parameters():
            if "layer_scale" in pname:  # ConvNeXt: 1e-6
                param.fill_(1.0)
            elif param.dim() >= 2 and not param.any():  # ViT's head: zeros
                torch.nn.init.normal_(param, std=0.02)


def settle_batchnorm(model, batches, passes: int = 3) -> None:
    """BatchNorm running statistics from forward passes in train mode on photos (a
    cumulative average, so they are the photos' statistics, not 0/1 blended in)."""

    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(passes):
            for batch in batches:
                model(*batch) if isinstance(batch, tuple) else model(batch)
    model.eval()


def quantize(model, batches):
    """torchvision's quantizable model, fused and statically quantized (fbgemm) on the
    photos: the pre-quantized form it exports (QuantizeLinear/DequantizeLinear)."""

    model.eval()
    model.fuse_model()
    torch.backends.quantized.engine = "fbgemm"
    model.qconfig = torch.ao.quantization.get_default_qconfig("fbgemm")
    torch.ao.quantization.prepare(model, inplace=True)
    with torch.no_grad():
        for batch in batches:
            model(batch)
    torch.ao.quantization.convert(model, inplace=True)
    return model


def flat_outputs(result) -> list:

    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, dict):
        result = list(result.values())
    return [t for r in result for t in flat_outputs(r)]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        return float("nan")
    norm = np.linalg.norm(a) * np.linalg.norm(b)
    if norm == 0:
        return 1.0 if not (a.any() or b.any()) else 0.0
    return float(a @ b / norm)


def export(name: str, folder: Path) -> dict:
    """Build, export and run the references (onnxruntime, torch float16); writes
    N.onnx, N_input.npz and N_ort.npz into `folder`."""
    import onnxruntime as ort

    model, example = build(name)
    inputs = [f"input{i}" if len(example) > 1 else "input" for i in range(len(example))]
    tensors = tuple(torch.from_numpy(x) for x in example)
    with torch.no_grad():
        reference = [t.numpy() for t in flat_outputs(model(*tensors))]
    outputs = [f"output{i}" if len(reference) > 1 else "output" for i in range(len(reference))]
    onnx_path = folder / f"{name}.onnx"
    torch.onnx.export(
        model, tensors, str(onnx_path), opset_version=17, dynamo=False,
        input_names=inputs, output_names=outputs,
    )
    np.savez(folder / f"{name}_input.npz", **dict(zip(inputs, example)))
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    ort_out = session.run(outputs, dict(zip(inputs, example)))
    np.savez(folder / f"{name}_ort.npz", **dict(zip(outputs, ort_out)))
    info = {"outputs": outputs, "torch_vs_ort": min(cosine(a, b) for a, b in zip(reference, ort_out))}
    try:
        with torch.no_grad():
            half = [t.float().numpy() for t in flat_outputs(model.half()(*(t.half() for t in tensors)))]
        info["torch_f16"] = min(cosine(h, o) for h, o in zip(half, ort_out))
    except Exception as exc:  # noqa: BLE001 -- CPU half lacks some kernels: the comparison is then absent
        info["torch_f16"] = None
        info["torch_f16_error"] = first_line(str(exc))
    return info


def first_line(text: str) -> str:
    """The line of a tool's output that says what went wrong: its error line, else the
    comparison that failed, else a traceback's last error, else the last line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for marker, pick in (("error:", 0), ("below tolerance", 0), ("Error", -1)):
        hits = [line for line in lines if marker in line]
        if hits:
            return hits[pick][:300]
    return lines[-1][:300] if lines else ""


def tool(args: list[str], log) -> tuple[str | None, str]:
    """Run a tpu-xdsl command: its first error line (None when it succeeded) and output."""
    command = [sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", *args]
    log.write("$ tpu-xdsl " + " ".join(args) + "\n")
    log.flush()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    text = done.stdout + done.stderr
    log.write(text)
    log.flush()
    if done.returncode != 0:
        return first_line(text) or f"exit {done.returncode}", text
    return None, text


def device_check(deploy_output: str) -> bool | None:
    """Whether deploy's comparison of the device model with the TPU interpreter passed
    (None when deploy stopped before it)."""
    _, found, after = deploy_output.partition("vs device model")
    if not found:
        return None
    summary = next((line for line in after.splitlines() if "tensors compared" in line), "")
    return "all pass" in summary


def work(name: str, folder: Path) -> dict:
    """The whole flow for one architecture; the result row."""
    row: dict = {"model": name, "family": family(name), "stage": "none", "error": ""}
    start = time.time()
    try:
        row.update(export(name, folder))
    except Exception as exc:  # noqa: BLE001 -- any failure is the row's first error
        row["error"] = f"export: {type(exc).__name__}: {first_line(str(exc))}"
        return row
    row["stage"] = "export"
    n = str(folder / name)
    with open(folder / f"{name}.log", "w") as log:
        error, _ = tool(["transform", "--model-def", n + ".onnx", "--model-name", name,
                         "--test-input", n + "_input.npz", "--test-result", n + "_top.npz",
                         "-o", n + ".mlir"], log)
        if error:
            row["error"] = "transform: " + error
            # transform writes the module before comparing it with onnxruntime: a
            # tolerance failure still leaves a module to deploy.
            if not Path(n + ".mlir").exists():
                return row
        row["stage"] = "transform"
        # deploy compares TOP with the TPU interpreter, then the device model with the
        # TPU interpreter (the device check); it writes the model before comparing, so
        # a tolerance failure still leaves a model to run.
        # A pre-quantized model deploys in INT8 with its own scales (no calibration table).
        mode = "INT8" if row["family"] == "quantized" else "F16"
        row["mode"] = mode
        error, text = tool(["deploy", n + ".mlir", "--quantize", mode, "--chip", "bm1684x",
                            "--test-input", n + "_input.npz", "--test-reference", n + "_top.npz",
                            "-o", n + "_f16.tpumodel"], log)
        row["device_check"] = device_check(text)
        if error:
            row["error"] = row["error"] or "deploy: " + error
        if not Path(n + "_f16.tpumodel").exists():
            return row
        row["stage"] = "deploy"
        error, _ = tool(["run", n + "_f16.tpumodel", "--input", n + "_input.npz",
                         "--output", n + "_device.npz"], log)
        if error:
            row["error"] = row["error"] or "run: " + error
            return row
        row["stage"] = "device"
    reference = np.load(n + "_ort.npz")
    device = np.load(n + "_device.npz")
    row["names_kept"] = all(k in device.files for k in reference.files)
    cosines = []
    for position, key in enumerate(reference.files):
        found = key if key in device.files else key + "_f32" if key + "_f32" in device.files else None
        if found is None and position < len(device.files):
            found = device.files[position]
        cosines.append(cosine(device[found], reference[key]) if found else float("nan"))
    row["cosine"] = min(cosines)
    row["seconds"] = round(time.time() - start)
    return row


# --- the table (the parent process) ---------------------------------------------------


def passes(row: dict) -> bool:
    cos = row.get("cosine")
    if row.get("stage") != "device" or cos is None or not row.get("names_kept") or not row.get("device_check"):
        return False
    f16 = row.get("torch_f16")
    return cos >= TARGET or (f16 is not None and cos >= f16)


def fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6f}"
    return str(value)


def table(rows: list[dict]) -> str:
    lines = [
        (
            "| model | family | stage | cosine vs ORT | torch f16 cosine "
            "| names kept | device check | pass | seconds | first error |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        error = row.get("error", "").replace("|", "/")
        lines.append(
            f"| {row['model']} | {row['family']} | {row['stage']} | {fmt(row.get('cosine'))} | "
            f"{fmt(row.get('torch_f16'))} | {fmt(row.get('names_kept'))} | {fmt(row.get('device_check'))} | "
            f"{'yes' if passes(row) else 'no'} | {fmt(row.get('seconds'))} | {error} |"
        )
    exported = [r for r in rows if r["stage"] != "none"]
    good = sum(passes(r) for r in rows)
    lines.append("")
    lines.append(
        f"{good} of {len(exported)} exported architectures pass ({len(rows)} tried): device reached "
        f"{sum(r['stage'] == 'device' for r in rows)}, names kept "
        f"{sum(bool(r.get('names_kept')) for r in rows)}, device check passed "
        f"{sum(bool(r.get('device_check')) for r in rows)}."
    )
    return "\n".join(lines) + "\n"


def load_rows(results: Path) -> dict[str, dict]:
    rows = {}
    if results.exists():
        for line in results.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["model"]] = row
    return rows


def run_one(name: str, folder: Path, timeout: float) -> dict:
    """Run `work` in a child process (its own session, so a timeout ends all it started)."""
    out = folder / f"{name}.json"
    out.unlink(missing_ok=True)
    start = time.time()
    with open(folder / f"{name}.err", "w") as err:
        child = subprocess.Popen(
            [sys.executable, __file__, "--worker", name, "--dir", str(folder)],
            start_new_session=True, stdout=subprocess.DEVNULL, stderr=err,
        )
        try:
            child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            child = None
    if child is None:
        return {"model": name, "family": family(name), "stage": "none",
                "error": f"timeout after {timeout:.0f} s", "seconds": round(time.time() - start)}
    if out.exists():
        return json.loads(out.read_text())
    err = (folder / f"{name}.err").read_text()
    return {"model": name, "family": family(name), "stage": "none",
            "error": f"worker died (exit {child.returncode}): {first_line(err)}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated names (default: all; see --list)")
    parser.add_argument("--list", action="store_true", help="list the architectures and exit")
    parser.add_argument("--dir", default="corpus_runs", help="work folder (default: ./corpus_runs)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per model")
    parser.add_argument("--force", action="store_true", help="rerun models already in results")
    parser.add_argument("--table", help="also write the table to this file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    if args.worker:
        row = work(args.worker, folder)
        (folder / f"{args.worker}.json").write_text(json.dumps(row))
        return
    if args.list:
        for kind, names in FAMILIES.items():
            print(f"{kind}: {', '.join(names)}")
        return
    names = args.models.split(",") if args.models else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; --list shows the architectures")
    results = folder / "results.jsonl"
    rows = load_rows(results)
    for name in names:
        if name in rows and not args.force:
            continue
        print(f"{name} ...", flush=True)
        row = run_one(name, folder, args.timeout)
        rows[name] = row
        with open(results, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"  {row['stage']} cosine {fmt(row.get('cosine'))} {row.get('error', '')}", flush=True)
        text = table([rows[n] for n in MODELS if n in rows])
        (folder / "table.md").write_text(text)
        if args.table:
            Path(args.table).write_text(text)
    text = table([rows[n] for n in MODELS if n in rows])
    (folder / "table.md").write_text(text)
    if args.table:
        Path(args.table).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
