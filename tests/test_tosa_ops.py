"""The TOSA export op by op: small ONNX graphs (onnx.helper) imported to TOP, exported to
TOSA, compiled and run by IREE, against onnxruntime on random inputs; the layout property
of conv chains; and the docs/tosa.md table against the rule registry."""

from __future__ import annotations

import io

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.printer import Printer

from tpu_xdsl.export import iree
from tpu_xdsl.export.convert_top_to_tosa import export_tosa
from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.weights import attach_weights

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64
BOOL = TensorProto.BOOL


def vi(name: str, elem_type: int, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, list(shape))


def const(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def model_of(nodes, inputs, outputs, initializers=(), opset: int = 18) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=min(10, onnx.IR_VERSION))


def tosa_text(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> str:
    shapes = [list(feeds[v.name].shape) for v in model.graph.input if v.name in feeds]
    result = import_onnx(model, "m", shapes)
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    exported = export_tosa(result.module)
    out = io.StringIO()
    Printer(out).print_op(exported)
    return out.getvalue()


def run_both(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(IREE's outputs of the exported TOSA, onnxruntime's), in the graph's output order."""
    text = tosa_text(model, feeds)
    ours = iree.load_vmfb(iree.compile_tosa(text, "test")).run(feeds)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    return [np.asarray(ours[n]) for n in names], [np.asarray(r) for r in session.run(None, feeds)]


def check(model: onnx.ModelProto, feeds: dict[str, np.ndarray], atol: float = 1e-5) -> None:
    ours, ref = run_both(model, feeds)
    for got, want in zip(ours, ref, strict=True):
        assert got.shape == want.shape
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(got.astype(want.dtype), want)
            continue
        got64, want64 = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
        cosine = got64 @ want64 / (np.linalg.norm(got64) * np.linalg.norm(want64) + 1e-30)
        assert cosine >= 0.99999, cosine
        np.testing.assert_allclose(got, want, atol=atol, rtol=1e-4)


def randn(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- elementwise ---------------------------------------------------------------------------------


@pytest.mark.parametrize("onnx_op", ["Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"])
def test_compare(onnx_op):
    a = np.round(randn(2, 3, 4, 5)).astype(np.float32)
    b = np.round(randn(3, 1, 5, seed=1)).astype(np.float32)
    model = model_of([helper.make_node(onnx_op, ["a", "b"], ["y"])],
                     [vi("a", F32, a.shape), vi("b", F32, b.shape)], [vi("y", BOOL, (2, 3, 4, 5))])
    check(model, {"a": a, "b": b})


def test_logical_ops_and_not_equal():
    a, b = randn(2, 6), randn(2, 6, seed=1)
    nodes = [helper.make_node("Greater", ["a", "b"], ["g"]), helper.make_node("Less", ["a", "zero"], ["n"]),
             helper.make_node("And", ["g", "n"], ["y_and"]), helper.make_node("Or", ["g", "n"], ["y_or"]),
             helper.make_node("Xor", ["g", "n"], ["y_xor"]), helper.make_node("Not", ["g"], ["y_not"]),
             helper.make_node("Equal", ["a", "b"], ["e"]), helper.make_node("Not", ["e"], ["y_ne"])]
    outs = [vi(n, BOOL, (2, 6)) for n in ("y_and", "y_or", "y_xor", "y_not", "y_ne")]
    model = model_of(nodes, [vi("a", F32, a.shape), vi("b", F32, b.shape)], outs,
                     [const("zero", np.zeros(1, np.float32))])
    check(model, {"a": a, "b": b})


@pytest.mark.parametrize("onnx_op", ["Round", "Sign", "Mish"])
def test_unary(onnx_op):
    # Halves (ties to even), integers, zeros and ordinary values.
    x = np.concatenate([np.arange(-4, 4.5, 0.5), np.zeros(3), randn(40) * 3]).astype(np.float32).reshape(1, 3, 4, 5)
    model = model_of([helper.make_node(onnx_op, ["x"], ["y"])], [vi("x", F32, x.shape)], [vi("y", F32, x.shape)])
    check(model, {"x": x})


# -- reductions and normalizations ---------------------------------------------------------------


@pytest.mark.parametrize("onnx_op,last", [("ArgMax", 0), ("ArgMin", 0), ("ArgMax", 1), ("ArgMin", 1)])
def test_arg(onnx_op, last):
    x = np.round(randn(2, 5, 3, 4) * 2).astype(np.float32)  # rounded: ties occur
    node = helper.make_node(onnx_op, ["x"], ["y"], axis=1, keepdims=1, select_last_index=last)
    model = model_of([node], [vi("x", F32, x.shape)], [vi("y", I64, (2, 1, 3, 4))])
    check(model, {"x": x})


@pytest.mark.parametrize("largest", [1, 0])
def test_topk(largest):
    x = np.round(randn(2, 3, 9) * 2).astype(np.float32)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1, largest=largest)
    model = model_of([node], [vi("x", F32, x.shape)], [vi("v", F32, (2, 3, 4)), vi("i", I64, (2, 3, 4))],
                     [const("k", np.array([4], np.int64))])
    check(model, {"x": x})


@pytest.mark.parametrize("mode", ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"])
def test_reduce_modes(mode):
    x = randn(2, 3, 4, 5)
    node = helper.make_node(mode, ["x", "axes"], ["y"], keepdims=0)
    model = model_of([node], [vi("x", F32, x.shape)], [vi("y", F32, (2, 5))], [const("axes", np.array([1, 2]))])
    check(model, {"x": x})


def test_lrn():
    x = randn(1, 7, 5, 5)
    node = helper.make_node("LRN", ["x"], ["y"], size=5, alpha=0.01, beta=0.75, bias=2.0)
    model = model_of([node], [vi("x", F32, x.shape)], [vi("y", F32, x.shape)])
    check(model, {"x": x})


def test_group_norm():
    x = randn(2, 6, 4, 5)
    scale, bias = randn(6, seed=1), randn(6, seed=2)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, epsilon=1e-5)
    model = model_of([node], [vi("x", F32, x.shape)], [vi("y", F32, x.shape)],
                     [const("s", scale), const("b", bias)], opset=21)
    check(model, {"x": x})


# -- data movement ---------------------------------------------------------------------------------


@pytest.mark.parametrize("constant", [True, False])
def test_gather(constant):
    x = randn(3, 5, 4)
    idx = np.array([[4, 0], [-1, 2]], np.int64)
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1)
    inputs, inits, feeds = [vi("x", F32, x.shape)], [], {"x": x}
    if constant:
        inits = [const("i", idx)]
    else:
        inputs.append(vi("i", I64, idx.shape))
        feeds["i"] = idx
    model = model_of([node], inputs, [vi("y", F32, (3, 2, 2, 4))], inits)
    check(model, feeds)


def test_gather_embedding_table():
    table = randn(10, 6)
    ids = np.array([[1, 9, 0]], np.int64)
    model = model_of([helper.make_node("Gather", ["t", "ids"], ["y"], axis=0)], [vi("ids", I64, ids.shape)],
                     [vi("y", F32, (1, 3, 6))], [const("t", table)])
    check(model, {"ids": ids})


@pytest.mark.parametrize("constant", [True, False])
def test_gather_elements(constant):
    x = randn(3, 4, 5)
    idx = np.random.default_rng(3).integers(-4, 4, (3, 2, 5)).astype(np.int64)
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)
    inputs, inits, feeds = [vi("x", F32, x.shape)], [], {"x": x}
    if constant:
        inits = [const("i", idx)]
    else:
        inputs.append(vi("i", I64, idx.shape))
        feeds["i"] = idx
    check(model_of([node], inputs, [vi("y", F32, idx.shape)], inits), feeds)


