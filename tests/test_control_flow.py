"""ONNX control flow into TOP (which has none): If inlined or selected, Loop and Scan unrolled,
inputs bound to constants, and one-line errors for the rest. Expected values come from
onnxruntime running the original model.

Regression (issue 14): a voice-activity model picking a branch with `If` on a sample-rate
input stopped with "ONNX op If at opset 16 has no import rule".
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.frontend import control_flow
from tpu_xdsl.frontend.constant_inputs import (
    ConstantInputError,
    parse_constant_inputs,
    steering_only_inputs,
)
from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.frontend.onnx_model import (
    ImportRuleError,
    NeedsConstantError,
    UnsupportedOpError,
)
from tpu_xdsl.frontend.reference import run_reference
from tpu_xdsl.interp.runner import run_module
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.weights import attach_weights, weights_of

RNG = np.random.default_rng(0)
W = RNG.standard_normal((8, 4)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)


def make_model(nodes, inputs, outputs, initializers=(), opset=16) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def value(name, elem=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def const_node(name: str, array: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array, name))


def import_and_run(model, feeds, **kwargs):
    result = import_onnx(model, "m", **kwargs)
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    fed = {k: v for k, v in feeds.items() if k in result.input_names}
    return result, run_module(result.module, fed, weights_of(result.module))


def onnxruntime_outputs(model, feeds):
    return run_reference(model, feeds, all_tensors=False)[0]


def sample_rate_model() -> onnx.ModelProto:
    """y = If(sr == 16000): a branch with its own initializers and a nested If on a shape,
    reading the outer x; else a branch of another output shape (so no select is possible)."""
    inner_then = helper.make_graph([helper.make_node("Relu", ["lin"], ["act"])], "inner_then", [], [value("act")])
    inner_else = helper.make_graph([helper.make_node("Sigmoid", ["lin"], ["act2"])], "inner_else", [], [value("act2")])
    then_branch = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w16"], ["mm"]),
            helper.make_node("Add", ["mm", "b16"], ["lin"]),
            helper.make_node("Shape", ["x"], ["xs"]),
            const_node("one", np.array(1, np.int64)),
            helper.make_node("Gather", ["xs", "one"], ["width"], axis=0),
            const_node("eight", np.array(8, np.int64)),
            helper.make_node("Equal", ["width", "eight"], ["is8"]),
            helper.make_node(
                "If", ["is8"], ["then_y"], then_branch=inner_then, else_branch=inner_else, name="inner_if"
            ),
        ],
        "then",
        [],
        [value("then_y")],
        [numpy_helper.from_array(W, "w16"), numpy_helper.from_array(B, "b16")],
    )
    else_branch = helper.make_graph(
        [const_node("half", np.array(0.5, np.float32)), helper.make_node("Mul", ["x", "half"], ["else_y"])],
        "else",
        [],
        [value("else_y")],
    )
    nodes = [
        const_node("rate16k", np.array(16000, np.int64)),
        helper.make_node("Equal", ["sr", "rate16k"], ["is16k"]),
        helper.make_node("If", ["is16k"], ["y"], then_branch=then_branch, else_branch=else_branch, name="rate_if"),
    ]
    return make_model(nodes, [value("x", shape=[1, 8]), value("sr", TensorProto.INT64, [])], [value("y")])


X = RNG.standard_normal((1, 8)).astype(np.float32)


@pytest.mark.parametrize("rate", [16000, 8000])
def test_if_on_a_constant_input_is_inlined(rate):
    model = sample_rate_model()
    feeds = {"x": X, "sr": np.array(rate, np.int64)}
    result, top = import_and_run(model, feeds, input_shapes=[[1, 8], []], constant_inputs={"sr": rate})
    assert result.input_names == ["x"]
    assert result.notes == [f"input 'sr' is the constant {rate} (--constant-inputs); the TOP module has no input 'sr'"]
    expected = onnxruntime_outputs(model, feeds)["y"]
    np.testing.assert_allclose(top["y"], expected, rtol=1e-6, atol=1e-6)
    # The branch's output carries the If's name, and the inner If is gone too.
    text = str(result.module)
    assert 'names = ["y"]' in text
    assert "If" not in text


def test_a_branch_picked_at_run_time_without_a_binding_is_a_one_line_error():
    with pytest.raises(NeedsConstantError) as error:
        import_onnx(sample_rate_model(), "m", [[1, 8], []])
    message = str(error.value)
    assert "node 'rate_if' (If, opset 16): the condition (input 0) must be a constant" in message
    assert "run-time input(s) 'sr'" in message and "--constant-inputs" in message
    assert "[1, 4]" in message and "[1, 8]" in message  # why both branches cannot be selected
    assert "\n" not in message
    assert error.value.inputs == ["sr"]


def test_steering_inputs_are_bound_from_the_test_input_with_a_note():
    model = sample_rate_model()
    assert steering_only_inputs(model) == {"sr"}
    feeds = {"x": X, "sr": np.array(16000, np.int64)}
    result, top = import_and_run(model, feeds, input_shapes=[[1, 8], []], steering_values=feeds)
    assert result.input_names == ["x"]
    (note,) = result.notes
    assert "input 'sr' only steers shapes or branches" in note and "rate_if" in note and "16000" in note
    np.testing.assert_allclose(top["y"], onnxruntime_outputs(model, feeds)["y"], rtol=1e-6, atol=1e-6)


def test_a_data_input_is_not_bound_from_the_test_input():
    """x feeds the outputs' values: it is never a steering input."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    model = make_model(nodes, [value("x", shape=[2, 6]), value("shape", TensorProto.INT64, [2])], [value("y")])
    assert steering_only_inputs(model) == {"shape"}
    feeds = {"x": np.ones((2, 6), np.float32), "shape": np.array([3, 4], np.int64)}
    result, top = import_and_run(model, feeds, input_shapes=[[2, 6], [2]], steering_values=feeds)
    assert result.input_names == ["x"] and top["y"].shape == (3, 4)


