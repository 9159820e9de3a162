"""Trained models from other packages' wheels (tests/models/shipped.py) as a new user runs
them: `transform`, `deploy --quantize F16 -o N.tpumodel` with every stage checked, and
`run` on the device model; the final outputs keep their ONNX names and match
onnxruntime at cosine >= 0.999. Models with calibration samples also go through
`calibrate` and an INT8 deploy, their final outputs held to the model's INT8 cosine."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from tests.models.shipped import CORPUS, ShippedModel
from tests.test_cli_transform import tpu_xdsl
from tpu_xdsl.interp.compare import compare_tensors


def _cases():
    for model in CORPUS.values():
        for mode in model.modes:
            marks = [pytest.mark.slow] if model.slow else []
            yield pytest.param(model, mode, id=f"{model.name}-{mode}", marks=marks)


def bound_inputs(model: ShippedModel) -> set[str]:
    """The inputs `--constant-inputs` binds (they leave the TOP module's inputs)."""
    return {item.split("=")[0] for item in (model.constant_inputs or "").split(",") if item}


def deploy_and_run(model: ShippedModel, mode: str, folder) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(onnxruntime's outputs, the device model's outputs) on the model's input."""
    feeds = model.make_inputs()
    np.savez(folder / "x.npz", **feeds)
    session = ort.InferenceSession(str(model.path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    expected = dict(zip(names, session.run(None, feeds)))
    flags = ["--input-shapes", model.input_shapes] if model.input_shapes else []
    if model.constant_inputs:
        flags += ["--constant-inputs", model.constant_inputs]
    if model.transform_tolerance:
        flags += ["--tolerance", model.transform_tolerance]
    r = tpu_xdsl("transform", "--model-def", str(model.path), "--model-name", model.name, *flags,
                 "--test-input", str(folder / "x.npz"), "--test-result", str(folder / "top.npz"),
                 "-o", str(folder / "m.mlir"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    tpumodel = folder / f"m_{mode.lower()}.tpumodel"
    # BF16 keeps 8 significant bits: a detector's sigmoid scores near 0 differ by a few
    # percent (nudenet: euclidean 0.94), so BF16 takes TPU-MLIR's public 0.99,0.90.
    deploy_flags = ["--tolerance", "0.99,0.90"] if mode == "BF16" else []
    if mode == "INT8":
        assert model.calibration is not None, f"{model.name}: INT8 needs calibration samples"
        samples = folder / "calibration"
        samples.mkdir()
        for i, sample in enumerate(model.calibration()):
            np.savez(samples / f"s{i:02d}.npz", **{k: v for k, v in sample.items() if k not in bound_inputs(model)})
        r = tpu_xdsl("calibrate", str(folder / "m.mlir"), "--dataset", str(samples), "-o", str(folder / "table"))
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr
        # The final outputs are held to the model's INT8 cosine below; inner tensors may sit
        # lower (magika's layer norms, written over a non-trailing axis with the variance as
        # E[x^2] - E[x]^2, stay unfused: cosine ~0.88), so deploy's own check is loosened.
        deploy_flags = ["--calibration-table", str(folder / "table"), "--tolerance", "0.8,-1"]
    r = tpu_xdsl("deploy", str(folder / "m.mlir"), "--quantize", mode, "--test-input", str(folder / "x.npz"),
                 "--test-reference", str(folder / "top.npz"), *deploy_flags, "-o", str(tpumodel))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    # The device runs on what the user feeds it: bound constant inputs are no inputs any more.
    np.savez(folder / "device_in.npz", **{k: v for k, v in feeds.items() if k not in bound_inputs(model)})
    r = tpu_xdsl("run", str(tpumodel), "--input", str(folder / "device_in.npz"), "--output", str(folder / "out.npz"))
    assert r.returncode == 0, r.stderr
    with np.load(folder / "out.npz") as out:
        return expected, dict(out)


@pytest.mark.parametrize(("model", "mode"), list(_cases()))
def test_shipped_model_reaches_the_device(model, mode, tmp_path):
    expected, actual = deploy_and_run(model, mode, tmp_path)
    assert sorted(actual) == sorted(expected), "the device's outputs must keep the ONNX names"
    least = model.int8_min_cosine if mode == "INT8" else model.min_cosine
    for name, reference in expected.items():
        row = compare_tensors(name, reference, actual[name])
        assert row.problem is None and row.cosine >= least, f"{model.name} {mode} {name}: {row}"
