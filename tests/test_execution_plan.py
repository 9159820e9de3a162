"""The execution plan (interp/plan.py) computes what xDSL's interpreter computes, calls
listeners alike, and the channels-last depthwise conv sums each output as the
definition does: product by product, in tap order, in the input's dtype."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.interpreter import Interpreter

from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.interp.runner import ModuleRunner, TensorCapture
from tpu_xdsl.kernels.conv_pool import _depthwise_2d_channels_last, _depthwise_2d_planar, conv_sum
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.weights import attach_weights, weights_of

RNG = np.random.default_rng(0)


class Events(Interpreter.Listener):
    """Every listener call, in order, with the op's name and the values' count."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, int]] = []

    def will_interpret_op(self, op, args) -> None:
        self.events.append(("will", op.name, len(args)))

    def did_interpret_op(self, op, results) -> None:
        self.events.append(("did", op.name, len(results)))


def mobile_block() -> onnx.ModelProto:
    """A MobileNet-style block: 1x1 conv, depthwise 5x5 conv, hard-swish, add, global pool."""
    c, h, w = 24, 3, 20
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["pw"], kernel_shape=[1, 1]),
        helper.make_node("Conv", ["pw", "w2", "b2"], ["dw"], kernel_shape=[5, 5], pads=[2, 2, 2, 2], group=c),
        helper.make_node("HardSwish", ["dw"], ["hs"]),
        helper.make_node("Add", ["hs", "pw"], ["sum"]),
        helper.make_node("GlobalAveragePool", ["sum"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(RNG.standard_normal((c, 8, 1, 1)).astype(np.float32), "w1"),
        numpy_helper.from_array(RNG.standard_normal(c).astype(np.float32), "b1"),
        numpy_helper.from_array(RNG.standard_normal((c, 1, 5, 5)).astype(np.float32), "w2"),
        numpy_helper.from_array(RNG.standard_normal(c).astype(np.float32), "b2"),
    ]
    graph = helper.make_graph(
        nodes, "block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, h, w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 1, 1])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_plan_equals_the_interpreter_tensor_for_tensor_and_calls_listeners_alike():
    model = mobile_block()
    result = import_onnx(model, "block", [[1, 8, 3, 20]])
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    runner = ModuleRunner(result.module, weights_of(result.module))
    assert runner.plan is not None
    feeds = {"x": RNG.standard_normal((1, 8, 3, 20)).astype(np.float32)}

    planned, interpreted = TensorCapture(), TensorCapture()
    planned_events, interpreted_events = Events(), Events()
    outputs = runner.run(feeds, [planned, planned_events])
    reference = runner.interpret(runner.signature.arrange(feeds), [interpreted, interpreted_events])

    assert planned_events.events == interpreted_events.events
    assert planned.tensors.keys() == interpreted.tensors.keys()
    for name, value in planned.tensors.items():
        assert np.array_equal(value, interpreted.tensors[name]), name
    assert np.array_equal(outputs["y"], np.asarray(reference[0]))
    # and the block computes what onnxruntime computes
    expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_allclose(outputs["y"], expected, rtol=1e-5, atol=1e-5)


def sequential_depthwise(xp: np.ndarray, w: np.ndarray, strides, dilations, out_hw) -> np.ndarray:
    """The definition: per output, the taps' products added one by one in tap order."""
    n, c = xp.shape[:2]
    kh, kw = w.shape[2:]
    oh, ow = out_hw
    y = np.zeros((n, c, oh, ow), dtype=xp.dtype)
    for t in range(kh * kw):
        i, j = divmod(t, kw)
        rows = xp[:, :, i * dilations[0] : i * dilations[0] + (oh - 1) * strides[0] + 1 : strides[0]]
        view = rows[:, :, :, j * dilations[1] : j * dilations[1] + (ow - 1) * strides[1] + 1 : strides[1]]
        product = view * w[:, 0, i, j].reshape(1, c, 1, 1)
        y = product if t == 0 else y + product
    return y


def _depthwise_case(shape, kernel: int, strides, dilations):
    """A random depthwise conv (same padding) through `conv_sum`: (padded input, filter,
    output size, result)."""
    x = RNG.standard_normal(shape).astype(np.float32)
    w = RNG.standard_normal((shape[1], 1, kernel, kernel)).astype(np.float32)
    pads = [kernel // 2] * 4
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    out_hw = [
        (xp.shape[2 + a] - (kernel - 1) * dilations[a] - 1) // strides[a] + 1 for a in range(2)
    ]
    got = conv_sum(x, w, shape[1], [kernel, kernel], strides, pads, dilations, (shape[0], shape[1], *out_hw))
    return xp, w, out_hw, got


@pytest.mark.parametrize(
    "shape, kernel, strides, dilations",
    [
        ((1, 200, 2, 30), 3, (1, 1), (1, 1)),
        ((1, 16, 70, 30), 3, (1, 1), (1, 1)),
        ((1, 48, 30, 30), 3, (2, 2), (1, 1)),
        ((1, 24, 9, 20), 3, (1, 1), (2, 1)),
    ],
)
@pytest.mark.parametrize("path", [_depthwise_2d_planar, _depthwise_2d_channels_last])
def test_depthwise_conv_tap_by_tap_sums_taps_in_order_bit_for_bit(shape, kernel, strides, dilations, path):
    """Where the INT8 kernels cap a sum below a conv's taps, a depthwise conv adds its
    taps one by one (per channel rows, or channels-last rows), in the definition's order."""
    xp, w, out_hw, _ = _depthwise_case(shape, kernel, strides, dilations)
    got = path(xp, w, [kernel, kernel], strides, dilations, (shape[0], shape[1], *out_hw))
    expected = sequential_depthwise(xp, w, strides, dilations, out_hw)
    assert got.dtype == np.float32
    assert np.array_equal(got, expected)


@pytest.mark.parametrize(
    "shape, kernel, strides, dilations",
    [
        ((2, 33, 7, 9), 3, (2, 1), (1, 2)),  # per kernel column: dilated, strided columns
        ((1, 256, 14, 14), 5, (1, 1), (1, 1)),  # narrow rows, blocks of rows
        ((1, 64, 7, 7), 3, (2, 2), (1, 1)),
        ((1, 200, 2, 96), 5, (1, 1), (1, 1)),  # few wide rows: all rows in one block
        ((2, 24, 13, 70), 3, (2, 2), (2, 1)),
        ((1, 200, 2, 30), 3, (1, 1), (1, 1)),
        ((1, 16, 70, 30), 3, (1, 1), (1, 1)),  # the last block reads rows past the input's end
        ((1, 48, 30, 30), 3, (2, 2), (1, 1)),
        ((1, 24, 9, 20), 3, (1, 1), (2, 1)),  # dilated rows
        ((1, 16, 40, 40), 3, (1, 1), (1, 1)),  # many wide rows: banded over rows, blocks of rows
        ((1, 8, 21, 64), 5, (1, 1), (1, 2)),  # the last block reads rows past the input's end
        ((1, 8, 30, 20), 3, (1, 1), (2, 1)),  # many dilated rows: over rows
    ],
)
def test_depthwise_conv_on_banded_rows_is_the_tap_sum_within_float32_rounding(shape, kernel, strides, dilations):
    """Narrow and wide rows sum their taps in BLAS's order, not tap by tap: each output is
    within the float32 rounding bound of any summation order, k*k*eps*sum|terms|, of the
    exact sum."""
    xp, w, out_hw, got = _depthwise_case(shape, kernel, strides, dilations)
    exact = sequential_depthwise(xp.astype(np.float64), w.astype(np.float64), strides, dilations, out_hw)
    magnitude = sequential_depthwise(np.abs(xp).astype(np.float64), np.abs(w).astype(np.float64), strides,
                                     dilations, out_hw)
    bound = kernel * kernel * np.finfo(np.float32).eps * magnitude
    assert got.dtype == np.float32
    assert np.all(np.abs(got.astype(np.float64) - exact) <= bound)


@pytest.mark.parametrize(
    "shape, kernel, strides, dilations",
    [
        ((1, 200, 2, 96), 5, (1, 1), (1, 1)),
        ((2, 24, 13, 70), 3, (2, 2), (2, 1)),
        ((1, 64, 7, 7), 3, (2, 2), (1, 1)),
        ((1, 48, 30, 30), 3, (2, 2), (1, 1)),
        ((1, 16, 40, 40), 3, (1, 1), (1, 1)),
    ],
)
@pytest.mark.parametrize("max_terms", [1024, 4])
def test_depthwise_conv_of_int8_codes_is_exact(shape, kernel, strides, dilations, max_terms):
    """The INT8 kernels' sums of products of 8-bit codes in float32 are the exact integer
    sums on every path: banded GEMMs (a band's zeros add nothing) and, with sums capped
    below the taps, tap by tap in groups added in float64."""
    x = RNG.integers(-128, 128, shape).astype(np.float32)
    w = RNG.integers(-128, 128, (shape[1], 1, kernel, kernel)).astype(np.float32)
    pads = [kernel // 2] * 4
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    out_hw = [(xp.shape[2 + a] - (kernel - 1) * dilations[a] - 1) // strides[a] + 1 for a in range(2)]
    got = conv_sum(x, w, shape[1], [kernel, kernel], strides, pads, dilations, (shape[0], shape[1], *out_hw),
                   max_terms=max_terms)
    exact = sequential_depthwise(xp.astype(np.int64), w.astype(np.int64), strides, dilations, out_hw)
    assert np.array_equal(got, exact)
