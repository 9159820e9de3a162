"""`tpu-xdsl deploy -o M.tpumodel`, `run M.tpumodel` and `info M.tpumodel` as a user runs them:
the compiled model reproduces the TPU interpreter bit for bit, and every bad input (a corrupt,
truncated or foreign model file, inputs of the wrong name, shape or dtype, weights larger than
the chip's DDR) is one line naming what is wrong, exit code 2, and no file written.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from tests.test_cli_int8_errors import (
    assert_fails_cleanly,
    calibrated_top,
    int8_head_model,
    run,
    snapshot,
)
from tests.test_cli_transform import assert_user_error, tpu_xdsl
from tpu_xdsl.device import chip as chip_module


@dataclass(frozen=True)
class Compiled:
    folder: Path
    model: Path  # the .tpumodel
    mlir: Path  # its TPU module, written beside it
    x: Path  # a test input, by input name
    deploy_out: str


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Compiled:
    """conv -> relu -> flatten -> matmul, calibrated on 4 samples and compiled INT8 for bm1684x.
    The tolerance is loose: 4 random samples calibrate the matmul poorly, and this module is
    about the device matching the interpreter, which is exact whatever the calibration."""
    folder = tmp_path_factory.mktemp("device")
    top = calibrated_top(folder, int8_head_model(folder / "m.onnx"), "m")
    out = folder / "m_int8.tpumodel"
    result = tpu_xdsl("deploy", str(top.mlir), "--quantize", "INT8", "--calibration-table", str(top.table),
                      "--test-input", str(top.x), "--test-reference", str(top.reference), "--tolerance", "0.5,-1",
                      "-o", str(out))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    return Compiled(folder, out, folder / "m_int8.mlir", top.x, result.stdout)


def test_deploy_compares_the_device_with_the_interpreter(compiled):
    lines = compiled.deploy_out.splitlines()
    assert any(line.startswith("wrote ") and "m_int8.tpumodel (" in line for line in lines), compiled.deploy_out
    assert "TPU interpreter (reference) vs device model bm1684x, by tensor name" in compiled.deploy_out
    device_summary = next(line for line in lines if "integer tensors equal" in line)
    assert device_summary.endswith("integer tensors equal, all pass")
    assert int(device_summary.split()[0]) >= 4  # every named tensor, not just the output
    assert compiled.mlir.is_file()


def test_run_equals_the_interpreter_bit_for_bit(compiled, tmp_path, capsys):
    device_out, interp_out = tmp_path / "device.npz", tmp_path / "interp.npz"
    code, out, err = run(capsys, "run", compiled.model, "--input", compiled.x, "--output", device_out, "--dump-all")
    assert code == 0, err
    assert "logits: shape [1, 5] float32" in out
    assert "bm1684x: " in out and " cycles = " in out
    code, _, err = run(capsys, "run", compiled.mlir, "--input", compiled.x, "--output", interp_out, "--dump-all")
    assert code == 0, err
    with np.load(device_out) as device, np.load(interp_out) as interp:
        shared = sorted(set(device.files) & set(interp.files))
        # "relu" (the conv's output) lives in local memory only: the conv runs in a layer
        # group with the input's cast and the requantization after it.
        # The output keeps its ONNX name (the f32 cast); the matmul's INT8 value is derived.
        assert {"flat", "logits", "logits_int8"} <= set(shared)
        assert "relu" in interp.files and "relu" not in device.files
        for name in shared:
            assert device[name].dtype == interp[name].dtype, name
            np.testing.assert_array_equal(device[name], interp[name], err_msg=name)
        assert device["logits_int8"].dtype == np.int8 and device["logits"].dtype == np.float32


def test_run_profile_reports_every_layer(compiled, tmp_path, capsys):
    code, out, err = run(capsys, "run", compiled.model, "--input", compiled.x, "--output", tmp_path / "y.npz",
                         "--profile")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["layer", "or", "group", "ops", "slices", "cycles", "compute", "dma", "MACs", "util",
                                "DMA", "bytes", "compute%", "DMA%"]
    rows = {line.split()[0]: line.split() for line in lines[1:] if line.split() and line.split()[0] == "logits_int8"}
    # The input's cast, the conv (+relu) and its requantization run as one layer group.
    group = next(line.split() for line in lines if line.startswith("group 0: "))
    assert group[3:5] == ["3", "1x1"]
    assert "    ops: image_int8, relu, relu_per_tensor" in lines
    # MACs counted by hand: conv 4 oc x 3 ic x 9 taps x 64 pixels; matmul 256 x 5.
    assert group[8] == str(4 * 3 * 9 * 64)
    assert rows["logits_int8"][6] == str(256 * 5)  # the matmul; "logits" is its cast to f32
    assert rows["logits_int8"][1:3] == ["-", "-"]  # not in a layer group
    assert any(line.startswith("roofline: bound ") for line in lines)
    total = next(line for line in lines if line.startswith("total: "))
    assert f"{4 * 3 * 9 * 64 + 256 * 5} MACs" in total


def test_info(compiled, capsys):
    code, out, err = run(capsys, "info", compiled.model)
    assert code == 0, err
    assert "chip: bm1684x" in out and "mode: INT8" in out
    assert "input image: 1x3x8x8 float32" in out
    assert "output logits: 1x5 float32" in out
    memory_map = out.split("memory map (DDR):", 1)[1]
    assert "coefficients" in memory_map
    assert "  image [1, 3, 8, 8] float32" in memory_map  # inputs too, not just tensors computed


# -- bad input ----------------------------------------------------------------------------------


def damaged(compiled: Compiled, folder: Path, name: str, edit) -> Path:
    data = bytearray(compiled.model.read_bytes())
    path = folder / name
    path.write_bytes(bytes(edit(data)))
    return path


def flip_middle(data: bytearray) -> bytearray:
    data[len(data) // 2] ^= 0x40
    return data


def test_a_corrupt_model(compiled, tmp_path, capsys):
    model = damaged(compiled, tmp_path, "corrupt.tpumodel", flip_middle)
    for args in (["run", model, "--input", compiled.x, "--output", tmp_path / "y.npz"], ["info", model]):
        line = assert_fails_cleanly(capsys, (tmp_path,), args, "corrupt.tpumodel", "checksum")
        assert "compile it again" in line or "deploy" in line, line


def test_a_truncated_model(compiled, tmp_path, capsys):
    model = damaged(compiled, tmp_path, "cut.tpumodel", lambda d: d[: len(d) * 2 // 3])
    assert_fails_cleanly(capsys, (tmp_path,), ["run", model, "--input", compiled.x, "--output", tmp_path / "y.npz"],
                         "cut.tpumodel", "truncated")


def test_a_model_for_another_chip(compiled, tmp_path, capsys):
    assert_fails_cleanly(
        capsys,
        (tmp_path, compiled.folder),
        ["run", compiled.model, "--chip", "cv183x", "--input", compiled.x, "--output", tmp_path / "y.npz"],
        "bm1684x",
        "cv183x",
    )


def test_an_unknown_chip(compiled, tmp_path, capsys):
    assert_fails_cleanly(
        capsys,
        (tmp_path, compiled.folder),
        ["run", compiled.model, "--chip", "bm1686", "--input", compiled.x, "--output", tmp_path / "y.npz"],
        "unknown chip 'bm1686'",
        "bm1684x, cv183x",
    )


@pytest.mark.parametrize(
    ("arrays", "fragments"),
    [
        ({"image": np.zeros((1, 3, 4, 4), np.float32)}, ("input 'image' has shape [1, 3, 4, 4]", "[1, 3, 8, 8]")),
        ({"image": np.zeros((1, 3, 8, 8), np.int64)}, ("input 'image' has dtype int64", "float32")),
        ({"picture": np.zeros((1, 3, 8, 8), np.float32), "other": np.zeros(1)}, ("missing input(s) image", "picture")),
    ],
    ids=["shape", "dtype", "name"],
)
def test_bad_inputs(compiled, tmp_path, capsys, arrays, fragments):
    x = tmp_path / "x.npz"
    np.savez(x, **arrays)
    assert_fails_cleanly(capsys, (tmp_path, compiled.folder),
                         ["run", compiled.model, "--input", x, "--output", tmp_path / "y.npz"], *fragments)


def test_a_missing_model_and_a_missing_input(compiled, tmp_path, capsys):
    assert_fails_cleanly(capsys, (tmp_path,), ["run", tmp_path / "none.tpumodel", "--input", compiled.x,
                                               "--output", tmp_path / "y.npz"], "none.tpumodel")
    assert_fails_cleanly(capsys, (tmp_path, compiled.folder),
                         ["run", compiled.model, "--input", tmp_path / "none.npz", "--output", tmp_path / "y.npz"],
                         "none.npz", "no such input file")
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"PK\x03\x04 not really a zip file")
    for model in (compiled.model, compiled.mlir):
        assert_fails_cleanly(capsys, (tmp_path, compiled.folder),
                             ["run", model, "--input", corrupt, "--output", tmp_path / "y.npz"],
                             "corrupt.npz: cannot read inputs", "give an .npz, .npy or image file")


def test_weights_larger_than_the_chips_ddr(compiled, tmp_path, capsys, monkeypatch):
    """A bm1684x with 1 KiB of DDR (the model's coefficients are 1.4 KiB): the compile error
    names both sizes, and neither the .tpumodel nor its .mlir is written."""
    small = replace(chip_module.CHIPS["bm1684x"], ddr_bytes=1024)
    monkeypatch.setitem(chip_module.CHIPS, "bm1684x", small)
    top = compiled.folder / "m.mlir"
    assert_fails_cleanly(
        capsys, (tmp_path, compiled.folder),
        ["deploy", top, "--quantize", "INT8", "--calibration-table", compiled.folder / "m_cali_table",
         "-o", tmp_path / "big.tpumodel"],
        "the model needs", "weights 1.44 KiB", "bm1684x has 1.00 KiB", "more DDR",
    )


def test_a_corrupt_model_from_the_real_command_line(compiled, tmp_path):
    model = damaged(compiled, tmp_path, "corrupt.tpumodel", flip_middle)
    before = snapshot(tmp_path)
    result = tpu_xdsl("run", str(model), "--input", str(compiled.x), "--output", str(tmp_path / "y.npz"))
    assert_user_error(result, "corrupt.tpumodel", "checksum")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (["--opt", "3"], ["--opt 3", "use 1 (greedy) or 2"]),
        (["--opt", "1", "--disable-layer-group"], ["--opt 1", "--disable-layer-group", "give one"]),
    ],
)
def test_bad_layer_group_flags(compiled, tmp_path, capsys, flags, fragments):
    assert_fails_cleanly(
        capsys, (tmp_path, compiled.folder),
        ["deploy", compiled.folder / "m.mlir", "--quantize", "INT8", "--calibration-table",
         compiled.folder / "m_cali_table", *flags, "-o", tmp_path / "m.tpumodel"],
        *fragments,
    )


def test_greedy_and_no_groups_give_the_same_outputs(compiled, tmp_path, capsys):
    outputs = {}
    for name, flags in (("greedy", ["--opt", "1"]), ("alone", ["--disable-layer-group"])):
        model = tmp_path / f"{name}.tpumodel"
        code, out, err = run(capsys, "deploy", compiled.folder / "m.mlir", "--quantize", "INT8",
                             "--calibration-table", compiled.folder / "m_cali_table", *flags, "-o", model)
        assert code == 0, err
        assert ("tpu-layer-group (bm1684x, opt 1)" in out) == (name == "greedy"), out
        code, _, err = run(capsys, "run", model, "--input", compiled.x, "--output", tmp_path / f"{name}.npz")
        assert code == 0, err
        outputs[name] = dict(np.load(tmp_path / f"{name}.npz"))
    assert outputs["greedy"].keys() == outputs["alone"].keys()
    for key, value in outputs["alone"].items():
        np.testing.assert_array_equal(outputs["greedy"][key], value, err_msg=key)
