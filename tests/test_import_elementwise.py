"""Elementwise and activation ops: ONNX graphs imported to TOP and interpreted,
checked against onnxruntime (opset >= 7) or values computed by hand (opset 6)."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.frontend.onnx_model import ImportRuleError
from tpu_xdsl.kernels import ResultSpec, load_all
from tpu_xdsl.kernels.activation import erf
from tpu_xdsl.onnx_backend import TpuXdslBackend

KERNELS = load_all()
RNG = np.random.default_rng(0)


def value_info(name: str, elem_type: int, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, list(shape))


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


def run_ours(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    result = import_onnx(model)
    result.module.verify()  # every emitted op satisfies its IRDL constraints
    rep = TpuXdslBackend.prepare(model)
    return [np.asarray(o) for o in rep.run([feeds[n] for n in rep.input_names])]


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def assert_matches_ort(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], rtol=1e-5, atol=1e-6
) -> None:
    ours, theirs = run_ours(model, feeds), run_ort(model, feeds)
    assert len(ours) == len(theirs)
    for got, want in zip(ours, theirs):
        assert got.dtype == want.dtype and got.shape == want.shape
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(got, want)


# -- kernels ----------------------------------------------------------------------------


def test_erf_matches_math_erf():
    x = np.concatenate(
        [
            np.linspace(-6, 6, 200001),
            np.geomspace(1e-30, 1e-2, 200),
            -np.geomspace(1e-30, 1e-2, 200),
            [0.0, np.inf, -np.inf],
        ]
    ).astype(np.float32)
    want = np.array([math.erf(float(v)) for v in x])
    got = erf(x)
    assert got.dtype == np.float32
    assert np.max(np.abs(got - want)) < 1e-6
    small = np.abs(x) < 1e-2  # relative accuracy where erf(x) ~ 1.128 x
    np.testing.assert_allclose(got[small], want[small], rtol=1e-6)
    assert np.isnan(erf(np.array([np.nan], np.float32)))[0]


def test_round_is_half_to_even_and_kernels_keep_inputs():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6], np.float32)
    before = x.copy()
    spec = [ResultSpec(x.shape, np.dtype(np.float32))]
    (y,) = KERNELS["round"]([x], {}, spec)
    np.testing.assert_array_equal(y, [-2, -2, -0, 0, 2, 2, 3])
    for kind in (
        "relu",
        "sigmoid",
        "silu",
        "gelu",
        "mish",
        "softplus",
        "hard_swish",
        "elu",
        "clip",
        "erf",
        "exp",
    ):
        KERNELS[kind]([x], {}, spec)
    np.testing.assert_array_equal(x, before)


def test_fused_relu_on_add():
    a = np.array([-3.0, 1.0, 4.0, 9.0], np.float32)
    b = np.array([1.0, 1.0, 1.0, 1.0], np.float32)
    spec = [ResultSpec(a.shape, np.dtype(np.float32))]
    (plain,) = KERNELS["add"]([a, b], {}, spec)
    (relu,) = KERNELS["add"]([a, b], {"do_relu": True}, spec)
    (relu6,) = KERNELS["sub"]([a, -b], {"do_relu": True, "relu_limit": 6.0}, spec)
    np.testing.assert_array_equal(plain, [-2, 2, 5, 10])
    np.testing.assert_array_equal(relu, [0, 2, 5, 10])
    np.testing.assert_array_equal(relu6, [0, 2, 5, 6])


def test_gelu_kernel_against_formulas():
    x = np.linspace(-5, 5, 101).astype(np.float32)
    spec = [ResultSpec(x.shape, np.dtype(np.float32))]
    exact = np.array(
        [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)]
    )
    tanh = (
        0.5
        * x
        * (
            1
            + np.tanh(
                math.sqrt(2 / math.pi) * (x + 0.044715 * x.astype(np.float64) ** 3)
            )
        )
    )
    np.testing.assert_allclose(
        KERNELS["gelu"]([x], {}, spec)[0], exact, rtol=1e-6, atol=1e-6
    )
    np.testing.assert_allclose(
        KERNELS["gelu"]([x], {"approximate": "tanh"}, spec)[0],
        tanh,
        rtol=1e-6,
        atol=1e-6,
    )


# -- graphs against onnxruntime ---------------------------------------------------------


def test_float_chain_with_broadcasting_matches_ort():
    """Arithmetic, unary math and variadic ops chained at opset 13, with
    broadcasting and constant operands."""
    x = RNG.standard_normal((2, 3, 4, 5), dtype=np.float32)
    b = RNG.standard_normal((3, 1, 1), dtype=np.float32)
    nodes = [
        helper.make_node("Add", ["x", "b"], ["t0"]),
        helper.make_node("Mul", ["t0", "s"], ["t1"]),
        helper.make_node("Sigmoid", ["t1"], ["t2"]),
        helper.make_node("Sub", ["t2", "half"], ["t3"]),
        helper.make_node("Clip", ["t3", "lo", "hi"], ["t4"]),
        helper.make_node("Tanh", ["x"], ["t5"]),
        helper.make_node("Max", ["t4", "t5", "half"], ["t6"]),
        helper.make_node("Pow", ["t6", "two"], ["t7"]),
        helper.make_node("Div", ["t7", "s"], ["t8"]),
        helper.make_node("Exp", ["t8"], ["t9"]),
        helper.make_node("Log", ["t9"], ["t10"]),
        helper.make_node("Neg", ["t10"], ["t11"]),
        helper.make_node("Abs", ["t11"], ["t12"]),
        helper.make_node("Sqrt", ["t12"], ["t13"]),
        helper.make_node("Reciprocal", ["t13"], ["t14"]),
        helper.make_node("Erf", ["t1"], ["t15"]),
        helper.make_node("Sum", ["t14", "t15", "x"], ["y"]),
        helper.make_node("Mean", ["t15", "b"], ["m"]),
    ]
    inits = [
        helper.make_tensor("s", TensorProto.FLOAT, [5], [0.5, 1.0, 1.5, 2.0, -1.0]),
        helper.make_tensor("half", TensorProto.FLOAT, [1], [0.5]),
        helper.make_tensor("lo", TensorProto.FLOAT, [1], [-0.2]),
        helper.make_tensor("hi", TensorProto.FLOAT, [1], [0.3]),
        helper.make_tensor("two", TensorProto.FLOAT, [1], [2.0]),
    ]
    model = make_model(
        nodes,
        [
            value_info("x", TensorProto.FLOAT, x.shape),
            value_info("b", TensorProto.FLOAT, b.shape),
        ],
        [
            value_info("y", TensorProto.FLOAT, x.shape),
            value_info("m", TensorProto.FLOAT, x.shape),
        ],
        13,
        inits,
    )
    assert_matches_ort(model, {"x": x, "b": b})


@pytest.mark.parametrize(
    ("op", "opset", "attrs"),
    [
        ("Relu", 14, {}),
        ("LeakyRelu", 16, {"alpha": 0.2}),
        ("Elu", 22, {"alpha": 0.7}),
        ("Selu", 22, {}),
        ("Celu", 12, {"alpha": 2.0}),
        ("Celu", 12, {}),
        ("HardSigmoid", 22, {"alpha": 0.3, "beta": 0.4}),
        ("HardSwish", 22, {}),
        ("Softplus", 22, {}),
        ("Softsign", 22, {}),
        ("Mish", 22, {}),
        ("Gelu", 20, {}),
        ("Gelu", 20, {"approximate": "tanh"}),
        ("Swish", 24, {}),
        ("Swish", 24, {"alpha": 1.7}),
        ("ThresholdedRelu", 22, {"alpha": 0.5}),
        ("Floor", 13, {}),
        ("Ceil", 13, {}),
        ("Round", 22, {}),
        ("Sign", 13, {}),
        ("Sin", 22, {}),
        ("Cos", 22, {}),
        ("Clip", 6, {"min": -0.5, "max": 1.25}),
        ("Clip", 6, {"max": 0.25}),
    ],
)
def test_unary_activation_matches_ort(op, opset, attrs):
    x = (RNG.standard_normal((2, 3, 7), dtype=np.float32) * 3).astype(np.float32)
    x[0, 0, :4] = [0.5, -0.5, 1.5, 0.0]  # ties for Round, the threshold, the kink
    # onnxruntime runs no opset-6 model: Clip-6 covers opsets 6 to 10, so opset 7 tests it.
    opset = max(opset, 7)
    model = make_model(
        [helper.make_node(op, ["x"], ["y"], **attrs)],
        [value_info("x", TensorProto.FLOAT, x.shape)],
        [value_info("y", TensorProto.FLOAT, x.shape)],
        opset,
    )
    assert_matches_ort(model, {"x": x})


def test_prelu_per_channel_slope_matches_ort():
    x = RNG.standard_normal((2, 3, 4, 4), dtype=np.float32)
    slope = np.array([[[0.1]], [[0.2]], [[-0.3]]], np.float32)
    model = make_model(
        [helper.make_node("PRelu", ["x", "slope"], ["y"])],
        [
            value_info("x", TensorProto.FLOAT, x.shape),
            value_info("slope", TensorProto.FLOAT, slope.shape),
        ],
        [value_info("y", TensorProto.FLOAT, x.shape)],
        16,
    )
    assert_matches_ort(model, {"x": x, "slope": slope})


def test_clip_with_run_time_and_constant_bounds_matches_ort():
    """min(max(x, lo), hi): a run-time lo with a constant hi; lo > hi gives hi."""
    x = RNG.standard_normal((3, 5), dtype=np.float32)
    lo = np.array(-0.25, np.float32)
    nodes = [
        helper.make_node("Clip", ["x", "lo", "hi"], ["y"]),
        helper.make_node("Clip", ["x", "hi", "lo"], ["z"]),  # min 0.5 > max -0.25
        helper.make_node("Clip", ["x", "", "lo"], ["w"]),
    ]
    model = make_model(
        nodes,
        [
            value_info("x", TensorProto.FLOAT, x.shape),
            value_info("lo", TensorProto.FLOAT, []),
        ],
        [value_info(n, TensorProto.FLOAT, x.shape) for n in ("y", "z", "w")],
        13,
        [helper.make_tensor("hi", TensorProto.FLOAT, [1], [0.5])],
    )
    assert_matches_ort(model, {"x": x, "lo": lo})
    _, z, _ = run_ours(model, {"x": x, "lo": lo})
    np.testing.assert_array_equal(z, np.full_like(x, -0.25))


def test_integer_and_bool_graph_matches_ort():
    """int32 arithmetic (Div truncates toward zero, Mod takes the divisor's sign),
    comparisons to bool, logic, Where on int64, IsNaN/IsInf; every dtype as ONNX says."""
    a = np.array([[7, -7, 9, -9, 0, 100], [5, -5, 3, -3, 1, -100]], np.int32)
    b = np.array([2, 2, -4, -4, 3, 7], np.int32)
    f = np.array(
        [
            [0.5, np.nan, np.inf, -np.inf, -1.0, 2.0],
            [np.nan, 1.0, -np.inf, 3.0, 0.0, np.inf],
        ],
        np.float32,
    )
    nodes = [
        helper.make_node("Div", ["a", "b"], ["q"]),
        helper.make_node("Mod", ["a", "b"], ["r"]),
        helper.make_node("Mod", ["a", "b"], ["rf"], fmod=1),
        helper.make_node("Mul", ["q", "b"], ["qb"]),
        helper.make_node("Add", ["qb", "r"], ["back"]),
        helper.make_node("Sub", ["a", "b"], ["diff"]),
        helper.make_node("Max", ["diff", "b"], ["mx"]),
        helper.make_node("Min", ["a", "b", "diff"], ["mn"]),
        helper.make_node("Abs", ["diff"], ["ab"]),
        helper.make_node("Neg", ["ab"], ["ng"]),
        helper.make_node("Greater", ["a", "b"], ["gt"]),
        helper.make_node("LessOrEqual", ["q", "r"], ["le"]),
        helper.make_node("Equal", ["a", "back"], ["eq"]),
        helper.make_node("IsNaN", ["f"], ["nan"]),
        helper.make_node("IsInf", ["f"], ["inf"]),
        helper.make_node("IsInf", ["f"], ["ninf"], detect_positive=0),
        helper.make_node("Or", ["nan", "inf"], ["bad"]),
        helper.make_node("Not", ["bad"], ["good"]),
        helper.make_node("And", ["good", "gt"], ["keep"]),
        helper.make_node("Xor", ["keep", "le"], ["x"]),
        helper.make_node("Where", ["x", "a64", "big"], ["sel"]),
        helper.make_node("Relu", ["mn"], ["rl"]),
    ]
    outputs = [
        ("q", TensorProto.INT32), ("r", TensorProto.INT32), ("rf", TensorProto.INT32), ("eq", TensorProto.BOOL),
        ("mx", TensorProto.INT32), ("mn", TensorProto.INT32), ("ng", TensorProto.INT32), ("keep", TensorProto.BOOL),
        ("ninf", TensorProto.BOOL), ("x", TensorProto.BOOL), ("sel", TensorProto.INT64), ("rl", TensorProto.INT32),
    ]  # fmt: skip
    model = make_model(
        nodes,
        [
            value_info("a", TensorProto.INT32, a.shape),
            value_info("b", TensorProto.INT32, b.shape),
            value_info("f", TensorProto.FLOAT, f.shape),
            value_info("a64", TensorProto.INT64, a.shape),
        ],
        [value_info(n, t, a.shape) for n, t in outputs],
        14,
        [helper.make_tensor("big", TensorProto.INT64, [1], [1000])],
    )
    feeds = {"a": a, "b": b, "f": f, "a64": a.astype(np.int64) * 3}
    ours = run_ours(model, feeds)
    assert_matches_ort(model, feeds)
    q, r = ours[0], ours[1]
    np.testing.assert_array_equal(q[0], [3, -3, -2, 2, 0, 14])  # toward zero
    np.testing.assert_array_equal(r[0], [1, 1, -3, -1, 0, 2])  # sign of the divisor


@pytest.mark.parametrize(
    ("dtype", "elem"),
    [
        (np.int8, TensorProto.INT8),
        (np.uint8, TensorProto.UINT8),
        (np.int32, TensorProto.INT32),
        (np.int64, TensorProto.INT64),
    ],
)
def test_integer_clip_div_pow_keep_dtype(dtype, elem):
    x = np.array([[0, 1, 2, 3], [4, 5, 6, 7]], dtype)
    nodes = [
        helper.make_node("Clip", ["x", "lo", "hi"], ["c"]),
        helper.make_node("Div", ["x", "two"], ["d"]),
    ]
    with_pow = dtype in (np.int32, np.int64)  # Pow takes int32/int64 bases only
    if with_pow:
        nodes.append(helper.make_node("Pow", ["x", "e"], ["p"]))
    inits = [
        helper.make_tensor("lo", elem, [], [1]),
        helper.make_tensor("hi", elem, [], [5]),
        helper.make_tensor("e", TensorProto.FLOAT, [1], [3.0]),
        helper.make_tensor("two", elem, [1], [2]),
    ]
    names = "cdp" if with_pow else "cd"
    model = make_model(
        nodes,
        [value_info("x", elem, x.shape)],
        [value_info(n, elem, x.shape) for n in names],
        15,
        inits,
    )
    assert_matches_ort(model, {"x": x})
    outputs = run_ours(model, {"x": x})
    np.testing.assert_array_equal(outputs[0], [[1, 1, 2, 3], [4, 5, 5, 5]])
    np.testing.assert_array_equal(outputs[1], [[0, 0, 1, 1], [2, 2, 3, 3]])
    if with_pow:
        np.testing.assert_array_equal(outputs[2], x.astype(np.int64) ** 3)


def test_opset7_plain_numpy_broadcasting_matches_ort():
    """From opset 7 binary ops broadcast both ways, with no attribute."""
    x = RNG.standard_normal((4, 1, 3), dtype=np.float32)
    y = RNG.standard_normal((2, 1), dtype=np.float32)
    nodes = [
        helper.make_node("Add", ["x", "y"], ["s"]),
        helper.make_node("Less", ["x", "y"], ["lt"]),
        helper.make_node("Pow", ["s", "y"], ["p"]),
    ]
    model = make_model(
        nodes,
        [
            value_info("x", TensorProto.FLOAT, x.shape),
            value_info("y", TensorProto.FLOAT, y.shape),
        ],
        [
            value_info("s", TensorProto.FLOAT, (4, 2, 3)),
            value_info("lt", TensorProto.BOOL, (4, 2, 3)),
            value_info("p", TensorProto.FLOAT, (4, 2, 3)),
        ],
        7,
    )
    assert_matches_ort(model, {"x": x, "y": y})


# -- legacy forms (opset < 7): onnxruntime does not run them, values by hand --------------


def test_opset6_legacy_broadcast_with_axis():
    """broadcast=1 aligns B at `axis` (default: A's trailing dims); B may be
    a run-time value or a constant."""
    x = RNG.standard_normal((2, 3, 4, 5), dtype=np.float32)
    c = np.array([1.0, 2.0, 3.0], np.float32)  # per channel, axis=1
    hw = RNG.standard_normal((4, 5), dtype=np.float32)
    nodes = [
        helper.make_node("Add", ["x", "c"], ["t0"], broadcast=1, axis=1),
        helper.make_node("Mul", ["t0", "k"], ["t1"], broadcast=1, axis=1),
        helper.make_node("Sub", ["t1", "hw"], ["t2"], broadcast=1),
        helper.make_node("Div", ["t2", "t2"], ["ones"]),
        helper.make_node("Pow", ["t2", "e"], ["t3"], broadcast=1, axis=0),
        helper.make_node("Greater", ["t3", "c"], ["gt"], broadcast=1, axis=1),
        helper.make_node("Clip", ["t3"], ["y"], min=-1.0, max=4.0),
        helper.make_node("PRelu", ["x", "slope"], ["pr"]),
    ]
    inits = [
        helper.make_tensor(
            "k", TensorProto.FLOAT, [3, 4], np.arange(12, dtype=np.float32) / 4
        ),
        helper.make_tensor("e", TensorProto.FLOAT, [2], [2.0, 1.0]),
        helper.make_tensor("slope", TensorProto.FLOAT, [3], [0.5, 0.25, -1.0]),
    ]
    model = make_model(
        nodes,
        [
            value_info("x", TensorProto.FLOAT, x.shape),
            value_info("c", TensorProto.FLOAT, c.shape),
            value_info("hw", TensorProto.FLOAT, hw.shape),
        ],
        [value_info(n, TensorProto.FLOAT, x.shape) for n in ("y", "ones", "pr")]
        + [value_info("gt", TensorProto.BOOL, x.shape)],
        6,
        inits,
    )
    y, ones, pr, gt = run_ours(model, {"x": x, "c": c, "hw": hw})
    k = (np.arange(12, dtype=np.float32) / 4).reshape(3, 4)
    t2 = (x + c.reshape(1, 3, 1, 1)) * k.reshape(1, 3, 4, 1) - hw
    t3 = t2 ** np.array([2.0, 1.0], np.float32).reshape(2, 1, 1, 1)
    np.testing.assert_allclose(y, np.clip(t3, -1, 4), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(gt, t3 > c.reshape(1, 3, 1, 1))
    np.testing.assert_allclose(ones, np.ones_like(x), rtol=1e-6)
    # Before opset 7 a [C] slope is per channel (Caffe2's PRelu).
    slope = np.array([0.5, 0.25, -1.0], np.float32).reshape(1, 3, 1, 1)
    np.testing.assert_allclose(pr, np.where(x < 0, x * slope, x), rtol=1e-6)


def test_opset6_legacy_logical_and_equal():
    a = np.array([[True, False, True], [False, True, True]])
    b = np.array([True, False], dtype=bool)
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    nodes = [
        helper.make_node("And", ["a", "b"], ["and"], broadcast=1, axis=0),
        helper.make_node("Xor", ["a", "a"], ["xor"]),
        helper.make_node("Equal", ["x", "v"], ["eq"], broadcast=1, axis=0),
    ]
    model = make_model(
        nodes,
        [
            value_info("a", TensorProto.BOOL, a.shape),
            value_info("b", TensorProto.BOOL, b.shape),
            value_info("x", TensorProto.FLOAT, x.shape),
        ],
        [value_info(n, TensorProto.BOOL, a.shape) for n in ("and", "xor", "eq")],
        6,
        [helper.make_tensor("v", TensorProto.FLOAT, [2], [2.0, 4.0])],
    )
    land, lxor, eq = run_ours(model, {"a": a, "b": b, "x": x})
    np.testing.assert_array_equal(land, [[True, False, True], [False, False, False]])
    np.testing.assert_array_equal(lxor, np.zeros_like(a))
    np.testing.assert_array_equal(eq, [[False, True, False], [True, False, False]])


# -- errors ------------------------------------------------------------------------------


def test_opset6_mismatched_shapes_without_broadcast_is_an_error():
    model = make_model(
        [helper.make_node("Add", ["x", "y"], ["z"], name="add0")],
        [
            value_info("x", TensorProto.FLOAT, [2, 3]),
            value_info("y", TensorProto.FLOAT, [3]),
        ],
        [value_info("z", TensorProto.FLOAT, [2, 3])],
        6,
    )
    with pytest.raises(
        ImportRuleError, match=r"node 'add0' \(Add, opset 6\).*broadcast=1"
    ):
        import_onnx(model)


@pytest.mark.parametrize(
    ("node", "message"),
    [
        (
            helper.make_node("Gelu", ["x"], ["y"], name="g", approximate="erf"),
            r"node 'g' \(Gelu, opset 20\).*approximate 'erf'",
        ),
        (
            helper.make_node("Clip", ["x", "v"], ["y"], name="c"),
            r"node 'c' \(Clip, opset 20\).*min \(input 1\) must be a scalar",
        ),
    ],
)
def test_unsupported_attributes_name_the_node(node, message):
    model = make_model(
        [node],
        [value_info("x", TensorProto.FLOAT, [2, 3])],
        [value_info("y", TensorProto.FLOAT, [2, 3])],
        20,
        [helper.make_tensor("v", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])],
    )
    with pytest.raises(ImportRuleError, match=message):
        import_onnx(model)