@pytest.mark.parametrize("constant", [True, False])
def test_scatter_nd(constant):
    x, updates = randn(4, 5, 3), randn(2, 3, seed=1)
    idx = np.array([[0, 4], [-1, 1]], np.int64)
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"])
    inputs, inits = [vi("x", F32, x.shape), vi("u", F32, updates.shape)], []
    feeds = {"x": x, "u": updates}
    if constant:
        inits = [const("i", idx)]
    else:
        inputs.append(vi("i", I64, idx.shape))
        feeds["i"] = idx
    check(model_of([node], inputs, [vi("y", F32, x.shape)], inits), feeds)


@pytest.mark.parametrize("starts,ends,steps", [([0, 1], [7, 6], [2, 2]), ([6, 0], [0, 6], [-2, 1]),
                                               ([-1, 5], [-9, -9], [-1, -3])])
def test_slice_steps(starts, ends, steps):
    x = randn(1, 3, 7, 6)
    expect = x[:, :, slice(starts[0], ends[0], steps[0]), slice(starts[1], ends[1], steps[1])].shape
    node = helper.make_node("Slice", ["x", "s", "e", "a", "p"], ["y"])
    inits = [const("s", np.array(starts)), const("e", np.array(ends)), const("a", np.array([2, 3])),
             const("p", np.array(steps))]
    # A conv first, so the stepped slice starts from a channels-last value.
    conv = helper.make_node("Conv", ["x0", "w"], ["x"], pads=[1, 1, 1, 1])
    model = model_of([conv, node], [vi("x0", F32, x.shape)], [vi("y", F32, expect)],
                     [*inits, const("w", randn(3, 3, 3, 3, seed=1))])
    check(model, {"x0": x})


