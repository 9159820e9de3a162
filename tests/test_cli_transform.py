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
        check=False,
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


def _input_shape_changed(path: Path, dims: list | None) -> Path:
    """small_cnn with its input's shape replaced: `dims` (names for dynamic ones), or none at all."""
    small_cnn(path)
    model = onnx.load(path)
    tensor_type = model.graph.input[0].type.tensor_type
    tensor_type.ClearField("shape")
    if dims is not None:
        for d in dims:
            dim = tensor_type.shape.dim.add()
            if isinstance(d, str):
                dim.dim_param = d
            else:
                dim.dim_value = d
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

    run = tpu_xdsl(
        "run", str(tmp_path / "small.mlir"), "--input", str(tmp_path / "x.npz"), "--output", str(tmp_path / "y.npz")
    )
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
        (lambda p: _input_shape_changed(p, ["N", 3, "H", "W"]), [],
         ["input 'image' dims 0 ('N'), 2 ('H'), 3 ('W') are dynamic", "--input-shapes"]),
        (lambda p: _input_shape_changed(p, None), [], ["input 'image' has no shape in the model", "--input-shapes"]),
        (lambda p: small_cnn(p), ["--input-shapes", "[[1,3,8,8],[1,2]]"], ["gives 2 shape(s)", "1 input(s): image"]),
        (lambda p: small_cnn(p), ["--input-shapes", "[[1,3,8]]"], ["rank 3", "rank 4"]),
        (lambda p: small_cnn(p), ["--input-shapes", "1,3"], ["--input-shapes"]),
        (
            lambda p: small_cnn(p, extra_node=helper.make_node("Det", ["prob"], ["det"])),
            ["--input-shapes", "[[1,3,8,8]]"],
            ["Det", "opset 13", "no import rule"],
        ),
        (lambda p: small_cnn(p), ["--input-shapes", "[[1,3,8,8]]", "--tolerance", "high"], ["--tolerance"]),
        (
            lambda p: small_cnn(p),
            ["--input-shapes", "[[1,3,8,8]]", "--pixel-format", "cmyk"],
            ["--pixel-format", "rgb, bgr, gray"],
        ),
    ],
)
def test_bad_model_or_flags(tmp_path, make, args, fragments):
    model = tmp_path / "m.onnx"
    make(model)
    result = tpu_xdsl(
        "transform", "--model-def", str(model), "--model-name", "m", *args, "-o", str(tmp_path / "out.mlir")
    )
    assert_user_error(result, *fragments)
    _no_outputs(tmp_path)


def test_bad_test_inputs(tmp_path):
    model = small_cnn(tmp_path / "m.onnx")
    base = [
        "transform",
        "--model-def",
        str(model),
        "--model-name",
        "m",
        "--input-shapes",
        "[[1,3,8,8]]",
        "-o",
        str(tmp_path / "out.mlir"),
    ]
    np.savez(tmp_path / "wrong_shape.npz", image=np.zeros((1, 3, 4, 4), np.float32))
    assert_user_error(tpu_xdsl(*base, "--test-input", str(tmp_path / "wrong_shape.npz")),
                      "input 'image' has shape [1, 3, 4, 4]", "[1, 3, 8, 8]")
    np.savez(tmp_path / "wrong_dtype.npz", image=np.zeros((1, 3, 8, 8), np.int32))
    assert_user_error(tpu_xdsl(*base, "--test-input", str(tmp_path / "wrong_dtype.npz")), "dtype int32", "float32")
    np.savez(tmp_path / "wrong_name.npz", other=np.zeros((1, 3, 8, 8), np.float32), more=np.zeros(1))
    assert_user_error(tpu_xdsl(*base, "--test-input", str(tmp_path / "wrong_name.npz")), "missing input(s) image")
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    assert_user_error(
        tpu_xdsl(*base, "--test-input", str(tmp_path / "broken.jpg")), "broken.jpg", "cannot decode image"
    )
    _no_outputs(tmp_path)


def test_image_input_goes_through_preprocessing(tmp_path):
    from PIL import Image

    model = small_cnn(tmp_path / "m.onnx")
    pixels = (np.arange(10 * 12 * 3) % 251).astype(np.uint8).reshape(10, 12, 3)
    Image.fromarray(pixels).save(tmp_path / "img.png")
    result = tpu_xdsl(
        "transform",
        "--model-def",
        str(model),
        "--model-name",
        "m",
        "--input-shapes",
        "[[1,3,8,8]]",
        "--mean",
        "10,20,30",
        "--scale",
        "0.5,0.25,2",
        "--pixel-format",
        "rgb",
        "--resize-dims",
        "10,12",
        "--test-input",
        str(tmp_path / "img.png"),
        "--test-result",
        str(tmp_path / "top.npz"),
        "-o",
        str(tmp_path / "m.mlir"),
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


def rate_switch(path: Path) -> Path:
    """y = If(sr == 16000, x @ w (a [1,4] result), x * 0.5 (a [1,8] result)): a branch
    picked by a sample-rate input, whose branches cannot be selected at run time."""
    w = np.random.default_rng(2).standard_normal((8, 4)).astype(np.float32)
    then_branch = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["then_y"])], "then", [],
        [helper.make_tensor_value_info("then_y", TensorProto.FLOAT, None)], [numpy_helper.from_array(w, "w")],
    )
    half = helper.make_node("Constant", [], ["half"], value=numpy_helper.from_array(np.array(0.5, np.float32)))
    else_branch = helper.make_graph(
        [half, helper.make_node("Mul", ["x", "half"], ["else_y"])], "else", [],
        [helper.make_tensor_value_info("else_y", TensorProto.FLOAT, None)],
    )
    rate = helper.make_node("Constant", [], ["rate"], value=numpy_helper.from_array(np.array(16000, np.int64)))
    nodes = [
        rate,
        helper.make_node("Equal", ["sr", "rate"], ["is16k"]),
        helper.make_node("If", ["is16k"], ["y"], then_branch=then_branch, else_branch=else_branch, name="rate_if"),
    ]
    graph = helper.make_graph(
        nodes,
        "rate_switch",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8]),
            helper.make_tensor_value_info("sr", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=8), path)
    return path


