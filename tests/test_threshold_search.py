"""Threshold search (`tpu-xdsl calibrate --search-threshold`): per tensor, the method among
kl, mse, max and percentile9999 whose threshold gives the best SQNR of the outputs of the
ops that read the tensor.

The expected choice is computed here by brute force: each candidate threshold T
quantizes the tensor as deploy's per-tensor symmetric INT8 does (S = T / 128, int8
codes -128..127, uint8 codes 0..255 with S = T / 256 for a tensor that is never
negative; TPU-MLIR's published scheme), onnxruntime runs the reader on it, and the SQNR
against onnxruntime's float output decides.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tpu_xdsl.calibration.table import read_table
from tpu_xdsl.calibration.threshold_search import search, search_thresholds
from tpu_xdsl.interp.runner import ModuleRunner
from tpu_xdsl.ir_io import read_module
from tpu_xdsl.tools.tpu_xdsl import main
from tpu_xdsl.weights import attach_weights, weights_of

SHAPE = [1, 3, 8, 8]


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def conv_weights() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)


def model(path: Path) -> Path:
    """x -> conv -> c -> sigmoid -> y (c is also an output, for onnxruntime)."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "searched", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "c")],
                              [numpy_helper.from_array(conv_weights(), "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def conv_only(path: Path) -> Path:
    """The conv alone: the reader of x, for onnxruntime."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(conv_weights(), "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def heavy_tailed(count: int, seed: int) -> list[np.ndarray]:
    """Gaussian inputs with a few large outliers: clipping them pays off."""
    rng = np.random.default_rng(seed)
    xs = []
    for _ in range(count):
        x = rng.standard_normal(SHAPE).astype(np.float32)
        x.flat[rng.integers(0, x.size, 2)] = rng.choice([-1, 1], 2) * 12
        xs.append(x)
    return xs


def fake_quantize(x: np.ndarray, threshold: float, never_negative: bool) -> np.ndarray:
    """S = T / 128 into int8 -128..127, or S = T / 256 into uint8 0..255; rounding half away
    from zero."""
    scale, low, high = (threshold / 256, 0, 255) if never_negative else (threshold / 128, -128, 127)
    q = np.clip(np.sign(x / scale) * np.floor(np.abs(x / scale) + 0.5), low, high)
    return (q * scale).astype(np.float32)


def sqnr(reference: list[np.ndarray], actual: list[np.ndarray]) -> float:
    signal = sum(float(np.sum(r.astype(np.float64) ** 2)) for r in reference)
    noise = sum(float(np.sum((a.astype(np.float64) - r) ** 2)) for r, a in zip(reference, actual, strict=True))
    return 10 * np.log10(signal / noise)


def top_runner(tmp_path: Path, capsys) -> ModuleRunner:
    mlir = tmp_path / "searched.mlir"
    code, _, err = cli(
        capsys, "transform", "--model-def", model(tmp_path / "searched.onnx"), "--model-name", "s", "-o", mlir
    )
    assert code == 0, err
    module = read_module(mlir)
    attach_weights(module, base_dir=tmp_path)
    return ModuleRunner(module, weights_of(module))


def test_search_picks_the_threshold_whose_reader_keeps_the_best_sqnr(tmp_path, capsys):
    runner = top_runner(tmp_path, capsys)
    xs = heavy_tailed(4, seed=1)
    session = ort.InferenceSession(str(conv_only(tmp_path / "conv.onnx")), providers=["CPUExecutionProvider"])
    float_c = [session.run(None, {"x": x})[0] for x in xs]
    low, high = min(float(x.min()) for x in xs), max(float(x.max()) for x in xs)
    c_low, c_high = min(float(c.min()) for c in float_c), max(float(c.max()) for c in float_c)
    candidates = {
        "x": {"kl": 2.5, "mse": 4.0, "max": max(-low, high), "percentile9999": 7.0},
        "c": {"kl": 3.0, "mse": 8.0, "max": max(-c_low, c_high), "percentile9999": 0.5},
    }
    ranges = {"x": (low, high), "c": (c_low, c_high)}
    found = {r.name: r for r in search_thresholds(runner, [{"x": x} for x in xs], candidates, ranges, "kl")}

    # x's reader is the conv: onnxruntime runs it on each quantized x
    scores = {m: sqnr(float_c, [session.run(None, {"x": fake_quantize(x, t, False)})[0] for x in xs])
              for m, t in candidates["x"].items()}
    best = max(scores, key=lambda m: (scores[m], m == "kl"))
    assert found["x"].chosen_method == best and found["x"].chosen == candidates["x"][best]
    assert abs(found["x"].chosen_sqnr - scores[best]) < 0.01 and abs(found["x"].default_sqnr - scores["kl"]) < 0.01
    assert len({round(v, 2) for v in scores.values()}) == 4  # the choice matters

    # c's reader is the sigmoid, 1 / (1 + e^-c)
    def sigmoid(v):
        return 1 / (1 + np.exp(-v.astype(np.float64)))

    scores = {m: sqnr([sigmoid(c) for c in float_c], [sigmoid(fake_quantize(c, t, False)) for c in float_c])
              for m, t in candidates["c"].items()}
    best = max(scores, key=lambda m: (scores[m], m == "kl"))
    assert found["c"].chosen_method == best and abs(found["c"].chosen_sqnr - scores[best]) < 0.01


def test_the_default_method_stays_unless_another_is_strictly_better(tmp_path, capsys):
    """The best threshold is also the default method's: the default keeps it; one threshold
    for all methods: nothing to search."""
    runner = top_runner(tmp_path, capsys)
    xs = heavy_tailed(2, seed=2)
    low, high = min(float(x.min()) for x in xs), max(float(x.max()) for x in xs)
    same = {"kl": 3.0, "mse": 3.0, "max": 3.0, "percentile9999": 3.0}
    tied = {"kl": 12.5, "mse": 0.5, "max": 12.5, "percentile9999": 0.5}
    found = search_thresholds(runner, [{"x": x} for x in xs], {"x": same}, {"x": (low, high)}, "kl")
    assert found == []
    (result,) = search_thresholds(runner, [{"x": x} for x in xs], {"x": tied}, {"x": (low, high)}, "max")
    assert result.chosen == result.default == 12.5 and result.chosen_method == "max"
    assert result.chosen_sqnr == result.default_sqnr


def test_calibrate_search_threshold_takes_one_of_the_four_methods_per_tensor(tmp_path, capsys):
    onnx_path = model(tmp_path / "searched.onnx")
    mlir = tmp_path / "searched.mlir"
    assert cli(capsys, "transform", "--model-def", onnx_path, "--model-name", "s", "-o", mlir)[0] == 0
    data = tmp_path / "data"
    data.mkdir()
    for i, x in enumerate(heavy_tailed(5, seed=3)):
        np.savez(data / f"s{i}.npz", x=x)
    per_method = {}
    for method in ("kl", "mse", "max", "percentile9999"):
        code, _, err = cli(capsys, "calibrate", mlir, "--dataset", data, "--method", method, "-o", tmp_path / method)
        assert code == 0, err
        per_method[method] = {r.name: r.threshold for r in read_table(tmp_path / method).rows}
    code, out, err = cli(
        capsys, "calibrate", mlir, "--dataset", data, "--search-threshold", "-o", tmp_path / "searched"
    )
    assert code == 0, err
    assert "with search-threshold" in out and "search-threshold:" in out
    table = read_table(tmp_path / "searched")
    assert table.method == "search_threshold"
    for row in table.rows:
        assert any(abs(row.threshold - t[row.name]) <= 1e-6 * t[row.name] for t in per_method.values()), row
    changed = sum(abs(r.threshold - per_method["kl"][r.name]) > 1e-6 * r.threshold for r in table.rows)
    if "kept kl" in out:  # the whole-model check preferred kl everywhere
        assert changed == 0, out
    else:
        assert f"search-threshold: {changed} of {len(table.rows)} tensors take another method than kl" in out


def test_search_threshold_and_tune_num_exclude_each_other(tmp_path, capsys):
    onnx_path = model(tmp_path / "searched.onnx")
    mlir = tmp_path / "searched.mlir"
    assert cli(capsys, "transform", "--model-def", onnx_path, "--model-name", "s", "-o", mlir)[0] == 0
    data = tmp_path / "data"
    data.mkdir()
    np.savez(data / "s0.npz", x=heavy_tailed(1, seed=4)[0])
    code, _, err = cli(capsys, "calibrate", mlir, "--dataset", data, "--search-threshold", "--tune-num", "2",
                       "-o", tmp_path / "t")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--tune-num and --search-threshold" in err
    assert not (tmp_path / "t").exists()


def test_the_whole_model_check_keeps_the_default_when_the_searched_set_is_worse(tmp_path, capsys):
    """Every tensor (x, c, y) quantized at once, the cosine of the model's outputs (y and c)
    against float, computed here with onnxruntime's conv and numpy's sigmoid, decides
    between the default thresholds and the searched ones."""
    runner = top_runner(tmp_path, capsys)
    xs = heavy_tailed(3, seed=5)
    checks = heavy_tailed(2, seed=6)
    session = ort.InferenceSession(str(conv_only(tmp_path / "conv.onnx")), providers=["CPUExecutionProvider"])

    def sigmoid(v):
        return (1 / (1 + np.exp(-v.astype(np.float64)))).astype(np.float32)

    float_c = [session.run(None, {"x": x})[0] for x in xs + checks]
    ranges = {"x": (-12.0, 12.0), "c": (min(float(c.min()) for c in float_c), max(float(c.max()) for c in float_c)),
              "y": (0.0, 1.0)}
    c_top = max(-ranges["c"][0], ranges["c"][1])
    candidates = {"x": {"kl": 12.0, "mse": 3.0, "max": 12.0, "percentile9999": 3.5},
                  "c": {"kl": c_top, "mse": c_top / 3, "max": c_top, "percentile9999": c_top / 2},
                  "y": {"kl": 1.0, "mse": 1.0, "max": 1.0, "percentile9999": 1.0}}
    outcome = search(runner, [{"x": x} for x in xs], candidates, ranges, "kl", check_samples=[{"x": x} for x in checks])

    def output_cosine(thresholds: dict[str, float]) -> float:
        found = []
        for x in checks:
            float_c = session.run(None, {"x": x})[0]
            c = fake_quantize(
                session.run(None, {"x": fake_quantize(x, thresholds["x"], False)})[0], thresholds["c"], False
            )
            y = fake_quantize(sigmoid(c), thresholds["y"], True)
            # the model's outputs, y and c, as one vector
            a = np.concatenate([sigmoid(float_c).ravel(), float_c.ravel()]).astype(np.float64)
            b = np.concatenate([y.ravel(), c.ravel()]).astype(np.float64)
            found.append(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
        return float(np.mean(found))

    searched = {n: candidates[n]["kl"] for n in candidates}
    searched.update({r.name: r.chosen for r in outcome.results})
    assert searched != {n: candidates[n]["kl"] for n in candidates}  # the search moved something
    assert abs(outcome.default_cosine - output_cosine({n: c["kl"] for n, c in candidates.items()})) < 1e-5
    assert abs(outcome.searched_cosine - output_cosine(searched)) < 1e-5
    assert outcome.kept_default == (outcome.searched_cosine < outcome.default_cosine)
    assert outcome.chosen == ({} if outcome.kept_default else {r.name: r.chosen for r in outcome.results})


@pytest.mark.parametrize("seed", [10, 11], ids=["int8-rejects", "int8-accepts"])
def test_calibrate_keeps_searched_thresholds_only_if_the_real_int8_model_is_as_close(tmp_path, capsys, seed):
    """With deploy's scheme given (--per-tensor-activations), the table written is the one
    whose INT8 model (lowered and run here) is closer to the float outputs on the samples
    after the search's, of the searched thresholds and the default method's."""
    from tpu_xdsl.transforms.import_calibration import import_calibration
    from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu

    onnx_path = model(tmp_path / "searched.onnx")
    mlir = tmp_path / "searched.mlir"
    assert cli(capsys, "transform", "--model-def", onnx_path, "--model-name", "s", "-o", mlir)[0] == 0
    data = tmp_path / "data"
    data.mkdir()
    xs = heavy_tailed(12, seed=seed)
    for i, x in enumerate(xs):
        np.savez(data / f"s{i:02d}.npz", x=x)
    assert cli(capsys, "calibrate", mlir, "--dataset", data, "-o", tmp_path / "kl")[0] == 0
    code, out, err = cli(capsys, "calibrate", mlir, "--dataset", data, "--search-threshold",
                         "--per-tensor-activations", "-o", tmp_path / "searched")
    assert code == 0, err

    def int8_cosine(table: Path) -> float:
        module = read_module(mlir)
        attach_weights(module, base_dir=tmp_path)
        import_calibration(module, read_table(table), str(table))
        lower_top_to_tpu(module, "INT8", per_tensor_activations=True)
        runner = ModuleRunner(module, weights_of(module))
        session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
        found = []
        for x in xs[8:]:
            a = np.concatenate([v.ravel() for v in session.run(None, {"x": x})]).astype(np.float64)
            b = np.concatenate([np.asarray(v).ravel() for v in runner.run({"x": x}).values()]).astype(np.float64)
            found.append(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
        return float(np.mean(found))

    searched, default = int8_cosine(tmp_path / "searched"), int8_cosine(tmp_path / "kl")
    kl = {r.name: r.threshold for r in read_table(tmp_path / "kl").rows}
    written = {r.name: r.threshold for r in read_table(tmp_path / "searched").rows}
    if seed == 10:  # the simulation let the searched set through, the real INT8 model did not
        found = re.search(r"INT8 output cosine ([0-9.]+) < ([0-9.]+) with kl everywhere; kept kl", out)
        assert found, out
        assert written == kl
    else:
        found = re.search(r"([0-9.]+) -> ([0-9.]+) \(INT8\)", out)
        assert found, out
        assert written != kl and searched >= default
        assert abs(float(found[1]) - default) < 1e-5 and abs(float(found[2]) - searched) < 1e-5