def select_model(then_op: str = "Relu", else_extra: onnx.NodeProto | None = None) -> onnx.ModelProto:
    """y = If(ReduceSum(x) > 0, Relu(x) * 2, x - 1): the condition is data."""
    then_branch = helper.make_graph(
        [helper.make_node(then_op, ["x"], ["r"]), const_node("two", np.array(2.0, np.float32)),
         helper.make_node("Mul", ["r", "two"], ["t"])],
        "then", [], [value("t")],
    )
    else_nodes = [const_node("one", np.array(1.0, np.float32)), helper.make_node("Sub", ["x", "one"], ["e"])]
    if else_extra is not None:
        else_nodes.append(else_extra)
    else_branch = helper.make_graph(else_nodes, "else", [], [value("e")])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
        const_node("zero", np.array(0.0, np.float32)),
        helper.make_node("Greater", ["total", "zero"], ["positive"]),
        helper.make_node("If", ["positive"], ["y"], then_branch=then_branch, else_branch=else_branch, name="sign_if"),
    ]
    return make_model(nodes, [value("x", shape=[2, 3])], [value("y")], opset=13)


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_on_data_imports_both_branches_and_a_select(sign, keepdims):
    """The condition is a scalar, or (keepdims) a [1, 1] tensor of one element."""
    model = select_model()
    model.graph.node[0].attribute[0].i = keepdims
    x = (np.abs(RNG.standard_normal((2, 3))) * sign).astype(np.float32)
    result, top = import_and_run(model, {"x": x}, input_shapes=[[2, 3]])
    assert "top.where" in str(result.module)
    np.testing.assert_allclose(top["y"], onnxruntime_outputs(model, {"x": x})["y"], rtol=1e-6)


