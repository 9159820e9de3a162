"""Cross-layer weight equalization (`tpu-xdsl calibrate --we`, Nagel et al. 2019, section 4.1).

The float model must not change (TOP before and after, and against onnxruntime), the
scales are the paper's s_c = sqrt(r1_c r2_c) / r2_c (checked by hand on small weights),
and per-tensor INT8 of a MobileNet-style block whose channels differ 100x in range gets
closer to onnxruntime's float output. Expected values come from onnxruntime and from
hand-computed ranges.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.test_calibration import assert_one_line_error, cli
from tpu_xdsl.calibration.equalization import equalize, find_pairs, pair_scales
from tpu_xdsl.calibration.table import read_table
from tpu_xdsl.interp.runner import ModuleRunner
from tpu_xdsl.ir_io import read_module
from tpu_xdsl.weights import attach_weights, weights_of

# -- helpers ------------------------------------------------------------------------------------


def mobilenet_block(path: Path, middle: str = "Relu", channels: int = 8, seed: int = 0) -> Path:
    """conv 3x3 (3 -> C) -> ReLU -> depthwise 3x3 -> `middle` -> conv 1x1 (C -> 4) ->
    LeakyRelu -> MaxPool -> grouped conv 1x1 (4 -> 4, 2 groups). The first conv's output
    channels span 100x in range and the depthwise conv undoes it (as BatchNorm folding
    leaves real MobileNets): per-tensor activation scales starve the small channels."""
    rng = np.random.default_rng(seed)
    spread = np.logspace(-1, 1, channels).astype(np.float32)  # 0.1 .. 10
    w1 = rng.standard_normal((channels, 3, 3, 3)).astype(np.float32) * 0.3 * spread[:, None, None, None]
    b1 = (np.abs(rng.standard_normal(channels)) * 0.1 * spread).astype(np.float32)
    wd = rng.standard_normal((channels, 1, 3, 3)).astype(np.float32) * 0.3 / spread[:, None, None, None]
    bd = (rng.standard_normal(channels) * 0.05).astype(np.float32)
    w2 = rng.standard_normal((4, channels, 1, 1)).astype(np.float32) * 0.5
    b2 = (rng.standard_normal(4) * 0.1).astype(np.float32)
    w3 = rng.standard_normal((4, 2, 1, 1)).astype(np.float32) * 0.5
    middle_node = (helper.make_node("Clip", ["c2", "lo", "hi"], ["m2"]) if middle == "Relu6"
                   else helper.make_node(middle, ["c2"], ["m2"]))
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "wd", "bd"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=channels),
        middle_node,
        helper.make_node("Conv", ["m2", "w2", "b2"], ["c3"], kernel_shape=[1, 1]),
        helper.make_node("LeakyRelu", ["c3"], ["l3"], alpha=0.1),
        helper.make_node("MaxPool", ["l3"], ["p3"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p3", "w3"], ["y"], kernel_shape=[1, 1], group=2),
    ]
    initializers = [numpy_helper.from_array(a, n) for n, a in
                    {"w1": w1, "b1": b1, "wd": wd, "bd": bd, "w2": w2, "b2": b2, "w3": w3,
                     "lo": np.array(0, np.float32), "hi": np.array(6, np.float32)}.items()]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def transform(capsys, onnx_path: Path, name: str) -> Path:
    mlir = onnx_path.with_suffix(".mlir")
    code, out, err = cli(capsys, "transform", "--model-def", onnx_path, "--model-name", name, "-o", mlir)
    assert code == 0, out + err
    return mlir


def load(mlir: Path):
    module = read_module(mlir)
    attach_weights(module, base_dir=mlir.parent)
    return module


def samples(folder: Path, count: int, seed: int) -> list[np.ndarray]:
    folder.mkdir()
    rng = np.random.default_rng(seed)
    found = []
    for i in range(count):
        x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
        np.savez(folder / f"s{i:02d}.npz", x=x)
        found.append(x)
    return found


def onnxruntime_outputs(onnx_path: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    return [session.run(None, {"x": x})[0] for x in inputs]


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


# -- the scales ----------------------------------------------------------------------------------


def test_scales_equalize_the_two_ranges_by_hand():
    """r1 = (4, 1), r2 = (1, 4): s = sqrt(r1 r2) / r2 = (2, 0.5); both ranges become 2."""
    w1 = np.array([[4.0, -1.0], [0.5, -1.0]]).reshape(2, 2, 1, 1)
    w2 = np.array([[1.0, 4.0], [-0.5, -2.0]]).reshape(2, 2, 1, 1)
    s = pair_scales(w1, w2, group2=1)
    np.testing.assert_allclose(s, [2.0, 0.5])
    np.testing.assert_allclose(np.abs(w1 / s[:, None, None, None]).reshape(2, -1).max(axis=1), [2.0, 2.0])
    np.testing.assert_allclose(np.abs(w2 * s[None, :, None, None]).max(axis=(0, 2, 3)), [2.0, 2.0])


def test_scales_of_a_depthwise_reader_and_of_dead_channels():
    """A depthwise conv2 reads channel c with its own filter only; a channel whose weights
    are zero, or below a millionth of the largest (rounding noise), on either side keeps
    s = 1."""
    w1 = np.array([9.0, 1.0, 0.0, 3.0, 1e-34, 4.0]).reshape(6, 1, 1, 1)
    w2 = np.array([1.0, 4.0, 2.0, 0.0, 1.0, 1e-30]).reshape(6, 1, 1, 1)  # group 6
    np.testing.assert_allclose(pair_scales(w1, w2, group2=6), [3.0, 0.5, 1.0, 1.0, 1.0, 1.0])


# -- the float model is unchanged ---------------------------------------------------------------


# conv1 -> relu -> depthwise, depthwise -> middle -> conv 1x1, conv 1x1 -> leaky relu -> maxpool -> grouped
PAIRS = {
    "Relu": ["r1 -> m2", "m2 -> c3", "c3 -> y"],
    "Identity": ["r1 -> c2", "c2 -> c3", "c3 -> y"],
    "PRelu": ["r1 -> c2", "c2 -> c3", "c3 -> y"],
}


@pytest.mark.parametrize("middle", ["Relu", "Identity", "PRelu"])
def test_equalization_leaves_the_float_model_unchanged(tmp_path, capsys, middle):
    if middle == "PRelu":
        onnx_path = mobilenet_block(tmp_path / "block.onnx")
        model = onnx.load(onnx_path)
        node = next(n for n in model.graph.node if n.output == ["m2"])
        node.op_type, node.input[:] = "PRelu", ["c2", "slope"]
        slope = np.linspace(0.05, 0.3, 8, dtype=np.float32).reshape(8, 1, 1)
        model.graph.initializer.append(numpy_helper.from_array(slope, "slope"))
        onnx.save(model, onnx_path)
    else:
        onnx_path = mobilenet_block(tmp_path / "block.onnx", middle)
    mlir = transform(capsys, onnx_path, "block")
    module = load(mlir)
    inputs = [np.random.default_rng(7 + i).standard_normal((1, 3, 16, 16)).astype(np.float32) for i in range(3)]
    before = [ModuleRunner(module, weights_of(module)).run({"x": x})["y"] for x in inputs]
    report = equalize(module)
    assert [p.names for p in report.pairs] == PAIRS[middle]
    # each channel's weight ranges in its two convs, 100x apart (times the random spread), end equal
    assert report.mismatch_before > 100 and report.mismatch_after < 1.01
    after = [ModuleRunner(module, weights_of(module)).run({"x": x})["y"] for x in inputs]
    for b, a, ref in zip(before, after, onnxruntime_outputs(onnx_path, inputs), strict=True):
        assert relative(a, b) < 1e-5
        assert relative(a, ref) < 1e-5


def test_relu6_pairs_are_left_alone_and_the_model_still_unchanged(tmp_path, capsys):
    mlir = transform(capsys, mobilenet_block(tmp_path / "block.onnx", "Relu6"), "block")
    module = load(mlir)
    pairs, skipped = find_pairs(module)
    assert len(pairs) == 2 and sum(skipped.values()) == 1
    assert "ReLU6" in next(iter(skipped))
    x = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32)
    before = ModuleRunner(module, weights_of(module)).run({"x": x})["y"]
    report = equalize(module)
    assert any("ReLU6" in line for line in report.lines())
    after = ModuleRunner(module, weights_of(module)).run({"x": x})["y"]
    assert relative(after, before) < 1e-5


# -- per-tensor INT8 gets better ------------------------------------------------------------------


def int8_outputs(mlir: Path, table: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The TPU interpreter's final output of `mlir` lowered to per-tensor INT8 with `table`."""
    from tpu_xdsl.transforms.import_calibration import import_calibration
    from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu

    module = load(mlir)
    import_calibration(module, read_table(table), str(table))
    lower_top_to_tpu(module, "INT8", per_tensor_activations=True)
    runner = ModuleRunner(module, weights_of(module))
    return [runner.run({"x": x})["y"].astype(np.float32) for x in inputs]


