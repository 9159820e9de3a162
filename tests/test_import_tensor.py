"""Shape, data-movement, cast and recurrent ops: ONNX graphs imported to TOP and
interpreted, checked against onnxruntime (or ONNX's reference evaluator where
onnxruntime lacks the form, e.g. RNN layout 1)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.frontend.onnx_model import ImportRuleError
from tpu_xdsl.interp.runner import run_module

RNG = np.random.default_rng(0)
F = TensorProto.FLOAT
I64 = TensorProto.INT64


def vi(name: str, elem_type: int, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(
        name, elem_type, None if shape is None else list(shape)
    )


def const(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def make_model(nodes, inputs, outputs, opset: int, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g", inputs, outputs, initializer=list(initializers)
    )
    # onnxruntime reads IR version <= 10.
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)],
        ir_version=min(10, onnx.IR_VERSION),
    )


def run_ours(model: onnx.ModelProto, feeds: dict[str, np.ndarray]):
    shapes = [list(feeds[v.name].shape) for v in model.graph.input if v.name in feeds]
    result = import_onnx(model, input_shapes=shapes)
    result.module.verify()  # every emitted op satisfies its IRDL constraints
    outputs = run_module(result.module, feeds, result.weights)
    return [np.asarray(v) for v in outputs.values()], result


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def check(
    model: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    rtol=1e-5,
    atol=1e-6,
    reference=None,
):
    """Our outputs equal onnxruntime's (or `reference`'s) in count, dtype, shape and value."""
    ours, result = run_ours(model, feeds)
    theirs = reference(model, feeds) if reference else run_ort(model, feeds)
    assert len(ours) == len(theirs)
    for got, want in zip(ours, theirs):
        want = np.asarray(want)
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        assert got.shape == want.shape, (got.shape, want.shape)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(got, want)
    return result


def run_reference(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray]
) -> list[np.ndarray]:
    return ReferenceEvaluator(model).run(None, feeds)


def op_names(result) -> list[str]:
    return [op.name for op in result.module.walk() if op.name.startswith("top.")]


def randn(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# -- shapes fold --------------------------------------------------------------------------


def test_dynamic_batch_shape_subgraph_folds():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape on a dynamic batch becomes one top.reshape."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", F, ["N", 3, 4, 4])]
    inits = [
        const("zero", np.array(0, np.int64)),
        const("axes", np.array([0], np.int64)),
        const("minus_one", np.array([-1], np.int64)),
    ]
    model = make_model(nodes, inputs, [vi("y", F, None)], 13, inits)
    result = check(model, {"x": randn(2, 3, 4, 4)})
    ops = op_names(result)
    assert "top.gather" not in ops and "top.concat" not in ops
    (reshape,) = [op for op in result.module.walk() if op.name == "top.reshape"]
    assert [a.value.data for a in reshape.attributes["shape"].data] == [2, 48]


# -- data movement ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_transpose_concat_split_keep_dtype(dtype):
    """Integer data moves exactly (2**40 + k does not survive a trip through f32)."""
    offset = 2**40 if dtype == np.int64 else 0
    x = (RNG.standard_normal((2, 3, 4)) * 100).astype(dtype) + offset
    y = (RNG.standard_normal((2, 3, 4)) * 100).astype(dtype) + offset
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes = [
        helper.make_node("Transpose", ["x"], ["xt"], perm=[2, 0, 1]),
        helper.make_node("Transpose", ["y"], ["yt"]),
        helper.make_node("Concat", ["xt", "xt"], ["c"], axis=-1),
        helper.make_node("Split", ["c", "split"], ["s0", "s1"], axis=2),
    ]
    model = make_model(
        nodes,
        [vi("x", t, x.shape), vi("y", t, y.shape)],
        [vi(n, t, None) for n in ("yt", "s0", "s1")],
        13,
        [const("split", np.array([1, 5], np.int64))],
    )
    check(model, {"x": x, "y": y})


def test_split_opset18_num_outputs_uneven():
    x = randn(7, 2)
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3)
    model = make_model(
        [node], [vi("x", F, x.shape)], [vi(n, F, None) for n in "abc"], 18
    )
    check(model, {"x": x})


@pytest.mark.parametrize(
    ("starts", "ends", "axes", "steps"),
    [
        ([0, 1], [2, 1000], [0, 1], [1, 2]),
        ([-1], [-1000], [1], [-1]),  # negative step past index 0
        ([2**62], [-(2**62)], [-1], [-2]),  # INT_MAX-like start, clamped
        ([1, -3], [-1, 2**62], [-1, 0], None),  # negative axes, default steps
    ],
)
def test_slice_opset13(starts, ends, axes, steps):
    x = randn(5, 6)
    inits = [
        const("starts", np.array(starts, np.int64)),
        const("ends", np.array(ends, np.int64)),
        const("axes", np.array(axes, np.int64)),
    ]
    names = ["x", "starts", "ends", "axes"]
    if steps is not None:
        inits.append(const("steps", np.array(steps, np.int64)))
        names.append("steps")
    model = make_model(
        [helper.make_node("Slice", names, ["y"])],
        [vi("x", F, x.shape)],
        [vi("y", F, None)],
        13,
        inits,
    )
    check(model, {"x": x})


def test_opset9_slice_and_upsample():
    """Opset 9: Slice with attributes, Upsample with a scales input (nearest)."""
    x = randn(1, 2, 5, 6)
    nodes = [
        helper.make_node(
            "Slice", ["x"], ["s"], starts=[1, -4], ends=[4, 1000], axes=[2, 3]
        ),
        helper.make_node("Upsample", ["s", "scales"], ["y"], mode="nearest"),
        helper.make_node("Upsample", ["s", "scales_odd"], ["z"], mode="nearest"),
        helper.make_node("Upsample", ["s", "scales_odd"], ["w"], mode="linear"),
    ]
    inits = [
        const("scales", np.array([1, 1, 2, 3], np.float32)),
        const("scales_odd", np.array([1, 1, 1.5, 2.5], np.float32)),
    ]
    model = make_model(
        nodes, [vi("x", F, x.shape)], [vi(n, F, None) for n in "yzw"], 9, inits
    )
    result = check(model, {"x": x})
    assert "top.upsample" in op_names(result)


@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.6, 0.5], [1, 1, 0.5, 1.5]])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_opset10_resize(scales, mode):
    """Opset 10: asymmetric coordinates; nearest floors when enlarging, ceils when shrinking."""
    x = randn(1, 2, 6, 8)
    node = helper.make_node("Resize", ["x", "scales"], ["y"], mode=mode)
    model = make_model(
        [node],
        [vi("x", F, x.shape)],
        [vi("y", F, None)],
        10,
        [const("scales", np.array(scales, np.float32))],
    )
    check(model, {"x": x})


@pytest.mark.parametrize(
    "coordinate_mode",
    ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"],
)
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 2], [1, 1, 0.5, 0.75], [1, 1, 1.75, 1.0]])
def test_resize_coordinate_modes(coordinate_mode, mode, scales):
    x = randn(2, 3, 8, 8)
    node = helper.make_node(
        "Resize",
        ["x", "", "scales"],
        ["y"],
        mode=mode,
        coordinate_transformation_mode=coordinate_mode,
    )
    model = make_model(
        [node],
        [vi("x", F, x.shape)],
        [vi("y", F, None)],
        13,
        [const("scales", np.array(scales, np.float32))],
    )
    check(model, {"x": x}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
)
def test_resize_sizes_nearest_modes(nearest_mode):
    x = randn(1, 1, 5, 7)
    node = helper.make_node(
        "Resize",
        ["x", "", "", "sizes"],
        ["y"],
        mode="nearest",
        nearest_mode=nearest_mode,
        coordinate_transformation_mode="half_pixel",
    )
    model = make_model(
        [node],
        [vi("x", F, x.shape)],
        [vi("y", F, None)],
        13,
        [const("sizes", np.array([1, 1, 9, 4], np.int64))],
    )
    check(model, {"x": x})


def test_resize_uint8_linear_rounds_like_the_reference():
    """An integer Resize computes in f32, rounds half to even and saturates (ONNX's
    reference); f32 vs f64 ties may differ by one step, as onnxruntime does too."""
    x = RNG.integers(0, 256, (1, 3, 5, 6)).astype(np.uint8)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")
    inits = [const("scales", np.array([1, 1, 1.5, 2.5], np.float32))]
    model = make_model(
        [node],
        [vi("x", TensorProto.UINT8, x.shape)],
        [vi("y", TensorProto.UINT8, None)],
        13,
        inits,
    )
    (got,), _ = run_ours(model, {"x": x})
    (want,) = run_reference(model, {"x": x})
    assert got.dtype == np.uint8 and got.shape == want.shape
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


def test_resize_opset18_axes_and_aspect_ratio():
    x = randn(1, 2, 4, 6)
    node = helper.make_node(
        "Resize",
        ["x", "", "", "sizes"],
        ["y"],
        mode="linear",
        axes=[3, 2],
        keep_aspect_ratio_policy="not_larger",
    )
    model = make_model(
        [node],
        [vi("x", F, x.shape)],
        [vi("y", F, None)],
        18,
        [const("sizes", np.array([9, 7], np.int64))],
    )
    ours, _ = run_ours(model, {"x": x})
    assert ours[0].shape == (1, 2, 6, 9)  # scale min(9/6, 7/4) = 1.5 on both axes
    check(model, {"x": x})


@pytest.mark.parametrize("mode", ["reflect", "edge", "constant"])
def test_pad_opset11(mode):
    x = randn(1, 2, 4, 5)
    pads = np.array([0, 0, 2, 1, 0, 0, 1, -1], np.int64)  # a negative pad crops
    names = ["x", "pads"] + (["value"] if mode == "constant" else [])
    inits = [const("pads", pads), const("value", np.array(1.5, np.float32))]
    model = make_model(
        [helper.make_node("Pad", names, ["y"], mode=mode)],
        [vi("x", F, x.shape)],
        [vi("y", F, None)],
        11,
        inits,
    )
    check(model, {"x": x})


def test_pad_run_time_constant_value():
    """A constant_value fed at run time fills the border through a mask."""
    x = randn(2, 3)
    node = helper.make_node("Pad", ["x", "pads", "value"], ["y"])
    inputs = [vi("x", F, x.shape), vi("value", F, [])]
    inits = [const("pads", np.array([1, -1, 0, 2], np.int64))]
    model = make_model([node], inputs, [vi("y", F, None)], 13, inits)
    check(model, {"x": x, "value": np.array(-4.5, np.float32)})


def test_pad_opset2_attributes_reflect():
    x = randn(1, 1, 3, 4)
    node = helper.make_node(
        "Pad", ["x"], ["y"], mode="reflect", pads=[0, 0, 2, 3, 0, 0, 1, 2]
    )
    model = make_model([node], [vi("x", F, x.shape)], [vi("y", F, None)], 7)
    check(model, {"x": x})


def test_squeeze_unsqueeze_flatten_tile_expand():
    x = randn(2, 1, 3)
    nodes = [
        helper.make_node("Squeeze", ["x", "sq_axes"], ["s"]),
        helper.make_node("Unsqueeze", ["s", "unsq_axes"], ["u"]),
        helper.make_node("Flatten", ["u"], ["f"], axis=-1),
        helper.make_node("Tile", ["x", "repeats"], ["t"]),
        helper.make_node("Expand", ["x", "shape"], ["e"]),
    ]
    inits = [
        const("sq_axes", np.array([-2], np.int64)),
        const("unsq_axes", np.array([-1, 0], np.int64)),
        const("repeats", np.array([1, 3, 2], np.int64)),
        const("shape", np.array([4, 1, 1, 1], np.int64)),
    ]
    model = make_model(
        nodes,
        [vi("x", F, x.shape)],
        [vi(n, F, None) for n in "suf te".replace(" ", "")],
        13,
        inits,
    )
    check(model, {"x": x})


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_back(mode):
    x = randn(1, 8, 2, 3)
    nodes = [
        helper.make_node("DepthToSpace", ["x"], ["d"], blocksize=2, mode=mode),
        helper.make_node("SpaceToDepth", ["d"], ["s"], blocksize=2),
    ]
    model = make_model(
        nodes, [vi("x", F, x.shape)], [vi("d", F, None), vi("s", F, None)], 13
    )
    check(model, {"x": x})


# -- indexing -----------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_negative_indices(axis):
    x = randn(4, 5, 6)
    indices = np.array([[-1, 0], [2, -3]], np.int64)
    nodes = [
        helper.make_node("Gather", ["x", "indices"], ["y"], axis=axis),
        helper.make_node("Gather", ["x", "const_indices"], ["z"], axis=axis),
    ]
    inputs = [vi("x", F, x.shape), vi("indices", I64, indices.shape)]
    model = make_model(
        nodes,
        inputs,
        [vi("y", F, None), vi("z", F, None)],
        13,
        [const("const_indices", np.array(-2, np.int64))],
    )
    check(model, {"x": x, "indices": indices})


def test_gather_int_data_stays_int():
    x = np.arange(24, dtype=np.int64).reshape(4, 6) - 7
    node = helper.make_node("Gather", ["x", "indices"], ["y"], axis=1)
    model = make_model(
        [node],
        [vi("x", I64, x.shape)],
        [vi("y", I64, None)],
        13,
        [const("indices", np.array([5, -6], np.int64))],
    )
    check(model, {"x": x})


def test_gather_elements_and_scatter_nd():
    x = randn(3, 4)
    indices = np.array([[0, -1, 2, 1], [2, 2, 0, -3]], np.int64)
    scatter_indices = np.array([[1], [-1]], np.int64)
    updates = randn(2, 4)
    nodes = [
        helper.make_node("GatherElements", ["x", "indices"], ["g"], axis=0),
        helper.make_node("ScatterND", ["x", "scatter_indices", "updates"], ["s"]),
        helper.make_node(
            "ScatterND", ["x", "add_indices", "add_updates"], ["a"], reduction="add"
        ),
    ]
    inputs = [
        vi("x", F, x.shape),
        vi("indices", I64, indices.shape),
        vi("scatter_indices", I64, scatter_indices.shape),
        vi("updates", F, updates.shape),
    ]
    inits = [
        const("add_indices", np.array([[0, 1], [0, 1], [2, 3]], np.int64)),
        const("add_updates", np.array([1, 2, 3], np.float32)),
    ]
    model = make_model(nodes, inputs, [vi(n, F, None) for n in "gsa"], 16, inits)
    check(
        model,
        {
            "x": x,
            "indices": indices,
            "scatter_indices": scatter_indices,
            "updates": updates,
        },
    )


def test_onehot_float_indices_and_run_time_values():
    """Float indices (whole numbers: ONNX leaves fractions unspecified, and onnxruntime
    1.32 truncates them where ONNX's reference matches nothing); values may come at run time."""
    indices = np.array([[0.0, 2.0, -1.0], [3.0, -4.0, 1.0]], np.float32)
    node = helper.make_node("OneHot", ["indices", "depth", "values"], ["y"], axis=-2)
    inputs = [vi("indices", F, indices.shape), vi("values", F, [2])]
    inits = [const("depth", np.array(4.0, np.float32))]  # a type mix onnxruntime has
    model = make_model([node], inputs, [vi("y", F, None)], 11, inits)
    check(model, {"indices": indices, "values": np.array([0.5, 7.0], np.float32)})


def test_trilu_onehot_compress():
    x = randn(2, 3, 4)
    labels = np.array([[0, 3, -1], [5, 2, -4]], np.int64)
    nodes = [
        helper.make_node("Trilu", ["x", "k"], ["upper"]),
        helper.make_node("Trilu", ["x"], ["lower"], upper=0),
        helper.make_node("OneHot", ["labels", "depth", "values"], ["hot"], axis=1),
        helper.make_node("Compress", ["x", "cond"], ["picked"], axis=2),
        helper.make_node("Compress", ["x", "cond"], ["flat"]),
    ]
    inits = [
        const("k", np.array(1, np.int64)),
        const("depth", np.array(4, np.int64)),
        const("values", np.array([-1.0, 3.0], np.float32)),
        const("cond", np.array([True, False, True], bool)),
    ]
    inputs = [vi("x", F, x.shape), vi("labels", I64, labels.shape)]
    outputs = [vi(n, F, None) for n in ("upper", "lower", "hot", "picked", "flat")]
    check(make_model(nodes, inputs, outputs, 14, inits), {"x": x, "labels": labels})


# -- casts ------------------------------------------------------------------------------------


def test_cast_to_int_and_back():
    """float -> int32 truncates toward zero; -> float again; -> bool; -> int64 output; CastLike."""
    x = np.array([[-2.7, -0.5, 0.0, 0.4], [1.5, 2.9, -3.1, 100.99]], np.float32)
    nodes = [
        helper.make_node("Cast", ["x"], ["i"], to=TensorProto.INT32),
        helper.make_node("Cast", ["i"], ["back"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BOOL),
        helper.make_node("Cast", ["i"], ["wide"], to=TensorProto.INT64),
        helper.make_node("CastLike", ["x", "like"], ["h"]),
    ]
    outputs = [
        vi("i", TensorProto.INT32, None),
        vi("back", F, None),
        vi("b", TensorProto.BOOL, None),
        vi("wide", I64, None),
        vi("h", TensorProto.FLOAT16, None),
    ]
    model = make_model(
        nodes,
        [vi("x", F, x.shape)],
        outputs,
        15,
        [const("like", np.zeros(1, np.float16))],
    )
    check(model, {"x": x})


# -- recurrent ---------------------------------------------------------------------------------


def _rnn_model(
    op: str,
    gates: int,
    direction: str,
    hidden: int,
    opset: int,
    outputs,
    layout: int = 0,
    **attrs,
):
    seq, batch, size = 5, 3, 4
    dirs = 2 if direction == "bidirectional" else 1
    x_shape = (batch, seq, size) if layout else (seq, batch, size)
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    inits = [
        const("W", randn(dirs, gates * hidden, size) * 0.5),
        const("R", randn(dirs, gates * hidden, hidden) * 0.5),
        const("B", randn(dirs, 2 * gates * hidden) * 0.5),
    ]
    inputs = [vi("x", F, x_shape), vi("h0", F, state)]
    names = ["x", "W", "R", "B", "", "h0"]
    feeds = {"x": randn(*x_shape), "h0": randn(*state)}
    if op == "LSTM":
        inputs.append(vi("c0", F, state))
        names.append("c0")
        feeds["c0"] = randn(*state)
    if layout:
        attrs["layout"] = layout
    node = helper.make_node(
        op, names, list(outputs), hidden_size=hidden, direction=direction, **attrs
    )
    model = make_model(
        [node], inputs, [vi(n, F, None) for n in outputs if n], opset, inits
    )
    return model, feeds


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_lstm(direction):
    model, feeds = _rnn_model("LSTM", 4, direction, 6, 14, ["Y", "Y_h", "Y_c"])
    check(model, feeds, rtol=1e-4, atol=1e-5)


def test_lstm_unused_outputs_are_none():
    model, feeds = _rnn_model("LSTM", 4, "bidirectional", 3, 14, ["", "Y_h"])
    result = check(model, feeds, rtol=1e-4, atol=1e-5)
    (op,) = [op for op in result.module.walk() if op.name == "top.lstm"]
    y, y_h, y_c = (str(r.type) for r in op.results)
    assert (y, y_c) == ("none", "none") and y_h != "none"


def test_lstm_layout1_against_reference():
    model, feeds = _rnn_model(
        "LSTM", 4, "bidirectional", 3, 14, ["Y", "Y_h", "Y_c"], layout=1
    )
    check(model, feeds, rtol=1e-4, atol=1e-5, reference=run_reference)


@pytest.mark.parametrize("linear_before_reset", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_gru(direction, linear_before_reset):
    model, feeds = _rnn_model(
        "GRU",
        3,
        direction,
        5,
        14,
        ["Y", "Y_h"],
        linear_before_reset=linear_before_reset,
    )
    check(model, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_rnn_unrolled(direction):
    model, feeds = _rnn_model("RNN", 1, direction, 4, 14, ["Y", "Y_h"])
    result = check(model, feeds, rtol=1e-4, atol=1e-5)
    assert "top.tanh" in op_names(result)


def test_rnn_layout1_against_reference():
    model, feeds = _rnn_model("RNN", 1, "reverse", 4, 14, ["Y", "Y_h"], layout=1)
    check(model, feeds, rtol=1e-4, atol=1e-5, reference=run_reference)


# -- errors -------------------------------------------------------------------------------------


def test_run_time_shape_is_an_error_naming_the_input():
    node = helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_node")
    model = make_model(
        [node], [vi("x", F, [2, 3]), vi("shape", I64, [2])], [vi("y", F, None)], 13
    )
    with pytest.raises(
        ImportRuleError,
        match=r"reshape_node.*Reshape, opset 13.*target shape \(input 1\) must be a constant",
    ):
        import_onnx(model)


def test_lstm_other_activations_are_an_error_naming_the_node():
    model, _ = _rnn_model(
        "LSTM", 4, "forward", 3, 14, ["Y"], activations=["Sigmoid", "Relu", "Tanh"]
    )
    model.graph.node[0].name = "my_lstm"
    with pytest.raises(ImportRuleError, match=r"my_lstm.*LSTM.*activations"):
        import_onnx(model)
