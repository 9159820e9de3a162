"""Graphs as other exporters write them (jax2tf, tf2onnx), through transform and F16 deploy
to the device: a one-hot made of Cast(Equal(x, range)) and a mean written as
ReduceSum times 1/n whose sum alone leaves F16's range (magika's layer norm)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.test_cli_transform import tpu_xdsl
from tpu_xdsl.interp.compare import Tolerance, compare_tensors

VOCAB, LENGTH, WIDTH = 17, 64, 8


def jax2tf_like(path):
    """bytes (int32) -> one-hot over VOCAB -> embedding -> x * x summed over the
    sequence and scaled by 1/LENGTH -> output; the sum of squares is ~1e5."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(np.array([2], np.int64), "axis2"),
        numpy_helper.from_array(np.arange(VOCAB, dtype=np.float32).reshape(1, 1, VOCAB), "range"),
        numpy_helper.from_array((40 + 5 * rng.standard_normal((VOCAB, WIDTH))).astype(np.float32), "embed"),
        numpy_helper.from_array(np.array([1], np.int64), "axis1"),
        numpy_helper.from_array(np.float32(1.0 / LENGTH), "inv_n"),
    ]
    nodes = [
        helper.make_node("Unsqueeze", ["bytes", "axis2"], ["bytes3"]),
        helper.make_node("Cast", ["bytes3"], ["bytes_f"], to=TensorProto.FLOAT),
        helper.make_node("Equal", ["bytes_f", "range"], ["eq"]),
        helper.make_node("Cast", ["eq"], ["one_hot"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["one_hot", "embed"], ["emb"]),
        helper.make_node("Mul", ["emb", "emb"], ["square"]),
        helper.make_node("ReduceSum", ["square", "axis1"], ["sum_sq"], keepdims=0),
        helper.make_node("Mul", ["sum_sq", "inv_n"], ["mean_sq"]),
        helper.make_node("Sqrt", ["mean_sq"], ["rms"]),
    ]
    graph = helper.make_graph(
        nodes, "jax2tf_like",
        [helper.make_tensor_value_info("bytes", TensorProto.INT32, [1, LENGTH])],
        [helper.make_tensor_value_info("rms", TensorProto.FLOAT, [1, WIDTH])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def test_one_hot_and_scaled_sum_deploy_in_f16(tmp_path):
    model = jax2tf_like(tmp_path / "m.onnx")
    feeds = {"bytes": np.random.default_rng(1).integers(0, VOCAB, (1, LENGTH)).astype(np.int32)}
    np.savez(tmp_path / "x.npz", **feeds)
    (expected,) = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, feeds)
    r = tpu_xdsl("transform", "--model-def", str(model), "--model-name", "m",
                 "--test-input", str(tmp_path / "x.npz"), "--test-result", str(tmp_path / "top.npz"),
                 "-o", str(tmp_path / "m.mlir"))
    assert r.returncode == 0, r.stderr
    top = (tmp_path / "m.mlir").read_text()
    assert 'mode = "mean"' in top and "xi1>" not in top, top
    r = tpu_xdsl("deploy", str(tmp_path / "m.mlir"), "--quantize", "F16",
                 "--test-input", str(tmp_path / "x.npz"), "--test-reference", str(tmp_path / "top.npz"),
                 "-o", str(tmp_path / "m_f16.tpumodel"))
    assert r.returncode == 0, r.stdout + r.stderr
    r = tpu_xdsl("run", str(tmp_path / "m_f16.tpumodel"), "--input", str(tmp_path / "x.npz"),
                 "--output", str(tmp_path / "out.npz"))
    assert r.returncode == 0, r.stderr
    (actual,) = np.load(tmp_path / "out.npz").values()
    assert np.all(np.isfinite(actual))
    assert compare_tensors("rms", expected, actual).cosine >= 0.999


def test_overflow_is_a_failed_comparison_not_a_crash():
    reference = np.array([1.0, 2.0, 3.0], np.float32)
    row = compare_tensors("t", reference, np.array([1.0, np.inf, 3.0], np.float16))
    assert row.problem == "non-finite values: 1 (inf/nan) vs 0 in the reference"
    assert not row.passes(Tolerance(0.0, -1.0))
    same = compare_tensors("t", np.array([np.inf, 1.0]), np.array([np.inf, 1.0]))
    assert same.problem is None and same.cosine == 1.0
    # An attention mask's -inf in the same places, the finite values close but not equal: compared on
    # the finite values (by hand: cosine of [1, 2] and [1, 2.001]).
    masked = compare_tensors("t", np.array([1.0, -np.inf, 2.0]), np.array([1.0, -np.inf, 2.001]))
    assert masked.problem is None and masked.passes(Tolerance(0.99, 0.99))
    assert masked.cosine == pytest.approx((1 + 2 * 2.001) / (np.sqrt(5) * np.hypot(1, 2.001)), rel=1e-12)
    for other in ([1.0, np.inf, 2.0], [-np.inf, 1.0, 2.0], [1.0, np.nan, 2.0]):  # another sign, place, or a NaN
        assert compare_tensors("t", np.array([1.0, -np.inf, 2.0]), np.array(other)).problem is not None


def test_int64_token_ids_and_a_bool_mask_reach_the_device(tmp_path):
    """Token ids (int64) into an embedding, and a bool padding mask, as torch exports a text
    model's inputs: the TPU holds them as int32 and int8, a run takes the int64 and bool data
    the ONNX model takes (the device's output equals onnxruntime's), and ids beyond int32 are
    a one-line error that writes nothing."""
    rng = np.random.default_rng(1)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["embed", "ids"], ["e"], axis=0),
         helper.make_node("Where", ["keep", "e", "zero"], ["y"])],
        "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 7]),
         helper.make_tensor_value_info("keep", TensorProto.BOOL, [1, 7, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 7, 16])],
        initializer=[numpy_helper.from_array(rng.standard_normal((50, 16)).astype(np.float32), "embed"),
                     numpy_helper.from_array(np.float32(0.0), "zero")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.save(model, tmp_path / "m.onnx")
    feeds = {"ids": np.array([[1, 4, 9, 49, 0, 3, 3]], np.int64),
             "keep": np.array([[True] * 5 + [False] * 2], bool)[..., None]}
    np.savez(tmp_path / "x.npz", **feeds)
    assert tpu_xdsl("transform", "--model-def", str(tmp_path / "m.onnx"), "--model-name", "m", "--test-input",
                    str(tmp_path / "x.npz"), "--test-result", str(tmp_path / "top.npz"),
                    "-o", str(tmp_path / "m.mlir")).returncode == 0
    r = tpu_xdsl("deploy", str(tmp_path / "m.mlir"), "--quantize", "F32", "--test-input", str(tmp_path / "x.npz"),
                 "--test-reference", str(tmp_path / "top.npz"), "-o", str(tmp_path / "m_f32.tpumodel"))
    assert r.returncode == 0, r.stdout + r.stderr
    r = tpu_xdsl("run", str(tmp_path / "m_f32.tpumodel"), "--input", str(tmp_path / "x.npz"),
                 "--output", str(tmp_path / "out.npz"))
    assert r.returncode == 0, r.stderr
    (expected,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["y"], expected)
    np.savez(tmp_path / "big.npz", ids=np.array([[1, 4, 9, 2**40, 0, 3, 3]], np.int64), keep=feeds["keep"])
    r = tpu_xdsl("run", str(tmp_path / "m_f32.tpumodel"), "--input", str(tmp_path / "big.npz"),
                 "--output", str(tmp_path / "big_out.npz"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "beyond int32" in r.stderr, r.stderr
    assert not (tmp_path / "big_out.npz").exists()


def test_an_int64_constant_beyond_int32_is_refused_by_name():
    """TPU ops hold int64 as int32: an integer constant that does not fit is a lowering error
    naming it, not wrapped (the importer computes integer math in f32, so a TOP module
    written by hand holds one)."""
    from tpu_xdsl.ir_io import parse_module
    from tpu_xdsl.transforms.lower_top_to_tpu import LoweringError, lower_top_to_tpu
    from tpu_xdsl.weights import attach_weights

    module = parse_module(
        'builtin.module attributes {module.name = "m", module.state = "TOP_F32"} {\n'
        "  func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x4xf32> {\n"
        '    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x4xf32>) -> tensor<1x4xf32>\n'
        '    %w = "top.weight"() {names = ["far"]} : () -> tensor<1xi64>\n'
        '    %f = "top.cast"(%w) {names = ["f"]} : (tensor<1xi64>) -> tensor<1xf32>\n'
        '    %y = "top.add"(%x, %f) {names = ["y"]} : (tensor<1x4xf32>, tensor<1xf32>) -> tensor<1x4xf32>\n'
        "    func.return %y : tensor<1x4xf32>\n"
        "  }\n"
        "}\n"
    )
    attach_weights(module, {"far": np.array([2**40], np.int64)})
    with pytest.raises(LoweringError, match="constant 'far' holds values beyond int32"):
        lower_top_to_tpu(module, "F32")


@pytest.mark.parametrize("mode", ["BF16", "F32"])
def test_a_constant_output_survives_the_coefficient_layout(mode, tmp_path):
    """A model that returns an initializer beside a computed output: with layer groups the
    coefficients are laid out again around the groups' weight images, and the returned
    weight, read by no instruction, was dropped (the device returned zeros in BF16)."""
    rng = np.random.default_rng(2)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8]),
         helper.make_tensor_value_info("k", TensorProto.FLOAT, [2, 3])],
        initializer=[numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
                     numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
                     numpy_helper.from_array(np.arange(1, 7, dtype=np.float32).reshape(2, 3), "k")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), tmp_path / "m.onnx")
    np.savez(tmp_path / "x.npz", x=rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    assert tpu_xdsl("transform", "--model-def", str(tmp_path / "m.onnx"), "--model-name", "m", "--test-input",
                    str(tmp_path / "x.npz"), "--test-result", str(tmp_path / "top.npz"),
                    "-o", str(tmp_path / "m.mlir")).returncode == 0
    r = tpu_xdsl("deploy", str(tmp_path / "m.mlir"), "--quantize", mode, "--test-input", str(tmp_path / "x.npz"),
                 "--test-reference", str(tmp_path / "top.npz"), "-o", str(tmp_path / "m_dev.tpumodel"))
    assert r.returncode == 0, r.stdout + r.stderr
    r = tpu_xdsl("run", str(tmp_path / "m_dev.tpumodel"), "--input", str(tmp_path / "x.npz"),
                 "--output", str(tmp_path / "out.npz"))
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["k"], np.arange(1, 7).reshape(2, 3))