@pytest.mark.parametrize("mode,pads", [("reflect", [0, 0, 2, 1, 0, 0, 1, 3]), ("edge", [0, 1, 2, 0, 0, 0, 1, 3]),
                                       ("constant", [0, 0, -1, 2, 0, 0, 1, -2])])
def test_pad_modes(mode, pads):
    x = randn(1, 2, 5, 6)
    shape = tuple(d + b + e for d, b, e in zip(x.shape, pads[:4], pads[4:], strict=True))
    node = helper.make_node("Pad", ["x", "p"], ["y"], mode=mode)
    model = model_of([node], [vi("x", F32, x.shape)], [vi("y", F32, shape)], [const("p", np.array(pads))])
    check(model, {"x": x})


def test_space_to_depth():
    x = randn(1, 3, 4, 6)
    model = model_of([helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2)], [vi("x", F32, x.shape)],
                     [vi("y", F32, (1, 12, 2, 3))])
    check(model, {"x": x})


# -- convolutions and pools ------------------------------------------------------------------------


@pytest.mark.parametrize("group,dilation", [(1, 2), (2, 1), (2, 2)])
def test_deconv_groups_dilation(group, dilation):
    x, w = randn(1, 4, 5, 6), randn(4, 3, 3, 3, seed=1)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], group=group, dilations=[dilation] * 2,
                            strides=[2, 2], pads=[1, 0, 1, 1])
    span = 2 * dilation + 1  # the dilated 3x3 kernel's extent
    shape = (1, 3 * group, (5 - 1) * 2 - 2 + span, (6 - 1) * 2 - 1 + span)  # (in - 1) * stride - pads + span
    model = model_of([node], [vi("x", F32, x.shape)], [vi("y", F32, shape)],
                     [const("w", w), const("b", randn(3 * group, seed=2))])
    check(model, {"x": x})


@pytest.mark.parametrize("onnx_op", ["MaxPool", "AveragePool"])
def test_pool_1d(onnx_op):
    x = randn(2, 3, 11)
    node = helper.make_node(onnx_op, ["x"], ["y"], kernel_shape=[3], strides=[2], pads=[1, 1])
    model = model_of([node], [vi("x", F32, x.shape)], [vi("y", F32, (2, 3, 6))])
    check(model, {"x": x})


# -- docs/tosa.md -----------------------------------------------------------------------------------


