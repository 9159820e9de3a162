"""Convolution, pooling, normalization, matmul, softmax and reduction ops: ONNX
graphs imported to TOP and interpreted, checked against onnxruntime, or against
values computed by hand where onnxruntime does not run the form (old opsets)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.frontend.onnx_model import ImportRuleError
from tpu_xdsl.interp.runner import run_module
from tpu_xdsl.kernels import ResultSpec, load_all
from tpu_xdsl.onnx_backend import TpuXdslBackend

KERNELS = load_all()
RNG = np.random.default_rng(0)
F = TensorProto.FLOAT


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def value_info(name: str, elem_type: int, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, list(shape))


def output(name: str) -> onnx.ValueInfoProto:
    """A graph output by name only: ONNX shape inference gives its type and shape."""
    return onnx.ValueInfoProto(name=name)


def make_model(
    nodes, inputs, outputs, opset: int, initializers=None
) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    # onnxruntime reads IR version <= 10.
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)],
        ir_version=min(10, onnx.IR_VERSION),
    )
    if all(o.type.HasField("tensor_type") for o in model.graph.output):
        return model
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def run_ours(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], backend: bool = True
) -> list[np.ndarray]:
    """Import (IR verified) and interpret as imported, and again through the ONNX
    backend (checked model, canonicalized); both must agree."""
    result = import_onnx(model)
    result.module.verify()
    raw = run_module(result.module, feeds, result.weights)
    assert list(raw) == result.output_names  # outputs keep their ONNX tensor names
    outputs = [raw[name] for name in raw]
    if not backend:
        return outputs
    rep = TpuXdslBackend.prepare(model)
    canonical = [np.asarray(o) for o in rep.run([feeds[n] for n in rep.input_names])]
    for a, b in zip(outputs, canonical, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    return outputs


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def assert_matches_ort(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], rtol=1e-5, atol=1e-5
) -> None:
    ours, theirs = run_ours(model, feeds), run_ort(model, feeds)
    assert len(ours) == len(theirs)
    for i, (got, want) in enumerate(zip(ours, theirs)):
        assert got.dtype == want.dtype, f"output {i}: {got.dtype} vs {want.dtype}"
        assert got.shape == want.shape, f"output {i}: {got.shape} vs {want.shape}"
        if want.dtype.kind == "f":
            np.testing.assert_allclose(
                got, want, rtol=rtol, atol=atol, err_msg=f"output {i}"
            )
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"output {i}")


def top_ops(model: onnx.ModelProto) -> list[str]:
    """The computing TOP ops of the imported (not canonicalized) module, in order."""
    module = import_onnx(model).module
    skip = {"top.input", "top.weight", "top.none", "func.return"}
    return [
        op.name
        for op in module.walk()
        if op.name.startswith("top.") and op.name not in skip
    ]


def single(
    op_type: str,
    x_shape,
    y_shape,
    opset: int,
    inputs=("x",),
    outputs=("y",),
    inits=None,
    **attrs,
):
    """A one-node model whose first input `x` is fed and the others are initializers."""
    node = helper.make_node(op_type, list(inputs), list(outputs), **attrs)
    y_infos = [
        value_info(n, F, y_shape) if i == 0 and y_shape is not None else output(n)
        for i, n in enumerate(outputs)
    ]
    return make_model([node], [value_info("x", F, x_shape)], y_infos, opset, inits)


# -- convolution ------------------------------------------------------------------------


def test_conv_bn_relu_matches_ort():
    inits = {
        "w": randn(8, 3, 3, 3),
        "b": randn(8),
        "scale": randn(8),
        "shift": randn(8),
        "mean": randn(8),
        "var": RNG.uniform(0.5, 2.0, 8).astype(np.float32),
    }
    nodes = [
        helper.make_node(
            "Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]
        ),
        helper.make_node(
            "BatchNormalization",
            ["c", "scale", "shift", "mean", "var"],
            ["bn"],
            epsilon=1e-3,
        ),
        helper.make_node("Relu", ["bn"], ["y"]),
    ]
    model = make_model(
        nodes,
        [value_info("x", F, [2, 3, 9, 9])],
        [value_info("y", F, [2, 8, 5, 5])],
        13,
        inits,
    )
    assert top_ops(model) == ["top.conv", "top.batch_norm", "top.relu"]
    assert_matches_ort(model, {"x": randn(2, 3, 9, 9)})


@pytest.mark.parametrize("multiplier", [1, 2])
def test_depthwise_conv_with_dilation_matches_ort(multiplier):
    c = 6
    model = single("Conv", [1, c, 11, 10], None, 13, ("x", "w", "b"),
                   inits={"w": randn(c * multiplier, 1, 3, 3), "b": randn(c * multiplier)},
                   group=c, strides=[2, 1], dilations=[2, 1], pads=[1, 2, 0, 1])  # fmt: skip
    assert_matches_ort(model, {"x": randn(1, c, 11, 10)})


def test_grouped_conv_and_auto_pad_match_ort():
    model = single("Conv", [2, 4, 7, 8], None, 11, ("x", "w"), inits={"w": randn(6, 2, 3, 2)},
                   group=2, strides=[2, 3], auto_pad="SAME_LOWER")  # fmt: skip
    assert_matches_ort(model, {"x": randn(2, 4, 7, 8)})


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs"),
    [
        ((2, 3, 17), (5, 3, 4), {"strides": [3], "pads": [2, 1], "dilations": [2]}),
        (
            (1, 2, 5, 6, 7),
            (4, 2, 3, 2, 3),
            {"strides": [1, 2, 2], "pads": [1, 0, 1, 1, 1, 0]},
        ),
        ((1, 8, 5, 5), (8, 8, 1, 1), {}),  # the pointwise GEMM path
    ],
    ids=["conv1d", "conv3d", "pointwise"],
)
def test_conv_1d_3d_and_pointwise_match_ort(x_shape, w_shape, attrs):
    model = single("Conv", list(x_shape), None, 13, ("x", "w", "b"),
                   inits={"w": randn(*w_shape), "b": randn(w_shape[0])}, **attrs)  # fmt: skip
    assert_matches_ort(model, {"x": randn(*x_shape)})


def test_conv_in_blocks_of_output_rows_matches_ort(monkeypatch):
    # A tiny im2col limit forces the blocked path (1-2 output rows per block).
    from tpu_xdsl.kernels import conv_pool

    monkeypatch.setattr(conv_pool, "_COLS_LIMIT", 4000)
    model = single("Conv", [2, 6, 23, 17], None, 13, ("x", "w"), inits={"w": randn(4, 3, 3, 2)},
                   strides=[2, 1], pads=[1, 0, 2, 1], dilations=[2, 1], group=2)  # fmt: skip
    assert_matches_ort(model, {"x": randn(2, 6, 23, 17)})


def test_conv_with_run_time_filter_matches_ort():
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    model = make_model([node], [value_info("x", F, [1, 2, 4, 4]), value_info("w", F, [3, 2, 3, 3])],
                       [value_info("y", F, [1, 3, 4, 4])], 13)  # fmt: skip
    assert_matches_ort(model, {"x": randn(1, 2, 4, 4), "w": randn(3, 2, 3, 3)})


@pytest.mark.parametrize(
    "attrs",
    [
        {"strides": [2, 2]},
        {"strides": [2, 2], "pads": [1, 0, 1, 1], "output_padding": [1, 1]},
        {"strides": [2, 3], "dilations": [2, 1], "group": 2},
        {"strides": [2, 2], "output_shape": [10, 9]},
        {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
        {"strides": [3, 2], "auto_pad": "SAME_LOWER"},
    ],
    ids=[
        "stride2",
        "pads_output_padding",
        "dilated_grouped",
        "output_shape",
        "same_upper",
        "same_lower",
    ],
)
def test_conv_transpose_stride2_matches_ort(attrs):
    w = randn(4, 3, 3, 3)
    model = single("ConvTranspose", [2, 4, 4, 5], None, 13, ("x", "w", "b"),
                   inits={"w": w, "b": randn(3 * attrs.get("group", 1))}, **attrs)  # fmt: skip
    assert top_ops(model) == ["top.deconv"]
    assert_matches_ort(model, {"x": randn(2, 4, 4, 5)})


def test_conv_transpose_1d_by_hand():
    # x = [1, 2], w = [1, 10, 100], stride 2: y[2i + k] += x[i] * w[k].
    model = single("ConvTranspose", [1, 1, 2], [1, 1, 5], 13, ("x", "w"),
                   inits={"w": np.array([[[1, 10, 100]]], np.float32)}, strides=[2])  # fmt: skip
    (y,) = run_ours(model, {"x": np.array([[[1, 2]]], np.float32)})
    np.testing.assert_array_equal(y, [[[1, 10, 102, 20, 200]]])


# -- pooling ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
        ("MaxPool", {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [1, 1, 0, 1], "dilations": [2, 1]}),
        ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
        ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
        ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1,
                         "count_include_pad": 1}),
        ("AveragePool", {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1]}),
        ("AveragePool", {"kernel_shape": [2, 2], "dilations": [2, 2], "ceil_mode": 1, "strides": [2, 2]}),
        ("LpPool", {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 0, 0]}),
        ("LpPool", {"kernel_shape": [3, 2], "p": 3}),
    ],
)  # fmt: skip
def test_pooling_matches_ort(op, attrs):
    opset = 19 if "dilations" in attrs and op == "AveragePool" else 13
    model = single(op, [2, 3, 8, 9], None, opset, **attrs)
    assert_matches_ort(model, {"x": randn(2, 3, 8, 9)})


def test_max_pool_ceil_mode_shape_and_values_by_hand():
    # 5 columns, kernel 2, stride 2, ceil_mode: windows [0,1], [2,3], [4] -> 3 outputs.
    x = np.arange(5, dtype=np.float32).reshape(1, 1, 1, 5)
    model = single(
        "MaxPool",
        [1, 1, 1, 5],
        None,
        13,
        kernel_shape=[1, 2],
        strides=[1, 2],
        ceil_mode=1,
    )
    (y,) = run_ours(model, {"x": -x})
    np.testing.assert_array_equal(y, [[[[-0.0, -2.0, -4.0]]]])


@pytest.mark.parametrize(
    ("op", "attrs"),
    [("GlobalAveragePool", {}), ("GlobalMaxPool", {}), ("GlobalLpPool", {}), ("GlobalLpPool", {"p": 1}),
     ("GlobalLpPool", {"p": 3})],
)  # fmt: skip
def test_global_pooling_matches_ort(op, attrs):
    model = single(op, [2, 5, 4, 3], [2, 5, 1, 1], 13, **attrs)
    assert_matches_ort(model, {"x": randn(2, 5, 4, 3)}, rtol=1e-5)


def test_max_pool_on_uint8_keeps_dtype():
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2])
    model = make_model([node], [value_info("x", TensorProto.UINT8, [1, 2, 3, 3])],
                       [value_info("y", TensorProto.UINT8, [1, 2, 2, 2])], 12)  # fmt: skip
    assert_matches_ort(
        model, {"x": RNG.integers(0, 256, (1, 2, 3, 3)).astype(np.uint8)}
    )


def test_max_pool_indices_output_is_an_error_when_used():
    model = single(
        "MaxPool", [1, 1, 4, 4], None, 12, outputs=("y", "indices"), kernel_shape=[2, 2]
    )
    with pytest.raises(ImportRuleError, match="MaxPool, opset 12.*Indices"):
        import_onnx(model)


# -- normalization ----------------------------------------------------------------------


def test_layer_norm_with_mean_and_inv_std_dev_matches_ort():
    model = single("LayerNormalization", [2, 3, 4, 5], None, 17, ("x", "s", "b"), ("y", "mean", "inv_std"),
                   inits={"s": randn(4, 5), "b": randn(4, 5)}, axis=-2, epsilon=1e-3)  # fmt: skip
    assert_matches_ort(model, {"x": randn(2, 3, 4, 5)})


def test_layer_norm_without_bias_matches_ort():
    model = single(
        "LayerNormalization", [3, 8], [3, 8], 17, ("x", "s"), inits={"s": randn(8)}
    )
    assert top_ops(model) == ["top.layer_norm"]
    assert_matches_ort(model, {"x": randn(3, 8)})


@pytest.mark.parametrize(("op", "opset", "attrs", "inits"), [
    ("InstanceNormalization", 6, {"epsilon": 1e-3}, {"s": randn(3), "b": randn(3)}),
    ("GroupNormalization", 21, {"num_groups": 3}, {"s": randn(6), "b": randn(6)}),
    ("LRN", 13, {"size": 3, "alpha": 1e-2, "beta": 0.6, "bias": 2.0}, {}),
    ("LRN", 13, {"size": 5}, {}),
])  # fmt: skip
def test_normalization_matches_ort(op, opset, attrs, inits):
    channels = 6 if op != "InstanceNormalization" else 3
    shape = [2, channels, 4, 5]
    model = single(op, shape, shape, opset, ("x", *inits), inits=inits, **attrs)
    assert_matches_ort(model, {"x": randn(2, channels, 4, 5) * 3}, rtol=1e-4, atol=1e-5)


def test_lrn_even_size_by_hand():
    # size 2 sums channels c and c + 1 (onnxruntime only takes odd sizes):
    # y = x / (1 + 0.5 / 2 * sum)^1.
    x = np.array([[[[1.0]], [[2.0]], [[3.0]]]], np.float32)
    model = single(
        "LRN", [1, 3, 1, 1], [1, 3, 1, 1], 13, size=2, alpha=0.5, beta=1.0, bias=1.0
    )
    (y,) = run_ours(model, {"x": x})
    np.testing.assert_allclose(
        y.reshape(-1),
        [1 / (1 + 0.25 * 5), 2 / (1 + 0.25 * 13), 3 / (1 + 0.25 * 9)],
        rtol=1e-6,
    )


def test_group_norm_opset18_scale_per_group_by_hand():
    # Opset 18 has one scale/bias per group: y = normalized(group) * s[g] + b[g].
    x = np.array([[[1.0], [3.0], [10.0], [20.0]]], np.float32)  # N=1, C=4, 2 groups
    model = single("GroupNormalization", [1, 4, 1], [1, 4, 1], 18, ("x", "s", "b"),
                   inits={"s": np.array([2, 3], np.float32), "b": np.array([0, 1], np.float32)},
                   num_groups=2, epsilon=0.0)  # fmt: skip
    # onnx's checker calls GroupNormalization-18 deprecated, so not through the backend.
    (y,) = run_ours(model, {"x": x}, backend=False)
    np.testing.assert_allclose(y.reshape(-1), [-2, 2, -3 + 1, 3 + 1], rtol=1e-6)


def test_batch_norm_opset6_spatial0_by_hand():
    # spatial = 0: statistics per activation (C x W here), y = (x - m) / sqrt(v + eps) * s + b.
    s, b = (
        np.array([[1, 2], [3, 4]], np.float32),
        np.array([[0, 1], [2, 3]], np.float32),
    )
    m, v = (
        np.array([[1, 1], [0, 0]], np.float32),
        np.array([[4, 1], [1, 16]], np.float32),
    )
    model = single("BatchNormalization", [1, 2, 2], [1, 2, 2], 6, ("x", "s", "b", "m", "v"),
                   inits={"s": s, "b": b, "m": m, "v": v}, spatial=0, epsilon=0.0, is_test=1)  # fmt: skip
    x = np.array([[[3, 3], [2, 4]]], np.float32)
    (y,) = run_ours(model, {"x": x})
    np.testing.assert_allclose(
        y, [[[1 * 2 / 2 + 0, 2 * 2 / 1 + 1], [3 * 2 / 1 + 2, 4 * 4 / 4 + 3]]]
    )


def test_batch_norm_training_mode_is_an_error():
    model = single("BatchNormalization", [1, 2, 2], [1, 2, 2], 15, ("x", "s", "b", "m", "v"),
                   inits={k: np.ones(2, np.float32) for k in "sbmv"}, training_mode=1)  # fmt: skip
    with pytest.raises(ImportRuleError, match="training_mode"):
        import_onnx(model)


def test_mean_variance_and_lp_normalization_match_ort():
    nodes = [
        helper.make_node("MeanVarianceNormalization", ["x"], ["mvn"], axes=[1, 3]),
        helper.make_node("LpNormalization", ["x"], ["l1"], axis=1, p=1),
        helper.make_node("LpNormalization", ["x"], ["l2"]),
    ]
    outs = [value_info(n, F, [2, 3, 4, 5]) for n in ("mvn", "l1", "l2")]
    model = make_model(nodes, [value_info("x", F, [2, 3, 4, 5])], outs, 13)
    assert_matches_ort(model, {"x": randn(2, 3, 4, 5)}, rtol=1e-4)


# -- matmul and Gemm --------------------------------------------------------------------


def test_gemm_trans_b_alpha_beta_folds_into_weights_and_matches_ort():
    model = single("Gemm", [4, 6], [4, 5], 13, ("x", "w", "c"), inits={"w": randn(5, 6), "c": randn(5)},
                   transB=1, alpha=0.5, beta=2.0)  # fmt: skip
    assert top_ops(model) == ["top.matmul"]
    assert_matches_ort(model, {"x": randn(4, 6)})


def test_gemm_with_run_time_operands_matches_ort():
    node = helper.make_node(
        "Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=-1.5, beta=0.25
    )
    model = make_model([node], [value_info("a", F, [6, 4]), value_info("b", F, [5, 6]), value_info("c", F, [4, 1])],
                       [value_info("y", F, [4, 5])], 11)  # fmt: skip
    assert_matches_ort(model, {"a": randn(6, 4), "b": randn(5, 6), "c": randn(4, 1)})


def test_gemm_opset9_scalar_bias_matches_ort():
    model = single(
        "Gemm",
        [3, 4],
        [3, 2],
        9,
        ("x", "w", "c"),
        inits={"w": randn(4, 2), "c": randn(1)},
        beta=3.0,
    )
    assert_matches_ort(model, {"x": randn(3, 4)})


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [((2, 3, 4), (4, 5)), ((4,), (2, 4, 3)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (4,))],
)
def test_matmul_broadcasting_matches_ort(a_shape, b_shape):
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    model = make_model(
        [node],
        [value_info("a", F, a_shape), value_info("b", F, b_shape)],
        [output("y")],
        13,
    )
    assert_matches_ort(model, {"a": randn(*a_shape), "b": randn(*b_shape)})


def test_integer_matmul_keeps_dtype():
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    i32 = TensorProto.INT32
    model = make_model(
        [node],
        [value_info("a", i32, [2, 3]), value_info("b", i32, [3, 2])],
        [value_info("y", i32, [2, 2])],
        13,
    )
    feeds = {
        "a": RNG.integers(-50, 50, (2, 3)).astype(np.int32),
        "b": RNG.integers(-50, 50, (3, 2)).astype(np.int32),
    }
    assert_matches_ort(model, feeds)


# -- softmax family ---------------------------------------------------------------------


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
def test_opset9_softmax_on_axis1_of_3d_flattens(op):
    model = single(op, [2, 3, 4], [2, 3, 4], 9, axis=1)
    assert top_ops(model)[0] == "top.reshape" and top_ops(model)[-1] == "top.reshape"
    x = randn(2, 3, 4)
    x[0, 1, 2] = x[0, 2, 3] = x[0].max() + 1  # a tie for Hardmax: the first one wins
    assert_matches_ort(model, {"x": x})
    if (
        op == "Softmax"
    ):  # by hand: each batch row of 12 values sums to 1 (not each axis-1 column)
        (y,) = run_ours(model, {"x": x})
        np.testing.assert_allclose(y.reshape(2, -1).sum(axis=1), [1, 1], rtol=1e-6)


@pytest.mark.parametrize(("op", "opset", "axis"), [("Softmax", 13, 1), ("LogSoftmax", 13, 0), ("Softmax", 11, -1),
                                                   ("Hardmax", 13, -2), ("LogSoftmax", 1, 2)])  # fmt: skip
def test_softmax_family_matches_ort(op, opset, axis):
    model = single(op, [2, 3, 4], [2, 3, 4], opset, axis=axis)
    assert_matches_ort(model, {"x": randn(2, 3, 4) * 5})


# -- reductions, arg, topk --------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "opset", "axes", "keepdims"),
    [
        ("ReduceMean", 13, [1, -1], 1),
        ("ReduceSum", 13, [0], 0),
        ("ReduceSum", 11, [2], 1),
        ("ReduceMax", 18, [-2], 0),
        ("ReduceMin", 13, None, 1),
        ("ReduceProd", 13, [1], 1),
        ("ReduceL1", 18, [0, 2], 0),
        ("ReduceL2", 13, [1], 1),
        ("ReduceLogSumExp", 18, [2], 1),
        ("ReduceSumSquare", 13, [0, 1, 2], 0),
        ("ReduceLogSum", 18, [1], 1),
    ],
)
def test_reduce_matches_ort(op, opset, axes, keepdims):
    from_input = axes is not None and opset >= (13 if op == "ReduceSum" else 18)
    inits = {"axes": np.array(axes, np.int64)} if from_input else None
    attrs = {"keepdims": keepdims}
    if axes is not None and not from_input:
        attrs["axes"] = axes
    model = single(
        op,
        [3, 4, 5],
        None,
        opset,
        ("x", "axes") if from_input else ("x",),
        inits=inits,
        **attrs,
    )
    x = RNG.uniform(0.5, 1.5, (3, 4, 5)).astype(np.float32)
    assert_matches_ort(model, {"x": x}, rtol=1e-5)


def test_reduce_sum_noop_with_empty_axes_is_identity():
    model = single("ReduceSum", [2, 3], [2, 3], 13, noop_with_empty_axes=1)
    assert top_ops(model) == ["top.reshape"]
    assert_matches_ort(model, {"x": randn(2, 3)})


def test_reduce_max_on_bool_keeps_dtype():
    node = helper.make_node("ReduceMax", ["x"], ["y"], keepdims=0)
    model = make_model(
        [node],
        [value_info("x", TensorProto.BOOL, [2, 3])],
        [value_info("y", TensorProto.BOOL, [])],
        20,
    )
    assert_matches_ort(
        model, {"x": np.array([[True, False, False], [False, False, False]])}
    )


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_select_last_index_matches_ort(op, last):
    model = single(op, [3, 4], None, 13, axis=-1, keepdims=0, select_last_index=last)
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [0, -1, 5, -1]], np.float32)
    assert_matches_ort(model, {"x": x})
    (y,) = run_ours(model, {"x": x})
    by_hand = {
        ("ArgMax", 0): [1, 0, 2],
        ("ArgMax", 1): [2, 3, 2],
        ("ArgMin", 0): [3, 0, 1],
        ("ArgMin", 1): [3, 3, 3],
    }
    np.testing.assert_array_equal(y, by_hand[op, last])


def test_topk_ties_keep_the_lower_index_first():
    x = np.array([[3, 1, 3, 2, 1, 3]], np.float32)
    for largest, values, indices in (
        (1, [3, 3, 3, 2], [0, 2, 5, 3]),
        (0, [1, 1, 2, 3], [1, 4, 3, 0]),
    ):
        model = single("TopK", [1, 6], None, 11, ("x", "k"), ("values", "indices"),
                       inits={"k": np.array([4], np.int64)}, largest=largest)  # fmt: skip
        got_values, got_indices = run_ours(model, {"x": x})
        np.testing.assert_array_equal(got_values, [values])
        np.testing.assert_array_equal(got_indices, [indices])
        assert got_indices.dtype == np.int64
        assert_matches_ort(model, {"x": x})


def test_topk_axis0_opset1_attribute_and_int64_values():
    model = single("TopK", [5, 3], None, 1, outputs=("values", "indices"), k=2, axis=0)
    (values, indices) = run_ours(
        model, {"x": np.arange(15, dtype=np.float32).reshape(5, 3)}
    )
    np.testing.assert_array_equal(values, [[12, 13, 14], [9, 10, 11]])
    np.testing.assert_array_equal(indices, [[4, 4, 4], [3, 3, 3]])
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=-1)
    model = make_model([node], [value_info("x", TensorProto.INT64, [2, 5])],
                       [output("values"), output("indices")],
                       11, {"k": np.array([3], np.int64)})  # fmt: skip
    assert_matches_ort(model, {"x": RNG.integers(-100, 100, (2, 5))})


def test_topk_needs_a_constant_k():
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"])
    model = make_model([node], [value_info("x", F, [2, 5]), value_info("k", TensorProto.INT64, [1])],
                       [output("values"), output("indices")], 11)  # fmt: skip
    with pytest.raises(ImportRuleError, match="TopK, opset 11.*K .*constant"):
        import_onnx(model)


# -- identities -------------------------------------------------------------------------


def test_dropout_and_identity_are_same_shape_reshapes():
    nodes = [
        helper.make_node("Dropout", ["x", "ratio"], ["d", "mask"]),
        helper.make_node("Identity", ["d"], ["y"]),
    ]
    outs = [value_info("y", F, [2, 3]), value_info("mask", TensorProto.BOOL, [2, 3])]
    # The mask is all true without training (ONNX's reference; onnxruntime before opset 12 says false).
    model = make_model(
        nodes,
        [value_info("x", F, [2, 3])],
        outs,
        13,
        {"ratio": np.array(0.3, np.float32)},
    )
    assert top_ops(model) == ["top.reshape", "top.reshape"]
    x = randn(2, 3)
    y, mask = run_ours(model, {"x": x})
    np.testing.assert_array_equal(y, x)
    assert mask.dtype == np.bool_ and mask.all()
    assert_matches_ort(model, {"x": x})


# -- kernels ----------------------------------------------------------------------------


def test_kernels_do_not_modify_their_inputs():
    x = randn(1, 4, 6, 6)
    cases = [
        (
            "conv",
            [x, randn(4, 1, 3, 3), randn(4)],
            {"kernel_shape": [3, 3], "group": 4},
            [(1, 4, 4, 4)],
        ),
        (
            "conv",
            [x, randn(2, 4, 1, 1), randn(2)],
            {"kernel_shape": [1, 1]},
            [(1, 2, 6, 6)],
        ),
        (
            "deconv",
            [x, randn(4, 2, 2, 2), randn(2)],
            {"kernel_shape": [2, 2], "strides": [2, 2]},
            [(1, 2, 12, 12)],
        ),
        ("avg_pool", [x], {"kernel_shape": [6, 6]}, [(1, 4, 1, 1)]),
        ("max_pool", [x], {"kernel_shape": [2, 2]}, [(1, 4, 5, 5)]),
        ("batch_norm", [x, *(np.ones(4, np.float32) for _ in range(4))], {}, [x.shape]),
        ("layer_norm", [x, None, None], {"axis": 1}, [x.shape]),
        ("softmax", [x], {"axis": 1}, [x.shape]),
        ("log_softmax", [x], {"axis": 1}, [x.shape]),
        ("reduce", [x], {"mode": "log_sum_exp", "axes": [1]}, [(1, 1, 6, 6)]),
        ("topk", [x], {"k": 2}, [(1, 4, 6, 2), (1, 4, 6, 2)]),
        ("matmul", [x, randn(6, 3), randn(3)], {}, [(1, 4, 6, 3)]),
    ]
    for kind, inputs, attrs, shapes in cases:
        before = [None if a is None else a.copy() for a in inputs]
        specs = [
            ResultSpec(s, np.dtype(np.int64 if kind == "topk" and i else np.float32))
            for i, s in enumerate(shapes)
        ]
        outputs = KERNELS[kind](inputs, attrs, specs)
        for out, spec in zip(outputs, specs):
            assert out.shape == spec.shape, kind
        for a, b in zip(inputs, before):
            if a is not None:
                np.testing.assert_array_equal(a, b, err_msg=kind)


def test_avg_pool_kernel_counts_taps_by_hand():
    # 1x3 input, kernel 2, stride 2, pads [1, 1] -> windows [pad, x0] and [x1, x2];
    # count_include_pad counts the pad: divisors 2, 2; without: 1, 2.
    x = np.array([[[[2.0, 4.0, 6.0]]]], np.float32)
    spec = [ResultSpec((1, 1, 1, 2), np.dtype(np.float32))]
    for include, want in ((True, [1.0, 5.0]), (False, [2.0, 5.0])):
        attrs = {
            "kernel_shape": [1, 2],
            "strides": [1, 2],
            "pads": [0, 1, 0, 1],
            "count_include_pad": include,
        }
        (y,) = KERNELS["avg_pool"]([x], attrs, spec)
        np.testing.assert_array_equal(y.reshape(-1), want)


@pytest.mark.parametrize("opset", [11, 14])
@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum_matches_ort_and_a_hand_computed_case(opset, exclusive, reverse):
    """CumSum along a constant axis (-1 here), exclusive and reverse, on floats; by hand on
    [1, 2, 3, 4]: inclusive 1 3 6 10, exclusive 0 1 3 6, reverse 10 9 7 4, both 9 7 4 0."""
    model = single("CumSum", [2, 4], None, opset, ("x", "axis"), inits={"axis": np.array(-1, np.int64)},
                   exclusive=exclusive, reverse=reverse)
    x = np.array([[1, 2, 3, 4], [0.5, -1, 2, 8]], np.float32)
    (y,) = run_ours(model, {"x": x})
    by_hand = {(0, 0): [1, 3, 6, 10], (1, 0): [0, 1, 3, 6], (0, 1): [10, 9, 7, 4], (1, 1): [9, 7, 4, 0]}
    np.testing.assert_array_equal(y[0], by_hand[exclusive, reverse])
    assert_matches_ort(model, {"x": RNG.standard_normal((2, 4)).astype(np.float32)})


def test_cumsum_of_an_int64_mask_gives_int64_position_ids():
    """position_ids = cumsum(attention_mask, -1) * mask, as text models compute them."""
    node = helper.make_node("CumSum", ["mask", "axis"], ["y"])
    model = make_model([node], [value_info("mask", TensorProto.INT64, [1, 6])], [output("y")], 14,
                       {"axis": np.array(1, np.int64)})
    mask = np.array([[1, 1, 1, 1, 0, 0]], np.int64)
    (y,) = run_ours(model, {"mask": mask})
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, [[1, 2, 3, 4, 4, 4]])
    assert_matches_ort(model, {"mask": mask})
