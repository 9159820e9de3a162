"""Float lowering (F32/F16/BF16) and `tpu-xdsl deploy` against TOP results."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from xdsl.context import Context

from tests.test_cli_transform import assert_user_error, small_cnn, tpu_xdsl
from tpu_xdsl.interp.runner import ModuleRunner
from tpu_xdsl.ir_io import parse_module
from tpu_xdsl.kernels import ResultSpec
from tpu_xdsl.transforms.lower_top_to_tpu import LowerTopToTpuPass
from tpu_xdsl.weights import attach_weights, weights_of

MODULE = """
builtin.module attributes {module.name = "m", module.state = "TOP_F32"} {
  func.func @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %w = "top.weight"() {names = ["w"]} : () -> tensor<2x3xf32>
    %y = "top.mul"(%x, %w) {names = ["y"]} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    func.return %y : tensor<2x3xf32>
  }
}
"""


@pytest.mark.parametrize(("mode", "dtype"), [("F16", np.float16), ("BF16", ml_dtypes.bfloat16)])
def test_low_float_modes_round_every_store(mode, dtype):
    """TPU results equal the product of the rounded operands, rounded to the storage type."""
    x = np.array([[1.0009765625, 3.14159, -2.5], [1e-3, 1000.1, 7.0]], np.float32)
    w = np.array([[1.0, 0.333333, 1.5], [2.0, 3.0, -0.1]], np.float32)
    module = parse_module(MODULE)
    attach_weights(module, {"w": w})
    LowerTopToTpuPass(mode=mode).apply(Context(), module)
    out = ModuleRunner(module, weights_of(module)).run({"x": x})["y"]
    xr, wr = x.astype(dtype).astype(np.float32), w.astype(dtype).astype(np.float32)
    expected = (xr * wr).astype(dtype).astype(np.float32)
    np.testing.assert_array_equal(out, expected)
    assert not np.array_equal(out, x * w), "rounding must be visible"


def test_tpu_cast_rounds_to_nearest_even():
    from tpu_xdsl.kernels.tpu import _cast

    x = np.array([1.0 + 2**-11, 1.0 + 3 * 2**-11], np.float32)  # halfway cases for f16
    (y,) = _cast([x], {}, [ResultSpec((2,), np.dtype(np.float16))])
    np.testing.assert_array_equal(y.astype(np.float32), [1.0, 1.0 + 2 * 2**-10])


def test_deploy_f16_bf16_pass_and_chip_rejects_f16(tmp_path):
    model = small_cnn(tmp_path / "m.onnx")
    np.savez(tmp_path / "x.npz", image=np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32))
    r = tpu_xdsl("transform", "--model-def", str(model), "--model-name", "m", "--input-shapes", "[[1,3,8,8]]",
                 "--test-input", str(tmp_path / "x.npz"), "--test-result", str(tmp_path / "top.npz"),
                 "-o", str(tmp_path / "m.mlir"))
    assert r.returncode == 0, r.stderr
    for mode, chip in (("F32", "bm1684x"), ("F16", "bm1684x"), ("BF16", "bm1684x"), ("BF16", "cv183x")):
        out = tmp_path / f"m_{mode}_{chip}.mlir"
        r = tpu_xdsl(
            "deploy",
            str(tmp_path / "m.mlir"),
            "--quantize",
            mode,
            "--chip",
            chip,
            "--test-input",
            str(tmp_path / "x.npz"),
            "--test-reference",
            str(tmp_path / "top.npz"),
            "-o",
            str(out),
        )
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"TOP (reference) vs TPU interpreter {mode}" in r.stdout and "all pass" in r.stdout
        assert f'module.mode = "{mode}"' in out.read_text()
        # The written module runs again from its files (bf16 weights come back from the .npz
        # as raw 2-byte records) and gives what deploy compared.
        r = tpu_xdsl("run", str(out), "--input", str(tmp_path / "x.npz"), "--output", str(tmp_path / "y.npz"))
        assert r.returncode == 0, r.stderr
        with np.load(tmp_path / "top.npz") as top, np.load(tmp_path / "y.npz") as y:
            (name,) = y.files
            cosine = float(np.dot(top["prob"].ravel(), y[name].ravel())
                           / np.linalg.norm(top["prob"]) / np.linalg.norm(y[name]))
            assert name == "prob" and cosine > 0.999, (name, cosine)
    assert_user_error(
        tpu_xdsl(
            "deploy", str(tmp_path / "m.mlir"), "--quantize", "F16", "--chip", "cv183x", "-o", str(tmp_path / "no.mlir")
        ),
        "chip cv183x has no F16 mode",
        "BF16, INT8",
    )
    assert_user_error(
        tpu_xdsl("deploy", str(tmp_path / "m.mlir"), "--quantize", "F8", "-o", str(tmp_path / "no.mlir")),
        "--quantize F8", "F32, F16, BF16 or INT8",
    )
    assert_user_error(
        tpu_xdsl(
            "deploy", str(tmp_path / "m.mlir"), "--quantize", "F16", "--chip", "nochip", "-o", str(tmp_path / "no.mlir")
        ),
        "unknown chip 'nochip'",
    )
    assert not list(tmp_path.glob("no*"))


def test_deploy_fails_below_tolerance_naming_the_first_tensor(tmp_path):
    model = small_cnn(tmp_path / "m.onnx")
    np.savez(tmp_path / "x.npz", image=np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32))
    assert tpu_xdsl("transform", "--model-def", str(model), "--model-name", "m", "--input-shapes", "[[1,3,8,8]]",
                    "--test-input", str(tmp_path / "x.npz"), "--test-result", str(tmp_path / "top.npz"),
                    "-o", str(tmp_path / "m.mlir")).returncode == 0
    r = tpu_xdsl(
        "deploy",
        str(tmp_path / "m.mlir"),
        "--quantize",
        "BF16",
        "--tolerance",
        "0.9999999,0.9999",
        "--test-input",
        str(tmp_path / "x.npz"),
        "--test-reference",
        str(tmp_path / "top.npz"),
        "-o",
        str(tmp_path / "b.mlir"),
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "below tolerance, first: relu" in r.stdout
    (hint,) = [line for line in r.stdout.splitlines() if line.startswith("hint: ")]
    # The search aims at the tolerance's cosine: at its default, 0.99, it would float nothing in this model.
    assert (f"tpu-xdsl search-qtable {tmp_path / 'm.mlir'} --mode BF16 --target-cosine 0.9999999 --dataset DIR "
            "--input-num 24 "
            f"--hardest-of 100 --chip bm1684x -o {tmp_path / 'm_qtable'} (DIR: samples like --test-input, the "
            "search runs on the 24 of the first 100 where BF16 does worst)") in hint, hint


@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_a_constant_beyond_the_storage_range_saturates(mode):
    """The dynamo exporter's causal attention mask holds -FLT_MAX, beyond f16's and bf16's
    largest number: stored as that largest finite number, not -inf, the masked scores stay
    finite (bf16 compares with the f32 model) and a row masked whole gives a uniform softmax,
    as onnxruntime does, not NaN."""
    import onnxruntime
    from onnx import helper

    from tests.test_codegen import float_lowered
    from tests.test_int8 import init, model_of
    from tpu_xdsl.interp.runner import TensorCapture, real_values

    lowest = float(np.finfo(np.float32).min)
    mask = np.triu(np.full((4, 4), lowest, np.float32), 1)
    mask[0, 0] = lowest  # row 0 masked whole
    model = model_of([helper.make_node("Add", ["x", "mask"], ["masked"]),
                      helper.make_node("Softmax", ["masked"], ["y"], axis=-1)],
                     [("x", [1, 4, 4])], "y", [init("mask", mask)])
    tpu, feeds = float_lowered(model, mode, "bm1684x")
    capture = TensorCapture()
    outputs = real_values(tpu, ModuleRunner(tpu, weights_of(tpu)).run(feeds, [capture]))
    stored = {name: value for name, value in capture.tensors.items() if name.startswith("masked")}
    largest = float(ml_dtypes.finfo(mode.lower().replace("f16", "float16").replace("bf16", "bfloat16")).max)
    assert stored and all(np.isfinite(np.asarray(v, np.float32)).all() for v in stored.values())
    assert all(np.asarray(v, np.float32).min() == -largest for v in stored.values())
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, feeds)
    np.testing.assert_allclose(expected[0, 0], 0.25)
    np.testing.assert_allclose(np.asarray(outputs["y"], np.float32), expected, atol=1e-2)