def test_docs_table_matches_rules():
    """docs/tosa.md lists every TOP op once, in the exported table exactly when it has a rule
    (or is one of the three the driver passes through)."""
    from pathlib import Path

    from tpu_xdsl.dialects import Top
    from tpu_xdsl.export.rules import RULES

    text = (Path(__file__).parent.parent / "docs" / "tosa.md").read_text(encoding="utf-8")
    exported_part, _, missing_part = text.partition("### Not exported")

    def ops_in(part: str) -> list[str]:
        return [line.split("|")[1].strip() for line in part.splitlines() if line.startswith("| top.")]

    exported, missing = ops_in(exported_part), ops_in(missing_part)
    top_ops = {op.name for op in Top.operations}
    assert len(top_ops) == 78
    assert sorted(exported + missing) == sorted(top_ops)  # each once
    with_rules = {f"top.{kind}" for kind in RULES} | {"top.input", "top.none", "top.weight"}
    assert set(exported) == with_rules & top_ops
    assert not set(missing) & with_rules


# -- recurrent ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("direction,layout", [("forward", 0), ("bidirectional", 0), ("reverse", 0)])
def test_lstm(direction, layout):
    seq, batch, size, hidden = 5, 2, 3, 4
    dirs = 2 if direction == "bidirectional" else 1
    x = randn(batch, seq, size) if layout else randn(seq, batch, size)
    h0 = randn(batch, dirs, hidden, seed=4) if layout else randn(dirs, batch, hidden, seed=4)
    inits = [const("W", randn(dirs, 4 * hidden, size, seed=1)), const("R", randn(dirs, 4 * hidden, hidden, seed=2)),
             const("B", randn(dirs, 8 * hidden, seed=3))]
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0"], ["y", "y_h", "y_c"], hidden_size=hidden,
                            direction=direction, layout=layout)
    y_shape = (batch, seq, dirs, hidden) if layout else (seq, dirs, batch, hidden)
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    model = model_of([node], [vi("x", F32, x.shape), vi("h0", F32, h0.shape)],
                     [vi("y", F32, y_shape), vi("y_h", F32, state), vi("y_c", F32, state)], inits)
    check(model, {"x": x, "h0": h0})


@pytest.mark.parametrize("before_reset", [0, 1])
def test_gru(before_reset):
    seq, batch, size, hidden = 4, 2, 3, 5
    x = randn(seq, batch, size)
    inits = [const("W", randn(2, 3 * hidden, size, seed=1)), const("R", randn(2, 3 * hidden, hidden, seed=2)),
             const("B", randn(2, 6 * hidden, seed=3))]
    node = helper.make_node("GRU", ["x", "W", "R", "B"], ["y", "y_h"], hidden_size=hidden, direction="bidirectional",
                            linear_before_reset=before_reset)
    model = model_of([node], [vi("x", F32, x.shape)],
                     [vi("y", F32, (seq, 2, batch, hidden)), vi("y_h", F32, (2, batch, hidden))], inits)
    check(model, {"x": x})


def test_one_hot_by_cast_of_equal():
    """Cast(Equal) to float, as tf2onnx writes one-hot encodings (magika): the importer folds
    the cast into the comparison's result type."""
    ids = np.array([[3, 0, 7, 3]], np.int64)
    nodes = [helper.make_node("Unsqueeze", ["ids", "axis"], ["col"]),
             helper.make_node("Equal", ["col", "classes"], ["hit"]),
             helper.make_node("Cast", ["hit"], ["onehot"], to=F32),
             helper.make_node("MatMul", ["onehot", "table"], ["y"])]
    inits = [const("axis", np.array([2])), const("classes", np.arange(8, dtype=np.int64).reshape(1, 1, 8)),
             const("table", randn(8, 5))]
    model = model_of(nodes, [vi("ids", I64, ids.shape)], [vi("y", F32, (1, 4, 5))], inits)
    check(model, {"ids": ids})