def test_if_on_data_with_a_random_branch_is_refused():
    """Both branches cannot run side by side when one draws random numbers (and the
    random op has no rule anyway: the error names it)."""
    draw = helper.make_node("RandomUniformLike", ["x"], ["noise"])
    model = select_model(else_extra=draw)
    assert "draws random numbers" in control_flow._side_effect(model.graph.node[-1].attribute[0].g)
    with pytest.raises(UnsupportedOpError) as error:
        import_onnx(model, "m", [[2, 3]])
    assert "RandomUniformLike (opset 13, 1 node, first 'noise')" in str(error.value)


def loop_model(trip_count: int, with_cond: bool = False) -> onnx.ModelProto:
    """Loop: acc += x * i (carried), scan output acc each step; with_cond stops at i == 2."""
    body_nodes = [
        helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "i_f"], ["xi"]),
        helper.make_node("Add", ["acc_in", "xi"], ["acc_out"]),
        helper.make_node("Identity", ["acc_out"], ["acc_scan"]),
    ]
    if with_cond:
        body_nodes += [const_node("two", np.array(2, np.int64)), helper.make_node("Less", ["i", "two"], ["cond_out"])]
    else:
        body_nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    body = helper.make_graph(
        body_nodes,
        "body",
        [value("i", TensorProto.INT64, []), value("cond_in", TensorProto.BOOL, []), value("acc_in", shape=[3])],
        [value("cond_out", TensorProto.BOOL, []), value("acc_out", shape=[3]), value("acc_scan", shape=[3])],
    )
    nodes = [
        const_node("M", np.array(trip_count, np.int64)),
        const_node("go", np.array(True)),
        helper.make_node("Loop", ["M", "go", "acc0"], ["acc", "history"], body=body, name="sum_loop"),
    ]
    return make_model(
        nodes, [value("x", shape=[3]), value("acc0", shape=[3])], [value("acc"), value("history")], opset=13
    )


@pytest.mark.parametrize(("trip", "with_cond"), [(4, False), (10, True)])
def test_loop_with_a_constant_trip_count_is_unrolled(trip, with_cond):
    model = loop_model(trip, with_cond)
    feeds = {"x": RNG.standard_normal(3).astype(np.float32), "acc0": RNG.standard_normal(3).astype(np.float32)}
    _, top = import_and_run(model, feeds, input_shapes=[[3], [3]])
    expected = onnxruntime_outputs(model, feeds)
    assert top["history"].shape == expected["history"].shape == ((3 if with_cond else trip), 3)
    for name in ("acc", "history"):
        np.testing.assert_allclose(top[name], expected[name], rtol=1e-6, atol=1e-6)


def test_loop_beyond_the_unrolling_bound_names_the_bound():
    trip = control_flow.MAX_UNROLLED_ITERATIONS + 1
    with pytest.raises(ImportRuleError) as error:
        import_onnx(loop_model(trip), "m", [[3], [3]])
    message = str(error.value)
    assert f"node 'sum_loop' (Loop, opset 13): runs {trip} iterations" in message
    assert f"unrolled at import up to {control_flow.MAX_UNROLLED_ITERATIONS}" in message
    assert "MAX_UNROLLED_ITERATIONS" in message


def test_loop_with_a_run_time_trip_count_names_the_input():
    model = loop_model(3)
    model.graph.node.pop(0)  # M becomes a model input
    model.graph.input.append(value("M", TensorProto.INT64, []))
    with pytest.raises(NeedsConstantError) as error:
        import_onnx(model, "m", [[3], [3], []])
    assert "node 'sum_loop' (Loop, opset 13): the trip count M (input 0) must be a constant" in str(error.value)
    assert error.value.inputs == ["M"]