def sqnr(reference: list[np.ndarray], actual: list[np.ndarray]) -> float:
    ref = np.concatenate([r.ravel() for r in reference]).astype(np.float64)
    out = np.concatenate([a.ravel() for a in actual]).astype(np.float64)
    return float(10 * np.log10(np.sum(ref**2) / np.sum((out - ref) ** 2)))


def test_equalization_lifts_per_tensor_int8_against_onnxruntime(tmp_path, capsys):
    onnx_path = mobilenet_block(tmp_path / "block.onnx", seed=1)
    mlir = transform(capsys, onnx_path, "block")
    samples(tmp_path / "cal", 12, seed=1)
    held_out = [np.random.default_rng(100 + i).standard_normal((1, 3, 16, 16)).astype(np.float32) for i in range(6)]
    expected = onnxruntime_outputs(onnx_path, held_out)
    code, out, err = cli(capsys, "calibrate", mlir, "--dataset", tmp_path / "cal", "-o", tmp_path / "plain_table")
    assert code == 0, err
    code, out, err = cli(capsys, "calibrate", mlir, "--dataset", tmp_path / "cal", "--we", "-o", tmp_path / "we_table")
    assert code == 0, err
    equalized = tmp_path / "block_we.mlir"
    assert "weight equalization: 3 conv pair(s)" in out and f"deploy {equalized}" in out
    assert (tmp_path / "block_we_weights.npz").is_file()
    plain = sqnr(expected, int8_outputs(mlir, tmp_path / "plain_table", held_out))
    lifted = sqnr(expected, int8_outputs(equalized, tmp_path / "we_table", held_out))
    # measured 22.1 -> 30.4 dB; at least 4x less noise energy
    assert lifted > plain + 6, (plain, lifted)
    # the equalized module is the same float model
    module = load(equalized)
    top = [ModuleRunner(module, weights_of(module)).run({"x": x})["y"] for x in held_out]
    assert max(relative(t, e) for t, e in zip(top, expected, strict=True)) < 1e-5
    # deploy takes the equalized module with its table
    code, out, err = cli(capsys, "deploy", equalized, "--quantize", "INT8", "--calibration-table",
                         tmp_path / "we_table", "--per-tensor-activations", "-o", tmp_path / "block_int8.mlir")
    assert code == 0, out + err


