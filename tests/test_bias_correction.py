"""Bias correction (`tpu-xdsl calibrate --bc`): the mean error of each INT8 conv or matmul,
measured on the calibration samples, is folded back into its bias.

The model is built so that rounding its weights shifts the outputs' mean by a known
sign: every output channel has one large weight (which sets its int8 scale s = 1/127)
and small weights of 1.45 s each, which round down to s (error -0.45 s apiece), on
inputs whose mean is 2. The mean error of the conv and of the matmul, against
onnxruntime's float outputs on held-out inputs, must shrink.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.test_calibration import assert_one_line_error, cli
from tpu_xdsl.calibration.bias_correction import MIN_SAMPLES
from tpu_xdsl.calibration.table import read_table
from tpu_xdsl.interp.runner import ModuleRunner, TensorCapture, real_values
from tpu_xdsl.ir_io import read_module
from tpu_xdsl.weights import attach_weights, weights_of

CHANNELS, SIDE = 4, 6
STEP = 1.0 / 127  # the int8 weight scale of a channel whose largest weight is 1


def shifted_model(path: Path) -> Path:
    """depthwise conv 3x3 (no bias) -> flatten -> matmul (no bias): every filter and every
    matmul column is one weight of 1 and the rest 1.45 / 127 (a sign flip on half of the
    matmul's, so its output stays moderate)."""
    dw = np.full((CHANNELS, 1, 3, 3), 1.45 * STEP, np.float32)
    dw[:, 0, 1, 1] = 1.0
    k = CHANNELS * SIDE * SIDE
    fc = np.full((k, 3), 1.45 * STEP, np.float32)
    fc[: k // 2, 1] *= -1
    fc[0, :] = 1.0
    nodes = [
        helper.make_node("Conv", ["x", "dw"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=CHANNELS),
        helper.make_node("Flatten", ["c"], ["f"], axis=1),
        helper.make_node("MatMul", ["f", "fc"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "shifted",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, CHANNELS, SIDE, SIDE])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("c", TensorProto.FLOAT, None),
        ],
        [numpy_helper.from_array(dw, "dw"), numpy_helper.from_array(fc, "fc")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def inputs(count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(1, 3, (1, CHANNELS, SIDE, SIDE)).astype(np.float32) for _ in range(count)]


def write_samples(folder: Path, xs: list[np.ndarray]) -> Path:
    folder.mkdir()
    for i, x in enumerate(xs):
        np.savez(folder / f"s{i:02d}.npz", x=x)
    return folder


def load(mlir: Path):
    module = read_module(mlir)
    attach_weights(module, base_dir=mlir.parent)
    return module


def int8_tensors(mlir: Path, table: Path, xs: list[np.ndarray], per_tensor: bool) -> list[dict[str, np.ndarray]]:
    """Every tensor of the TPU interpreter's INT8 run, as the real values it stands for."""
    from tpu_xdsl.transforms.import_calibration import import_calibration
    from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu

    module = load(mlir)
    import_calibration(module, read_table(table), str(table))
    lower_top_to_tpu(module, "INT8", per_tensor_activations=per_tensor)
    runner = ModuleRunner(module, weights_of(module))
    found = []
    for x in xs:
        capture = TensorCapture()
        runner.run({"x": x}, [capture])
        found.append(real_values(module, capture.tensors))
    return found


def mean_error(reference: list[np.ndarray], actual: list[np.ndarray], axis: int) -> np.ndarray:
    """Per channel along `axis`: the mean of (int8 - float) over the samples and positions."""
    diff = np.concatenate([np.asarray(a, np.float64) - r for r, a in zip(reference, actual, strict=True)])
    return diff.mean(axis=tuple(a for a in range(diff.ndim) if a != axis))


@pytest.mark.parametrize("per_tensor", [False, True], ids=["per-channel", "per-tensor"])
def test_bias_correction_shrinks_the_mean_error_on_held_out_inputs(tmp_path, capsys, per_tensor):
    onnx_path = shifted_model(tmp_path / "shifted.onnx")
    mlir = tmp_path / "shifted.mlir"
    code, out, err = cli(capsys, "transform", "--model-def", onnx_path, "--model-name", "shifted", "-o", mlir)
    assert code == 0, err
    cal = write_samples(tmp_path / "cal", inputs(8, seed=1))
    scheme = ["--per-tensor-activations"] if per_tensor else []
    code, out, err = cli(capsys, "calibrate", mlir, "--dataset", cal, "-o", tmp_path / "plain")
    assert code == 0, err
    code, out, err = cli(capsys, "calibrate", mlir, "--dataset", cal, "--bc", *scheme, "-o", tmp_path / "bc")
    assert code == 0, err
    corrected = tmp_path / "shifted_bc.mlir"
    assert "bias correction: 2 conv/matmul bias(es) corrected" in out and f"deploy {corrected}" in out

    held_out = inputs(6, seed=50)
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    expected = [dict(zip(("y", "c"), session.run(None, {"x": x}), strict=True)) for x in held_out]
    before = int8_tensors(mlir, tmp_path / "plain", held_out, per_tensor)
    after = int8_tensors(corrected, tmp_path / "bc", held_out, per_tensor)
    for name, axis in (("c", 1), ("y", 1)):
        reference = [e[name] for e in expected]
        was = np.abs(mean_error(reference, [b[name] for b in before], axis))
        now = np.abs(mean_error(reference, [a[name] for a in after], axis))
        # the rounding shift is -0.45 / 127 per small weight times the input mean 2
        assert was.max() > 0.02, (name, was)
        assert now.max() < 0.35 * was.max(), (name, was, now)
    # the ops had no bias: the corrected module has one for each, and only those changed,
    # so its float output is onnxruntime's moved by the same constant for every input
    module = load(corrected)
    biased = [op for op in module.walk() if op.name in ("top.conv", "top.matmul")]
    assert len(biased) == 2 and all(op.operands[2].owner.name == "top.weight" for op in biased)
    runner = ModuleRunner(module, weights_of(module))
    moved = [runner.run({"x": x})["y"] - e["y"] for x, e in zip(held_out[:2], expected, strict=False)]
    np.testing.assert_allclose(moved[0], moved[1], atol=1e-4)


def test_bc_needs_enough_samples_and_its_flags_go_with_it(tmp_path, capsys):
    onnx_path = shifted_model(tmp_path / "shifted.onnx")
    mlir = tmp_path / "shifted.mlir"
    assert cli(capsys, "transform", "--model-def", onnx_path, "--model-name", "shifted", "-o", mlir)[0] == 0
    few = write_samples(tmp_path / "few", inputs(MIN_SAMPLES - 1, seed=1))
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = cli(capsys, "calibrate", mlir, "--dataset", few, "--bc", "-o", tmp_path / "t")
    assert_one_line_error(code, err, "--bc", f"only {MIN_SAMPLES - 1} sample(s) found", f"at least {MIN_SAMPLES}")
    code, _, err = cli(capsys, "calibrate", mlir, "--dataset", few, "--bc", "--bc-num", "2", "-o", tmp_path / "t")
    assert_one_line_error(code, err, "--bc-num 2", f"at least {MIN_SAMPLES}")
    code, _, err = cli(capsys, "calibrate", mlir, "--dataset", few, "--bc", "--input-num", "2", "-o", tmp_path / "t")
    assert_one_line_error(code, err, "--input-num 2", f"at least {MIN_SAMPLES}")
    code, _, err = cli(capsys, "calibrate", mlir, "--dataset", few, "--asymmetric", "-o", tmp_path / "t")
    assert_one_line_error(code, err, "--asymmetric", "with --bc")
    code, _, err = cli(capsys, "calibrate", mlir, "--dataset", few, "--bc", "--chip", "nochip", "-o", tmp_path / "t")
    assert_one_line_error(code, err, "nochip")
    code, _, err = cli(capsys, "calibrate", mlir, "--dataset", few, "--bc", "--asymmetric",
                       "--per-tensor-activations", "-o", tmp_path / "t")
    assert_one_line_error(code, err, "--asymmetric", "--per-tensor-activations")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_bc_on_a_module_without_conv_or_matmul_is_a_note(tmp_path, capsys):
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    graph = helper.make_graph(nodes, "relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx_path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), onnx_path)
    mlir = tmp_path / "relu.mlir"
    assert cli(capsys, "transform", "--model-def", onnx_path, "--model-name", "relu", "-o", mlir)[0] == 0
    cal = write_samples(tmp_path / "cal", inputs(MIN_SAMPLES, seed=2))
    code, out, err = cli(capsys, "calibrate", mlir, "--dataset", cal, "--bc", "-o", tmp_path / "t")
    assert code == 0, err
    assert "note: --bc found no INT8 conv or matmul" in out
    assert (tmp_path / "t").is_file() and (tmp_path / "relu_bc.mlir").is_file()


def test_we_and_bc_together_write_one_module_named_after_both(tmp_path, capsys):
    onnx_path = shifted_model(tmp_path / "shifted.onnx")
    mlir = tmp_path / "shifted.mlir"
    assert cli(capsys, "transform", "--model-def", onnx_path, "--model-name", "shifted", "-o", mlir)[0] == 0
    cal = write_samples(tmp_path / "cal", inputs(MIN_SAMPLES, seed=3))
    code, out, err = cli(capsys, "calibrate", mlir, "--dataset", cal, "--we", "--bc", "-o", tmp_path / "t")
    assert code == 0, err
    assert "note: --we found no conv -> conv chain" in out and "bias correction: 2 conv/matmul" in out
    written = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("shifted_we_"))
    assert written == ["shifted_we_bc.mlir", "shifted_we_bc_weights.npz"]
    assert read_table(tmp_path / "t").rows


def test_corrections_that_take_the_int8_model_away_from_float_are_not_applied(tmp_path, capsys, monkeypatch):
    """Shifts of +5 on every channel (as a bad measurement would give) lower the INT8
    model's output cosine against float: the biases stay as they were, with a note."""
    from tpu_xdsl.calibration import bias_correction
    from tpu_xdsl.calibration.bias_correction import Scheme, bias_correct

    onnx_path = shifted_model(tmp_path / "shifted.onnx")
    mlir = tmp_path / "shifted.mlir"
    assert cli(capsys, "transform", "--model-def", onnx_path, "--model-name", "shifted", "-o", mlir)[0] == 0
    xs = inputs(MIN_SAMPLES, seed=4)
    cal = write_samples(tmp_path / "cal", xs)
    assert cli(capsys, "calibrate", mlir, "--dataset", cal, "-o", tmp_path / "t")[0] == 0
    module = load(mlir)
    before = {n: np.array(weights_of(module)[n]) for n in weights_of(module)}
    monkeypatch.setattr(bias_correction, "measure_shifts",
                        lambda *args, **kwargs: {"c": np.full(CHANNELS, 5.0), "y": np.full(3, 5.0)})
    report = bias_correct(module, read_table(tmp_path / "t"), [{"x": x} for x in xs], Scheme())
    assert report.kept_original and report.cosine_after < report.cosine_before
    assert "left the biases unchanged" in report.lines()[0]
    after = weights_of(module)
    assert set(after) == set(before) and all(np.array_equal(after[n], before[n]) for n in before)
    biases = [op.operands[2].owner.name for op in module.walk() if op.name in ("top.conv", "top.matmul")]
    assert biases == ["top.none"] * 2