def scan_model(opset: int) -> onnx.ModelProto:
    """A running sum over the sequence and each step's product with a weight."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["sum_in", "step"], ["sum_out"]),
            helper.make_node("Mul", ["sum_out", "weight"], ["scaled"]),
        ],
        "body",
        [value("sum_in", shape=[2]), value("step", shape=[2])],
        [value("sum_out", shape=[2]), value("scaled", shape=[2])],
    )
    weight = numpy_helper.from_array(np.array([0.5, -2.0], np.float32), "weight")
    if opset >= 9:
        scan = helper.make_node(
            "Scan", ["s0", "xs"], ["total", "steps"], body=body, num_scan_inputs=1,
            scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[-1], name="scan",
        )
        inputs = [value("s0", shape=[2]), value("xs", shape=[2, 5])]
    else:
        scan = helper.make_node("Scan", ["", "s0", "xs"], ["total", "steps"], body=body, num_scan_inputs=1, name="scan")
        inputs = [value("s0", shape=[3, 2]), value("xs", shape=[3, 5, 2])]
    return make_model([scan], inputs, [value("total"), value("steps")], [weight], opset=opset)


@pytest.mark.parametrize("opset", [8, 16])
def test_scan_is_unrolled(opset):
    model = scan_model(opset)
    shapes = [[2], [2, 5]] if opset >= 9 else [[3, 2], [3, 5, 2]]
    feeds = {name: RNG.standard_normal(shape).astype(np.float32) for name, shape in zip(("s0", "xs"), shapes)}
    _, top = import_and_run(model, feeds, input_shapes=shapes)
    expected = onnxruntime_outputs(model, feeds)
    for name in ("total", "steps"):
        assert top[name].shape == expected[name].shape
        np.testing.assert_allclose(top[name], expected[name], rtol=1e-6, atol=1e-6)


def test_every_unsupported_op_is_listed_at_once():
    """Two op types nobody supports (a custom domain's, and Unique), one of them twice and
    once inside a Loop whose trip count is not known: one error lists them all."""
    body = helper.make_graph(
        [helper.make_node("Unique", ["x"], ["u_in"]), helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("ReduceSum", ["u_in"], ["acc_out"], keepdims=1)],
        "body",
        [value("i", TensorProto.INT64, []), value("c", TensorProto.BOOL, []), value("acc", shape=[1])],
        [value("c_out", TensorProto.BOOL, []), value("acc_out", shape=[1])],
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Unique", ["r"], ["u"], name="unique_1"),
        helper.make_node("FancyNorm", ["r"], ["f"], domain="com.example", name="fancy"),
        helper.make_node("Add", ["u", "f"], ["y"]),
        helper.make_node("Loop", ["M", "", "acc0"], ["z"], body=body, name="loop"),
    ]
    model = helper.make_model(
        helper.make_graph(
            nodes, "g",
            [value("x", shape=[4]), value("M", TensorProto.INT64, []), value("acc0", shape=[1])],
            [value("y"), value("z")],
        ),
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 2)],
        ir_version=8,
    )
    with pytest.raises(UnsupportedOpError) as error:
        import_onnx(model, "m", [[4], [], [1]])
    message = str(error.value)
    assert "Unique (opset 13, 2 nodes, first 'unique_1')" in message
    assert "com.example.FancyNorm (opset 2, 1 node, first 'fancy')" in message
    assert "tpu-xdsl list-ops" in message and "\n" not in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [("sr=16000", {"sr": 16000}), ("sr=16000, mode=1", {"sr": 16000, "mode": 1}),
     ("a=[1,2],b=0.5", {"a": [1, 2], "b": 0.5})],
)
def test_parse_constant_inputs(text, expected):
    parsed = parse_constant_inputs(text)
    assert parsed.keys() == expected.keys()
    for name, want in expected.items():
        np.testing.assert_array_equal(parsed[name], np.asarray(want))


@pytest.mark.parametrize("text", ["sr", "=3", "sr=abc", "sr='x'"])
def test_bad_constant_inputs_are_one_line_errors(text):
    with pytest.raises(ConstantInputError) as error:
        parse_constant_inputs(text)
    assert "--constant-inputs" in str(error.value)


def test_a_constant_for_an_unknown_input_is_an_error():
    with pytest.raises(ConstantInputError) as error:
        import_onnx(sample_rate_model(), "m", [[1, 8], []], constant_inputs={"rate": 16000})
    assert "'rate', which is not an input of the model (inputs: x, sr)" in str(error.value)


def test_steering_analysis_looks_inside_branches():
    """A branch that reads `n` only as a Reshape target leaves `n` steering-only; a branch
    that adds `k` to the data makes `k` data."""
    then_branch = helper.make_graph(
        [helper.make_node("Reshape", ["x", "n"], ["t"])], "then", [], [value("t")]
    )
    else_branch = helper.make_graph(
        [helper.make_node("Cast", ["k"], ["kf"], to=TensorProto.FLOAT), helper.make_node("Add", ["x", "kf"], ["e0"]),
         helper.make_node("Reshape", ["e0", "n"], ["e"])],
        "else", [], [value("e")],
    )
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch)]
    model = make_model(
        nodes,
        [value("x", shape=[2, 3]), value("n", TensorProto.INT64, [2]), value("k", TensorProto.INT64, []),
         value("c", TensorProto.BOOL, [])],
        [value("y")],
    )
    assert steering_only_inputs(model) == {"n", "c"}


def test_torch_scripted_loop_and_branch_match_onnxruntime():
    """torch.jit.script exports a Python loop as Loop (trip count from a shape) and a
    data-dependent `if` as If: unrolled, and both branches with a select."""
    import io
    import warnings

    torch = pytest.importorskip("torch")

    class Refine(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            h = x
            for _ in range(x.size(1) // 2):
                h = torch.tanh(self.fc(h)) + h
            if x.sum() > 0:
                h = h * 2
            else:
                h = h - 1
            return h

    torch.manual_seed(0)
    x = torch.randn(2, 4)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(torch.jit.script(Refine().eval()), (x,), buffer, opset_version=13, dynamo=False,
                          input_names=["x"], output_names=["y"])
    model = onnx.load_from_string(buffer.getvalue())
    assert {"Loop", "If"} <= {n.op_type for n in model.graph.node}
    for sign in (1.0, -1.0):
        feeds = {"x": np.abs(x.numpy()) * sign}
        _, top = import_and_run(model, feeds, input_shapes=[[2, 4]])
        np.testing.assert_allclose(top["y"], onnxruntime_outputs(model, feeds)["y"], rtol=1e-5, atol=1e-6)


def test_input_shapes_may_list_the_constant_inputs_or_leave_them_out():
    from tpu_xdsl.frontend.onnx_model import ShapeBindingError

    for shapes in ([[1, 8], []], [[1, 8]]):
        result = import_onnx(sample_rate_model(), "m", shapes, constant_inputs={"sr": 16000})
        assert result.input_names == ["x"]
    with pytest.raises(ShapeBindingError) as error:
        import_onnx(sample_rate_model(), "m", [[1, 8], [], [3]], constant_inputs={"sr": 16000})
    assert "gives 3 shape(s) but the model has 1 input(s): x (and the constant input(s) sr)" in str(error.value)


def test_unsupported_ops_after_a_failing_node_are_still_listed():
    """A node whose rule fails (a MatMul of mismatched shapes) does not hide the op types
    without a rule further on; with no such op, its own error is the one raised."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["bad"], name="bad_matmul"),
        helper.make_node("Unique", ["x"], ["u"], name="unique"),
    ]
    initializers = [numpy_helper.from_array(np.ones((5, 2), np.float32), "w")]
    model = make_model(nodes, [value("x", shape=[2, 3])], [value("bad"), value("u")], initializers, opset=13)
    with pytest.raises(UnsupportedOpError, match=r"Unique \(opset 13, 1 node, first 'unique'\)"):
        import_onnx(model, "m", [[2, 3]])
    del model.graph.node[1], model.graph.output[1]
    with pytest.raises(TpuXdslError) as error:
        import_onnx(model, "m", [[2, 3]])
    assert not isinstance(error.value, UnsupportedOpError)
    assert str(error.value).startswith("node 'bad_matmul' (MatMul, opset 13): 'matmul' operands")