# -- the command line -------------------------------------------------------------------------------


def no_conv_model(path: Path) -> Path:
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])]
    graph = helper.make_graph(nodes, "noconv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_we_without_convs_is_a_note_and_the_module_is_written_unchanged(tmp_path, capsys):
    mlir = transform(capsys, no_conv_model(tmp_path / "noconv.onnx"), "noconv")
    samples(tmp_path / "cal", 3, seed=2)
    code, out, err = cli(capsys, "calibrate", mlir, "--dataset", tmp_path / "cal", "--we", "-o", tmp_path / "t")
    assert code == 0, err
    assert "note: --we found no conv -> conv chain to equalize" in out
    assert (tmp_path / "t").is_file() and (tmp_path / "noconv_we.mlir").is_file()


def test_model_output_names_and_refusals(tmp_path, capsys):
    mlir = transform(capsys, mobilenet_block(tmp_path / "block.onnx"), "block")
    samples(tmp_path / "cal", 3, seed=2)
    before = sorted(p.name for p in tmp_path.iterdir())
    base = ["calibrate", mlir, "--dataset", tmp_path / "cal"]
    code, _, err = cli(capsys, *base, "--we", "--model-output", mlir, "-o", tmp_path / "t")
    assert_one_line_error(code, err, "would overwrite the input model")
    code, _, err = cli(capsys, *base, "--model-output", tmp_path / "m.mlir", "-o", tmp_path / "t")
    assert_one_line_error(code, err, "--model-output", "--we or --bc")
    code, _, err = cli(capsys, *base, "--we", "--model-output", tmp_path / "m.txt", "-o", tmp_path / "t")
    assert_one_line_error(code, err, "name the TOP .mlir file")
    code, _, err = cli(capsys, *base, "--we", "--model-output", tmp_path / "sub.mlir", "-o", tmp_path / "sub.mlir")
    assert_one_line_error(code, err, "is also the table")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    code, _, err = cli(capsys, *base, "--we", "--model-output", tmp_path / "mine.mlir", "-o", tmp_path / "t")
    assert code == 0, err
    assert (tmp_path / "mine.mlir").is_file() and (tmp_path / "mine_weights.npz").is_file()
    assert read_table(tmp_path / "t").rows


def test_the_written_weights_never_land_on_the_input_weight_file(tmp_path, capsys):
    """An input whose weight file is out_weights.npz: --model-output out.mlir would write
    its weights there."""
    mlir = transform(capsys, mobilenet_block(tmp_path / "block.onnx"), "block")
    (tmp_path / "block_weights.npz").rename(tmp_path / "out_weights.npz")
    mlir.write_text(mlir.read_text().replace('"block_weights.npz"', '"out_weights.npz"'))
    samples(tmp_path / "cal", 3, seed=2)
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    code, _, err = cli(capsys, "calibrate", mlir, "--dataset", tmp_path / "cal", "--we",
                       "--model-output", tmp_path / "out.mlir", "-o", tmp_path / "t")
    assert_one_line_error(code, err, "out_weights.npz", "would overwrite the input model's")
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == before


def upsampling_head(path: Path) -> Path:
    """conv 3x3 -> ReLU -> deconv 2x2 stride 2 -> ReLU -> deconv 2x2 stride 2 -> ReLU ->
    conv 1x1 (a DBNet-style head), channels 100x apart in range."""
    rng = np.random.default_rng(5)
    spread = np.logspace(-1, 1, 6).astype(np.float32)
    w1 = rng.standard_normal((6, 3, 3, 3)).astype(np.float32) * spread[:, None, None, None]
    d1 = rng.standard_normal((6, 4, 2, 2)).astype(np.float32) / spread[:, None, None, None]
    d2 = (
        rng.standard_normal((4, 5, 2, 2)).astype(np.float32)
        * np.array([0.1, 1, 10, 3, 0.3], np.float32)[None, :, None, None]
    )
    w3 = rng.standard_normal((2, 5, 1, 1)).astype(np.float32)
    b = {n: (rng.standard_normal(c) * 0.1).astype(np.float32) for n, c in (("b1", 6), ("bd1", 4), ("bd2", 5))}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("ConvTranspose", ["r1", "d1", "bd1"], ["u1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Relu", ["u1"], ["ru1"]),
        helper.make_node("ConvTranspose", ["ru1", "d2", "bd2"], ["u2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Relu", ["u2"], ["ru2"]),
        helper.make_node("Conv", ["ru2", "w3"], ["y"], kernel_shape=[1, 1]),
    ]
    initializers = [numpy_helper.from_array(a, n) for n, a in {"w1": w1, "d1": d1, "d2": d2, "w3": w3, **b}.items()]
    graph = helper.make_graph(nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_transposed_convs_take_part_and_the_float_model_stays(tmp_path, capsys):
    onnx_path = upsampling_head(tmp_path / "head.onnx")
    module = load(transform(capsys, onnx_path, "head"))
    inputs = [np.random.default_rng(20 + i).standard_normal((1, 3, 8, 8)).astype(np.float32) for i in range(2)]
    report = equalize(module)
    assert [p.names for p in report.pairs] == ["r1 -> ru1", "ru1 -> ru2", "ru2 -> y"]
    # each channel's weight ranges in its two convs, 100x apart (times the random spread), end equal
    assert report.mismatch_before > 100 and report.mismatch_after < 1.01
    after = [ModuleRunner(module, weights_of(module)).run({"x": x})["y"] for x in inputs]
    for a, ref in zip(after, onnxruntime_outputs(onnx_path, inputs), strict=True):
        assert relative(a, ref) < 1e-5
