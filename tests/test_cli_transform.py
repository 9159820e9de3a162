"""`tpu-xdsl transform` and `run` as a user meets them: outputs, comparison table, errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def tpu_xdsl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
    )


def small_cnn(path: Path, opset: int = 13, dynamic_batch: bool = True, extra_node=None) -> Path:
    """A conv -> relu -> flatten -> matmul -> softmax model with a dynamic batch dim."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["image", "w"], ["conv"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("Flatten", ["relu"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "fc"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["prob"], axis=-1),
    ]
    if extra_node is not None:
        nodes.append(extra_node)
    batch = "N" if dynamic_batch else 1
    graph = helper.make_graph(
        nodes,
        "small_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
            numpy_helper.from_array(rng.standard_normal((4 * 8 * 8, 5)).astype(np.float32), "fc"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.save(model, path)
    return path


def assert_user_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_transform_writes_module_weights_and_compares(tmp_path):
    model = small_cnn(tmp_path / "m.onnx")
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "x.npz", image=x)
    result = tpu_xdsl(
        "transform", "--model-def", str(model), "--model-name", "small", "--input-shapes", "[[1,3,8,8]]",
        "--test-input", str(tmp_path / "x.npz"), "--test-result", str(tmp_path / "small_top.npz"),
        "-o", str(tmp_path / "small.mlir"),
    )
    assert result.returncode == 0, result.stderr
    assert "onnxruntime (reference) vs TOP interpreter" in result.stdout
    # conv + relu fuse into one op that keeps the relu's name.
    for name in ("relu", "logits", "prob"):
        assert any(line.startswith(name + " ") for line in result.stdout.splitlines()), name
    assert "all pass" in result.stdout
    text = (tmp_path / "small.mlir").read_text()
    assert 'module.name = "small"' in text and 'module.weight_file = "small_weights.npz"' in text
    assert "top.conv" in text and "module.preprocess" in text
    with np.load(tmp_path / "small_weights.npz") as weights:
        assert set(weights.files) == {"w", "fc"}
    with np.load(tmp_path / "small_top.npz") as dumped:
        assert {"relu", "logits", "prob"} <= set(dumped.files)
    # `run` on the written module reproduces onnxruntime's output.
    import onnxruntime as ort

    run = tpu_xdsl("run", str(tmp_path / "small.mlir"), "--input", str(tmp_path / "x.npz"), "--output", str(tmp_path / "y.npz"))
    assert run.returncode == 0, run.stderr
    expected = ort.InferenceSession(str(model)).run(None, {"image": x})[0]
    with np.load(tmp_path / "y.npz") as y:
        np.testing.assert_allclose(y["prob"], expected, rtol=1e-5, atol=1e-6)


def test_transform_fails_below_tolerance(tmp_path):
    model = small_cnn(tmp_path / "m.onnx")
    np.savez(tmp_path / "x.npz", image=np.ones((1, 3, 8, 8), np.float32))
    result = tpu_xdsl(
        "transform", "--model-def", str(model), "--model-name", "small", "--input-shapes", "[[1,3,8,8]]",
        "--test-input", str(tmp_path / "x.npz"), "--tolerance", "1.0,1.0", "-o", str(tmp_path / "s.mlir"),
    )
    # Float results differ in the last bits from onnxruntime: a tolerance of exactly 1 fails.
    assert result.returncode == 1, result.stdout + result.stderr
    assert "below tolerance, first:" in result.stdout


def _no_outputs(tmp_path: Path) -> None:
    assert not list(tmp_path.glob("out*")), list(tmp_path.glob("out*"))


@pytest.mark.parametrize(
    ("make", "args", "fragments"),
    [
        (lambda p: p.write_text("not a model"), [], ["not an ONNX model", "pass a .onnx file"]),
        (lambda p: p.write_bytes(small_cnn(p).read_bytes()[:200]), [], ["m.onnx"]),
        (lambda p: small_cnn(p), [], ["input 'image' dim 0 ('N') is dynamic", "--input-shapes"]),
        (lambda p: small_cnn(p), ["--input-shapes", "[[1,3,8,8],[1,2]]"], ["gives 2 shape(s)", "1 input(s): image"]),
        (lambda p: small_cnn(p), ["--input-shapes", "[[1,3,8]]"], ["rank 3", "rank 4"]),
        (lambda p: small_cnn(p), ["--input-shapes", "1,3"], ["--input-shapes"]),
        (
            lambda p: small_cnn(p, extra_node=helper.make_node("Det", ["prob"], ["det"])),
            ["--input-shapes", "[[1,3,8,8]]"],
            ["Det", "opset 13", "no import rule"],
        ),
        (lambda p: small_cnn(p), ["--input-shapes", "[[1,3,8,8]]", "--tolerance", "high"], ["--tolerance"]),
        (lambda p: small_cnn(p), ["--input-shapes", "[[1,3,8,8]]", "--pixel-format", "cmyk"], ["--pixel-format", "rgb, bgr, gray"]),
    ],
)
def test_bad_model_or_flags(tmp_path, make, args, fragments):
    model = tmp_path / "m.onnx"
    make(model)
    result = tpu_xdsl("transform", "--model-def", str(model), "--model-name", "m", *args, "-o", str(tmp_path / "out.mlir"))
    assert_user_error(result, *fragments)
    _no_outputs(tmp_path)


def test_bad_test_inputs(tmp_path):
    model = small_cnn(tmp_path / "m.onnx")
    base = ["transform", "--model-def", str(model), "--model-name", "m", "--input-shapes", "[[1,3,8,8]]", "-o", str(tmp_path / "out.mlir")]
    np.savez(tmp_path / "wrong_shape.npz", image=np.zeros((1, 3, 4, 4), np.float32))
    assert_user_error(tpu_xdsl(*base, "--test-input", str(tmp_path / "wrong_shape.npz")), "input 'image' has shape [1, 3, 4, 4]", "[1, 3, 8, 8]")
    np.savez(tmp_path / "wrong_dtype.npz", image=np.zeros((1, 3, 8, 8), np.int32))
    assert_user_error(tpu_xdsl(*base, "--test-input", str(tmp_path / "wrong_dtype.npz")), "dtype int32", "float32")
    np.savez(tmp_path / "wrong_name.npz", other=np.zeros((1, 3, 8, 8), np.float32), more=np.zeros(1))
    assert_user_error(tpu_xdsl(*base, "--test-input", str(tmp_path / "wrong_name.npz")), "missing input(s) image")
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    assert_user_error(tpu_xdsl(*base, "--test-input", str(tmp_path / "broken.jpg")), "broken.jpg", "cannot decode image")
    _no_outputs(tmp_path)


def test_image_input_goes_through_preprocessing(tmp_path):
    from PIL import Image

    model = small_cnn(tmp_path / "m.onnx")
    pixels = (np.arange(10 * 12 * 3) % 251).astype(np.uint8).reshape(10, 12, 3)
    Image.fromarray(pixels).save(tmp_path / "img.png")
    result = tpu_xdsl(
        "transform", "--model-def", str(model), "--model-name", "m", "--input-shapes", "[[1,3,8,8]]",
        "--mean", "10,20,30", "--scale", "0.5,0.25,2", "--pixel-format", "rgb", "--resize-dims", "10,12",
        "--test-input", str(tmp_path / "img.png"), "--test-result", str(tmp_path / "top.npz"), "-o", str(tmp_path / "m.mlir"),
    )
    assert result.returncode == 0, result.stderr
    # resize to 10x12 is the identity here; the center crop takes rows 1..9, cols 2..10.
    crop = pixels[1:9, 2:10].astype(np.float32)
    expected = ((crop - [10, 20, 30]) * [0.5, 0.25, 2]).transpose(2, 0, 1)[None]
    with np.load(tmp_path / "top.npz") as dumped:
        np.testing.assert_allclose(dumped["image"], expected, rtol=1e-6)


def test_model_with_external_data_imports(tmp_path):
    """Weights stored beside the model (ONNX external data) are read from there."""
    from tpu_xdsl.frontend.onnx_importer import import_onnx

    model = onnx.load(str(small_cnn(tmp_path / "inline.onnx")))
    onnx.save_model(
        model, str(tmp_path / "external.onnx"), save_as_external_data=True,
        all_tensors_to_one_file=True, location="external.bin", size_threshold=0,
    )
    assert (tmp_path / "external.bin").stat().st_size > 0
    result = import_onnx(tmp_path / "external.onnx", input_shapes=[[1, 3, 8, 8]])
    # save_model moved the in-memory tensors out too: read the inline file again.
    inline = numpy_helper.to_array(onnx.load(str(tmp_path / "inline.onnx")).graph.initializer[1])
    np.testing.assert_array_equal(result.weights["fc"], inline)
    (tmp_path / "external.bin").unlink()
    missing = tpu_xdsl("transform", "--model-def", str(tmp_path / "external.onnx"), "--model-name", "m",
                       "--input-shapes", "[[1,3,8,8]]", "-o", str(tmp_path / "out.mlir"))
    assert_user_error(missing, "external data missing")