@pytest.mark.parametrize("flag", [["--constant-inputs", "sr=16000"], []])
def test_transform_binds_branch_inputs_with_a_note(tmp_path, flag):
    """--constant-inputs binds sr; without it, the test input's sr is used, since sr only
    picks a branch. Either way the note says so and TOP matches onnxruntime."""
    model = rate_switch(tmp_path / "vad.onnx")
    np.savez(
        tmp_path / "in.npz", x=np.random.default_rng(3).standard_normal((1, 8)).astype(np.float32), sr=np.array(16000)
    )
    result = tpu_xdsl(
        "transform", "--model-def", str(model), "--model-name", "vad", "--input-shapes", "[[1,8],[]]", *flag,
        "--test-input", str(tmp_path / "in.npz"), "-o", str(tmp_path / "vad.mlir"),
    )
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stdout.splitlines() if line.startswith("note: ")]
    if flag:
        assert notes == ["note: input 'sr' is the constant 16000 (--constant-inputs); the TOP module has no input 'sr'"]
    else:
        assert len(notes) == 1 and "input 'sr' only steers shapes or branches" in notes[0], notes
        assert "the test input's value 16000" in notes[0]
    assert any(line.startswith("y ") for line in result.stdout.splitlines())
    assert "all pass" in result.stdout
    text = (tmp_path / "vad.mlir").read_text()
    assert 'names = ["sr"]' not in text and "tensor<1x4xf32>" in text


def test_transform_without_the_branch_input_bound_is_one_line(tmp_path):
    model = rate_switch(tmp_path / "vad.onnx")
    result = tpu_xdsl("transform", "--model-def", str(model), "--model-name", "vad", "--input-shapes", "[[1,8],[]]",
                      "-o", str(tmp_path / "out.mlir"))
    assert_user_error(result, "node 'rate_if' (If, opset 16)", "run-time input(s) 'sr'", "--constant-inputs")
    _no_outputs(tmp_path)


@pytest.mark.parametrize(
    ("value", "fragments"),
    [
        ("rate=16000", ["'rate', which is not an input of the model (inputs: x, sr)"]),
        ("sr", ["--constant-inputs 'sr'", "NAME=VALUE"]),
        ("sr=[1,2]", ["'sr' has shape [2], the model declares []"]),
        ("missing.npz", ["--constant-inputs missing.npz: no such file"]),
    ],
)
def test_bad_constant_inputs(tmp_path, value, fragments):
    model = rate_switch(tmp_path / "vad.onnx")
    result = tpu_xdsl("transform", "--model-def", str(model), "--model-name", "vad", "--input-shapes", "[[1,8],[]]",
                      "--constant-inputs", value, "-o", str(tmp_path / "out.mlir"))
    assert_user_error(result, *fragments)
    _no_outputs(tmp_path)


def test_transform_lists_every_unsupported_op_at_once(tmp_path):
    """Two op types nobody supports, one of them twice: one message lists both, with
    opset, count and first node, and transform exits 2."""
    model = tmp_path / "m.onnx"
    small_cnn(model, extra_node=helper.make_node("Unique", ["prob"], ["u1"], name="first_unique"))
    proto = onnx.load(str(model))
    proto.graph.node.extend([
        helper.make_node("Unique", ["relu"], ["u2"], name="second_unique"),
        helper.make_node("Blur", ["relu"], ["blurred"], domain="com.example", name="blur"),
        helper.make_node("Add", ["u1", "blurred"], ["out"]),
    ])
    proto.opset_import.append(helper.make_opsetid("com.example", 1))
    onnx.save(proto, model)
    result = tpu_xdsl("transform", "--model-def", str(model), "--model-name", "m", "--input-shapes", "[[1,3,8,8]]",
                      "-o", str(tmp_path / "out.mlir"))
    assert_user_error(
        result, "Unique (opset 13, 2 nodes, first 'first_unique')", "com.example.Blur (opset 1, 1 node, first 'blur')",
        "tpu-xdsl list-ops",
    )
    _no_outputs(tmp_path)


def test_input_shapes_the_model_cannot_take_are_named(tmp_path):
    """A feature-pyramid step (stride-2 conv, nearest x2 upsample, add to the input) on a
    dynamic H x W: 8 x 8 works, 5 x 8 does not (the upsampled rows are 6), and the one-line
    error names the node, both shapes and the --input-shapes that led there."""
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["down"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
            helper.make_node("Resize", ["down", "", "scales"], ["up"], mode="nearest"),
            helper.make_node("Add", ["x", "up"], ["y"]),
        ],
        "fpn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w"),
         numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), tmp_path / "f.onnx")
    good = tpu_xdsl("transform", "--model-def", str(tmp_path / "f.onnx"), "--model-name", "f",
                    "--input-shapes", "[[1,1,8,8]]", "-o", str(tmp_path / "f.mlir"))
    assert good.returncode == 0, good.stderr
    bad = tpu_xdsl("transform", "--model-def", str(tmp_path / "f.onnx"), "--model-name", "f",
                   "--input-shapes", "[[1,1,5,8]]", "-o", str(tmp_path / "g.mlir"))
    assert_user_error(bad, "node 'y' (Add", "1x1x5x8", "1x1x6x8", "input shapes [[1,1,5,8]] (--input-shapes)")
    assert not (tmp_path / "g.mlir").exists()