@pytest.mark.parametrize("mode", ["F32", "BF16"])
def test_a_float16_model_keeps_its_output_name_and_type(mode, tmp_path):
    """A float16 model (torch's model.half()): the TOP module computes in f32 and casts back
    at the output; that cast, not the f32 value, takes the output's name, so every stage's
    results hold `y` (they held `y_float16`), and a compiled model returns it in float16 as
    onnxruntime does. (BF16's input cast from f16 exports to TOSA through f32.)"""
    rng = np.random.default_rng(3)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 4, 8])],
        initializer=[numpy_helper.from_array((rng.standard_normal((16, 8)) * 0.3).astype(np.float16), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.save(model, tmp_path / "m.onnx")
    x = rng.standard_normal((1, 4, 16)).astype(np.float16)
    np.savez(tmp_path / "x.npz", x=x)
    assert tpu_xdsl("transform", "--model-def", str(tmp_path / "m.onnx"), "--model-name", "m", "--test-input",
                    str(tmp_path / "x.npz"), "--test-result", str(tmp_path / "top.npz"),
                    "-o", str(tmp_path / "m.mlir")).returncode == 0
    assert "y" in np.load(tmp_path / "top.npz").files
    r = tpu_xdsl("deploy", str(tmp_path / "m.mlir"), "--quantize", mode, "--test-input", str(tmp_path / "x.npz"),
                 "--test-reference", str(tmp_path / "top.npz"), "--export-tosa", "-o", str(tmp_path / "m_dev.mlir"))
    assert r.returncode == 0, r.stdout + r.stderr
    r = tpu_xdsl("deploy", str(tmp_path / "m.mlir"), "--quantize", mode, "--test-input", str(tmp_path / "x.npz"),
                 "--test-reference", str(tmp_path / "top.npz"), "-o", str(tmp_path / "m_dev.tpumodel"))
    assert r.returncode == 0, r.stdout + r.stderr
    r = tpu_xdsl("run", str(tmp_path / "m_dev.tpumodel"), "--input", str(tmp_path / "x.npz"),
                 "--output", str(tmp_path / "out.npz"))
    assert r.returncode == 0, r.stderr
    out = np.load(tmp_path / "out.npz")
    assert out.files == ["y"] and out["y"].dtype == np.float16
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"x": x})
    assert compare_tensors("y", expected, out["y"]).cosine >= 0.999
