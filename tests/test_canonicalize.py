"""The TOP canonicalization passes keep what a module computes.

Each pass test parses a small TOP module, runs it with the interpreter, applies
the pass, checks the pattern fired (the op count changed, the fused op is
there) and runs it again: every output must match (cosine >= 0.99999). The
pipeline tests import ONNX graphs in the shapes exporters write and compare
the canonicalized module with onnxruntime.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.interp.runner import run_module
from tpu_xdsl.ir_io import parse_module
from tpu_xdsl.transforms import get_all_passes
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.weights import attach_weights, weights_of

RNG = np.random.default_rng(0)


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def positive(*shape: int) -> np.ndarray:
    return RNG.uniform(0.5, 2.0, shape).astype(np.float32)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    if not a.any() and not b.any():
        return 1.0
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def op_names(module: ModuleOp) -> list[str]:
    return [op.name for op in module.walk() if op.name.startswith("top.")]


def check_pass(
    pass_name: str,
    text: str,
    weights: dict[str, np.ndarray],
    inputs: dict[str, np.ndarray],
    expect_op: str | None = None,
    gone_op: str | None = None,
) -> ModuleOp:
    """Run `text` before and after `pass_name`; the outputs must agree."""
    module = parse_module(text)
    attach_weights(module, weights)
    before = run_module(module, inputs, weights_of(module))
    ops_before = op_names(module)
    get_all_passes()[pass_name]()().apply(Context(), module)
    module.verify()
    ops_after = op_names(module)
    assert len(ops_after) < len(ops_before), f"{pass_name} changed nothing: {ops_after}"
    if expect_op is not None:
        assert expect_op in ops_after, ops_after
    if gone_op is not None:
        assert gone_op not in ops_after, ops_after
    after = run_module(module, inputs, weights_of(module))
    assert list(after) == list(before)  # the outputs keep their tensor names
    for name, value in before.items():
        assert after[name].shape == value.shape
        assert cosine(after[name], value) >= 0.99999, name
        np.testing.assert_allclose(after[name], value, rtol=1e-4, atol=1e-5)
    return module


# -- top-fuse-relu ---------------------------------------------------------------------

CONV_RELU = """
func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<4xf32>
  %c = "top.conv"(%x, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], names = ["c"]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  %y = "top.relu"(%c) {names = ["y"]} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}
"""

MATMUL_CLIP = """
func.func @main(%arg0: tensor<3x4xf32>) -> tensor<3x5xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x5xf32>
  %none = "top.none"() : () -> none
  %m = "top.matmul"(%x, %w, %none) {names = ["m"]} : (tensor<3x4xf32>, tensor<4x5xf32>, none) -> tensor<3x5xf32>
  %y = "top.clip"(%m) {min = 0.0, max = 0.5, names = ["y"]} : (tensor<3x5xf32>) -> tensor<3x5xf32>
  func.return %y : tensor<3x5xf32>
}
"""

BINARY_SCALE_CONCAT_POOL = """
func.func @main(%arg0: tensor<1x3x4x4xf32>, %arg1: tensor<1x3x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x6x4x4xf32>, tensor<1x3x2x2xf32>) {
  %a = "top.input"(%arg0) {names = ["a"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %b = "top.input"(%arg1) {names = ["b"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %s = "top.weight"() {names = ["s"]} : () -> tensor<3xf32>
  %t = "top.weight"() {names = ["t"]} : () -> tensor<3xf32>
  %add = "top.add"(%a, %b) {names = ["add"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %add_r = "top.relu"(%add) {relu_limit = 1.0, names = ["add_r"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %sub = "top.sub"(%a, %b) {names = ["sub"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %sub_r = "top.relu"(%sub) {names = ["sub_r"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %mul = "top.mul"(%a, %b) {names = ["mul"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %mul_r = "top.clip"(%mul) {min = 0.0, names = ["mul_r"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %sc = "top.scale"(%a, %s, %t) {names = ["sc"]} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  %sc_r = "top.relu"(%sc) {names = ["sc_r"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %cat = "top.concat"(%a, %b) {axis = 1, names = ["cat"]} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x6x4x4xf32>
  %cat_r = "top.relu"(%cat) {names = ["cat_r"]} : (tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32>
  %pool = "top.avg_pool"(%b) {kernel_shape = [2, 2], strides = [2, 2], names = ["pool"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x2x2xf32>
  %pool_r = "top.clip"(%pool) {min = 0.0, max = 0.25, names = ["pool_r"]} : (tensor<1x3x2x2xf32>) -> tensor<1x3x2x2xf32>
  func.return %add_r, %sub_r, %mul_r, %sc_r, %cat_r, %pool_r : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x6x4x4xf32>, tensor<1x3x2x2xf32>
}
"""


def test_fuse_relu_into_conv():
    module = check_pass(
        "top-fuse-relu", CONV_RELU, {"w": randn(4, 3, 3, 3), "b": randn(4)}, {"x": randn(1, 3, 8, 8)},
        gone_op="top.relu",
    )
    (conv,) = [op for op in module.walk() if op.name == "top.conv"]
    assert conv.attributes["names"].data[0].data == "y"


def test_fuse_clip_into_matmul_as_relu_limit():
    check_pass("top-fuse-relu", MATMUL_CLIP, {"w": randn(4, 5)}, {"x": randn(3, 4)}, gone_op="top.clip")


def test_fuse_relu_into_binary_scale_concat_and_pool():
    module = check_pass(
        "top-fuse-relu",
        BINARY_SCALE_CONCAT_POOL,
        {"s": randn(3), "t": randn(3)},
        {"a": randn(1, 3, 4, 4), "b": randn(1, 3, 4, 4)},
    )
    assert "top.relu" not in op_names(module) and "top.clip" not in op_names(module)


# -- top-fold-batchnorm ----------------------------------------------------------------


def bn_stats(c: int) -> dict[str, np.ndarray]:
    return {"gamma": positive(c), "beta": randn(c), "mean": randn(c), "var": positive(c)}


BN_TAIL = """
  %gamma = "top.weight"() {names = ["gamma"]} : () -> tensor<Cxf32>
  %beta = "top.weight"() {names = ["beta"]} : () -> tensor<Cxf32>
  %mean = "top.weight"() {names = ["mean"]} : () -> tensor<Cxf32>
  %var = "top.weight"() {names = ["var"]} : () -> tensor<Cxf32>
  %y = "top.batch_norm"(%p, %gamma, %beta, %mean, %var) {epsilon = 1.0e-3, names = ["y"]} : (T, tensor<Cxf32>, tensor<Cxf32>, tensor<Cxf32>, tensor<Cxf32>) -> T
  func.return %y : T
}
"""


def with_bn(head: str, channels: int, result_type: str) -> str:
    return head + BN_TAIL.replace("tensor<Cx", f"tensor<{channels}x").replace("T", result_type)


def test_fold_batchnorm_into_grouped_conv():
    text = with_bn(
        """
func.func @main(%arg0: tensor<1x4x6x6xf32>) -> tensor<1x6x6x6xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<6x2x3x3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<6xf32>
  %p = "top.conv"(%x, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], group = 2, names = ["p"]} : (tensor<1x4x6x6xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x6x6xf32>""",
        6,
        "tensor<1x6x6x6xf32>",
    )
    weights = {"w": randn(6, 2, 3, 3), "b": randn(6), **bn_stats(6)}
    module = check_pass("top-fold-batchnorm", text, weights, {"x": randn(1, 4, 6, 6)}, "top.conv", "top.batch_norm")
    assert op_names(module).count("top.weight") == 2  # the new filter and bias only


def test_fold_batchnorm_into_grouped_deconv_without_bias():
    text = with_bn(
        """
func.func @main(%arg0: tensor<1x4x5x5xf32>) -> tensor<1x6x11x11xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x4x5x5xf32>) -> tensor<1x4x5x5xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %none = "top.none"() : () -> none
  %p = "top.deconv"(%x, %w, %none) {kernel_shape = [3, 3], strides = [2, 2], group = 2, names = ["p"]} : (tensor<1x4x5x5xf32>, tensor<4x3x3x3xf32>, none) -> tensor<1x6x11x11xf32>""",
        6,
        "tensor<1x6x11x11xf32>",
    )
    weights = {"w": randn(4, 3, 3, 3), **bn_stats(6)}
    check_pass("top-fold-batchnorm", text, weights, {"x": randn(1, 4, 5, 5)}, "top.deconv", "top.batch_norm")


@pytest.mark.parametrize("right_transpose", [False, True])
def test_fold_batchnorm_into_matmul(right_transpose: bool):
    w_type = "tensor<5x6xf32>" if right_transpose else "tensor<6x5xf32>"
    text = with_bn(
        f"""
func.func @main(%arg0: tensor<3x6xf32>) -> tensor<3x5xf32> {{
  %x = "top.input"(%arg0) {{names = ["x"]}} : (tensor<3x6xf32>) -> tensor<3x6xf32>
  %w = "top.weight"() {{names = ["w"]}} : () -> {w_type}
  %b = "top.weight"() {{names = ["b"]}} : () -> tensor<5xf32>
  %p = "top.matmul"(%x, %w, %b) {{right_transpose = {str(right_transpose).lower()}, names = ["p"]}} : (tensor<3x6xf32>, {w_type}, tensor<5xf32>) -> tensor<3x5xf32>""",
        5,
        "tensor<3x5xf32>",
    )
    w = randn(5, 6) if right_transpose else randn(6, 5)
    weights = {"w": w, "b": randn(5), **bn_stats(5)}
    check_pass("top-fold-batchnorm", text, weights, {"x": randn(3, 6)}, "top.matmul", "top.batch_norm")


def test_batchnorm_without_producer_becomes_scale():
    text = with_bn(
        """
func.func @main(%arg0: tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32> {
  %p = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>""",
        3,
        "tensor<2x3x4x4xf32>",
    )
    check_pass("top-fold-batchnorm", text, bn_stats(3), {"x": randn(2, 3, 4, 4)}, "top.scale", "top.batch_norm")


# -- top-fold-affine ---------------------------------------------------------------------

AFFINE = """
func.func @main(%arg0: tensor<1x4x6x6xf32>) -> (tensor<1x6x6x6xf32>, tensor<1x6x6x5xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<6x2x3x3xf32>
  %none = "top.none"() : () -> none
  %a = "top.weight"() {names = ["a"]} : () -> tensor<6x1x1xf32>
  %d = "top.weight"() {names = ["d"]} : () -> tensor<1xf32>
  %k = "top.weight"() {names = ["k"]} : () -> tensor<1xf32>
  %pw = "top.weight"() {names = ["pw"]} : () -> tensor<6x3x1x1xf32>
  %pb = "top.weight"() {names = ["pb"]} : () -> tensor<6xf32>
  %fc = "top.weight"() {names = ["fc"]} : () -> tensor<5x6xf32>
  %fb = "top.weight"() {names = ["fb"]} : () -> tensor<5xf32>
  %sh = "top.weight"() {names = ["sh"]} : () -> tensor<6xf32>
  %conv = "top.conv"(%x, %w, %none) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], group = 2, names = ["conv"]} : (tensor<1x4x6x6xf32>, tensor<6x2x3x3xf32>, none) -> tensor<1x6x6x6xf32>
  %m = "top.div"(%conv, %a) {names = ["m"]} : (tensor<1x6x6x6xf32>, tensor<6x1x1xf32>) -> tensor<1x6x6x6xf32>
  %s = "top.sub"(%d, %m) {names = ["s"]} : (tensor<1xf32>, tensor<1x6x6x6xf32>) -> tensor<1x6x6x6xf32>
  %h = "top.hard_swish"(%s) {names = ["h"]} : (tensor<1x6x6x6xf32>) -> tensor<1x6x6x6xf32>
  %hk = "top.mul"(%k, %h) {names = ["hk"]} : (tensor<1xf32>, tensor<1x6x6x6xf32>) -> tensor<1x6x6x6xf32>
  %hd = "top.sub"(%hk, %d) {names = ["hd"]} : (tensor<1x6x6x6xf32>, tensor<1xf32>) -> tensor<1x6x6x6xf32>
  %y = "top.conv"(%hd, %pw, %pb) {kernel_shape = [1, 1], group = 2, names = ["y"]} : (tensor<1x6x6x6xf32>, tensor<6x3x1x1xf32>, tensor<6xf32>) -> tensor<1x6x6x6xf32>
  %hs = "top.add"(%h, %sh) {names = ["hs"]} : (tensor<1x6x6x6xf32>, tensor<6xf32>) -> tensor<1x6x6x6xf32>
  %mm = "top.matmul"(%hs, %fc, %fb) {right_transpose = true, names = ["mm"]} : (tensor<1x6x6x6xf32>, tensor<5x6xf32>, tensor<5xf32>) -> tensor<1x6x6x5xf32>
  %z = "top.mul"(%mm, %fb) {names = ["z"]} : (tensor<1x6x6x5xf32>, tensor<5xf32>) -> tensor<1x6x6x5xf32>
  func.return %y, %z : tensor<1x6x6x6xf32>, tensor<1x6x6x5xf32>
}
"""


def test_fold_affine_into_producers_and_consumers():
    """Per-channel div and a scalar c - x after a grouped conv without bias; a scalar scale
    and shift into the grouped 1x1 conv after the activation; a shift per contracted index
    into a transposed matmul, and a scale per column after it. Only the activation stays."""
    weights = {
        "w": randn(6, 2, 3, 3), "a": positive(6, 1, 1), "d": randn(1), "k": positive(1), "pw": randn(6, 3, 1, 1),
        "pb": randn(6), "fc": randn(5, 6), "fb": randn(5), "sh": randn(6),
    }
    module = check_pass("top-fold-affine", AFFINE, weights, {"x": randn(1, 4, 6, 6)})
    computed = [n for n in op_names(module) if n not in ("top.weight", "top.none", "top.input")]
    assert computed == ["top.conv", "top.hard_swish", "top.conv", "top.matmul"]


def test_fold_affine_leaves_a_shift_before_zero_padding():
    """x + b before a conv with zero padding stays an add: its padding pads x + b with 0."""
    text = """
func.func @main(%arg0: tensor<1x3x5x5xf32>) -> tensor<1x4x5x5xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x5x5xf32>) -> tensor<1x3x5x5xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<4xf32>
  %d = "top.weight"() {names = ["d"]} : () -> tensor<1xf32>
  %k = "top.weight"() {names = ["k"]} : () -> tensor<1xf32>
  %h = "top.sigmoid"(%x) {names = ["h"]} : (tensor<1x3x5x5xf32>) -> tensor<1x3x5x5xf32>
  %s = "top.add"(%h, %d) {names = ["s"]} : (tensor<1x3x5x5xf32>, tensor<1xf32>) -> tensor<1x3x5x5xf32>
  %m = "top.mul"(%s, %k) {names = ["m"]} : (tensor<1x3x5x5xf32>, tensor<1xf32>) -> tensor<1x3x5x5xf32>
  %y = "top.conv"(%m, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], names = ["y"]} : (tensor<1x3x5x5xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x5x5xf32>
  func.return %y : tensor<1x4x5x5xf32>
}
"""
    weights = {"w": randn(4, 3, 3, 3), "b": randn(4), "d": np.float32([3.0]), "k": positive(1)}
    module = check_pass("top-fold-affine", text, weights, {"x": randn(1, 3, 5, 5)}, "top.add", "top.mul")
    assert "top.add" in op_names(module)


# -- top-fuse-silu, top-fuse-hardswish -------------------------------------------------

SILU = """
func.func @main(%arg0: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %s = "top.sigmoid"(%x) {names = ["s"]} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %y = "top.mul"(%s, %x) {names = ["y"]} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  func.return %y : tensor<2x3x4xf32>
}
"""


def test_fuse_silu():
    check_pass("top-fuse-silu", SILU, {}, {"x": 4 * randn(2, 3, 4)}, "top.silu", "top.sigmoid")


HARD_SWISH = """
func.func @main(%arg0: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %three = "top.weight"() {names = ["three"]} : () -> tensor<f32>
  %six = "top.weight"() {names = ["six"]} : () -> tensor<f32>
  %sixth = "top.weight"() {names = ["sixth"]} : () -> tensor<1xf32>
  %h = "top.hard_sigmoid"(%x) {alpha = 0.16666666666666666, beta = 0.5, names = ["h"]} : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %y0 = "top.mul"(%x, %h) {names = ["y0"]} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %a = "top.add"(%three, %x) {names = ["a"]} : (tensor<f32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %c = "top.clip"(%a) {min = 0.0, max = 6.0, names = ["c"]} : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %m = "top.mul"(%c, %x) {names = ["m"]} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %y1 = "top.div"(%m, %six) {names = ["y1"]} : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %r = "top.relu"(%a) {relu_limit = 6.0, names = ["r"]} : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %d = "top.mul"(%r, %sixth) {names = ["d"]} : (tensor<2x3x8xf32>, tensor<1xf32>) -> tensor<2x3x8xf32>
  %y2 = "top.mul"(%x, %d) {names = ["y2"]} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  func.return %y0, %y1, %y2 : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>
}
"""


def test_fuse_hardswish_forms():
    weights = {"three": np.float32(3), "six": np.float32(6), "sixth": np.array([1 / 6], np.float32)}
    module = check_pass("top-fuse-hardswish", HARD_SWISH, weights, {"x": 5 * randn(2, 3, 8)})
    assert op_names(module).count("top.hard_swish") == 3
    assert {"top.clip", "top.relu", "top.hard_sigmoid", "top.add"}.isdisjoint(op_names(module))


# -- top-fuse-layernorm ----------------------------------------------------------------

LAYER_NORM = """
func.func @main(%arg0: tensor<2x5x8xf32>) -> tensor<2x5x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %two = "top.weight"() {names = ["two"]} : () -> tensor<f32>
  %eps = "top.weight"() {names = ["eps"]} : () -> tensor<f32>
  %gamma = "top.weight"() {names = ["gamma"]} : () -> tensor<8xf32>
  %beta = "top.weight"() {names = ["beta"]} : () -> tensor<1x1x8xf32>
  %m = "top.reduce"(%x) {mode = "mean", axes = [-1], keepdims = true, names = ["m"]} : (tensor<2x5x8xf32>) -> tensor<2x5x1xf32>
  %d = "top.sub"(%x, %m) {names = ["d"]} : (tensor<2x5x8xf32>, tensor<2x5x1xf32>) -> tensor<2x5x8xf32>
  %p = "top.pow"(%d, %two) {names = ["p"]} : (tensor<2x5x8xf32>, tensor<f32>) -> tensor<2x5x8xf32>
  %v = "top.reduce"(%p) {mode = "mean", axes = [-1], keepdims = true, names = ["v"]} : (tensor<2x5x8xf32>) -> tensor<2x5x1xf32>
  %e = "top.add"(%v, %eps) {names = ["e"]} : (tensor<2x5x1xf32>, tensor<f32>) -> tensor<2x5x1xf32>
  %s = "top.sqrt"(%e) {names = ["s"]} : (tensor<2x5x1xf32>) -> tensor<2x5x1xf32>
  %n = "top.div"(%d, %s) {names = ["n"]} : (tensor<2x5x8xf32>, tensor<2x5x1xf32>) -> tensor<2x5x8xf32>
  %g = "top.mul"(%gamma, %n) {names = ["g"]} : (tensor<8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %y = "top.add"(%g, %beta) {names = ["y"]} : (tensor<2x5x8xf32>, tensor<1x1x8xf32>) -> tensor<2x5x8xf32>
  func.return %y : tensor<2x5x8xf32>
}
"""

LAYER_NORM_TWO_AXES = """
func.func @main(%arg0: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %eps = "top.weight"() {names = ["eps"]} : () -> tensor<1xf32>
  %gamma = "top.weight"() {names = ["gamma"]} : () -> tensor<1x4x8xf32>
  %m = "top.reduce"(%x) {mode = "mean", axes = [1, 2], keepdims = true, names = ["m"]} : (tensor<2x4x8xf32>) -> tensor<2x1x1xf32>
  %d = "top.sub"(%x, %m) {names = ["d"]} : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
  %p = "top.mul"(%d, %d) {names = ["p"]} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %v = "top.reduce"(%p) {mode = "mean", axes = [2, 1], keepdims = true, names = ["v"]} : (tensor<2x4x8xf32>) -> tensor<2x1x1xf32>
  %e = "top.add"(%eps, %v) {names = ["e"]} : (tensor<1xf32>, tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %s = "top.sqrt"(%e) {names = ["s"]} : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %r = "top.reciprocal"(%s) {names = ["r"]} : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %n = "top.mul"(%d, %r) {names = ["n"]} : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
  %y = "top.mul"(%n, %gamma) {names = ["y"]} : (tensor<2x4x8xf32>, tensor<1x4x8xf32>) -> tensor<2x4x8xf32>
  func.return %y : tensor<2x4x8xf32>
}
"""


def test_fuse_layernorm_with_gamma_and_beta():
    weights = {"two": np.float32(2), "eps": np.float32(1e-5), "gamma": randn(8), "beta": randn(1, 1, 8)}
    module = check_pass("top-fuse-layernorm", LAYER_NORM, weights, {"x": 3 + randn(2, 5, 8)})
    assert [n for n in op_names(module) if n not in ("top.weight", "top.none")] == [
        "top.input",
        "top.layer_norm",
    ]


def test_fuse_layernorm_over_two_axes_with_reciprocal():
    weights = {"eps": np.array([1e-6], np.float32), "gamma": randn(1, 4, 8)}
    module = check_pass("top-fuse-layernorm", LAYER_NORM_TWO_AXES, weights, {"x": randn(2, 4, 8)})
    assert "top.layer_norm" in op_names(module) and "top.reduce" not in op_names(module)


# -- top-fuse-gelu ---------------------------------------------------------------------

GELU = """
func.func @main(%arg0: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %sqrt2 = "top.weight"() {names = ["sqrt2"]} : () -> tensor<f32>
  %one = "top.weight"() {names = ["one"]} : () -> tensor<f32>
  %half = "top.weight"() {names = ["half"]} : () -> tensor<f32>
  %three = "top.weight"() {names = ["three"]} : () -> tensor<f32>
  %c = "top.weight"() {names = ["c"]} : () -> tensor<f32>
  %k = "top.weight"() {names = ["k"]} : () -> tensor<f32>
  %t = "top.div"(%x, %sqrt2) {names = ["t"]} : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %e = "top.erf"(%t) {names = ["e"]} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %a = "top.add"(%e, %one) {names = ["a"]} : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %m = "top.mul"(%x, %a) {names = ["m"]} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = "top.mul"(%m, %half) {names = ["y"]} : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %x3 = "top.pow"(%x, %three) {names = ["x3"]} : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %cx3 = "top.mul"(%x3, %c) {names = ["cx3"]} : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %s = "top.add"(%x, %cx3) {names = ["s"]} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %ks = "top.mul"(%k, %s) {names = ["ks"]} : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %th = "top.tanh"(%ks) {names = ["th"]} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %a2 = "top.add"(%one, %th) {names = ["a2"]} : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %h = "top.mul"(%half, %x) {names = ["h"]} : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %z = "top.mul"(%h, %a2) {names = ["z"]} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  func.return %y, %z : tensor<4x16xf32>, tensor<4x16xf32>
}
"""


def test_fuse_gelu_exact_and_tanh():
    weights = {
        "sqrt2": np.float32(1.4142135),
        "one": np.float32(1),
        "half": np.float32(0.5),
        "three": np.float32(3),
        "c": np.float32(0.044715),
        "k": np.float32(np.sqrt(2 / np.pi)),
    }
    module = check_pass("top-fuse-gelu", GELU, weights, {"x": 3 * randn(4, 16)})
    gelus = [op for op in module.walk() if op.name == "top.gelu"]
    assert [op.attributes["approximate"].data for op in gelus] == ["none", "tanh"]
    assert [n for n in op_names(module) if n != "top.gelu"] == ["top.input"]


# -- top-fold-reshape ------------------------------------------------------------------

RESHAPES = """
func.func @main(%arg0: tensor<1x3x1x4xf32>) -> (tensor<4x3xf32>, tensor<1x3x1x4xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x1x4xf32>) -> tensor<1x3x1x4xf32>
  %e = "top.exp"(%x) {names = ["e"]} : (tensor<1x3x1x4xf32>) -> tensor<1x3x1x4xf32>
  %id = "top.reshape"(%e) {shape = [1, 3, 1, 4], names = ["id"]} : (tensor<1x3x1x4xf32>) -> tensor<1x3x1x4xf32>
  %sq = "top.squeeze"(%id) {axes = [0, 2], names = ["sq"]} : (tensor<1x3x1x4xf32>) -> tensor<3x4xf32>
  %un = "top.unsqueeze"(%sq) {axes = [0], names = ["un"]} : (tensor<3x4xf32>) -> tensor<1x3x4xf32>
  %fl = "top.flatten"(%un) {axis = 2, names = ["fl"]} : (tensor<1x3x4xf32>) -> tensor<3x4xf32>
  %r = "top.reshape"(%fl) {shape = [4, 3], names = ["r"]} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %n = "top.neg"(%id) {names = ["n"]} : (tensor<1x3x1x4xf32>) -> tensor<1x3x1x4xf32>
  %out = "top.reshape"(%n) {shape = [1, 3, 1, 4], names = ["out"]} : (tensor<1x3x1x4xf32>) -> tensor<1x3x1x4xf32>
  func.return %r, %out : tensor<4x3xf32>, tensor<1x3x1x4xf32>
}
"""


def test_fold_reshape_chains_and_identities():
    module = check_pass("top-fold-reshape", RESHAPES, {}, {"x": randn(1, 3, 1, 4)})
    assert op_names(module) == ["top.input", "top.exp", "top.reshape", "top.neg"]


# -- top-constant-fold, top-dce --------------------------------------------------------

CONSTANTS = """
func.func @main(%arg0: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<6xf32>) {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %a = "top.weight"() {names = ["a"]} : () -> tensor<2x3xf32>
  %b = "top.weight"() {names = ["b"]} : () -> tensor<3xf32>
  %idx = "top.weight"() {names = ["idx"]} : () -> tensor<3xi64>
  %s = "top.add"(%a, %b) {names = ["s"]} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %f = "top.cast"(%idx) {names = ["f"]} : (tensor<3xi64>) -> tensor<3xf32>
  %sf = "top.mul"(%s, %f) {names = ["sf"]} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %y = "top.sub"(%x, %sf) {names = ["y"]} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %r = "top.reshape"(%sf) {shape = [6], names = ["r"]} : (tensor<2x3xf32>) -> tensor<6xf32>
  func.return %y, %r : tensor<2x3xf32>, tensor<6xf32>
}
"""


def test_constant_fold():
    weights = {"a": randn(2, 3), "b": randn(3), "idx": np.array([3, -1, 2], np.int64)}
    module = check_pass("top-constant-fold", CONSTANTS, weights, {"x": randn(2, 3)})
    assert op_names(module) == ["top.input", "top.weight", "top.sub", "top.weight"]
    # The folded weight is (a + b) * idx, computed here by hand.
    expected = (weights["a"] + weights["b"]) * np.array([3.0, -1.0, 2.0], np.float32)
    np.testing.assert_allclose(weights_of(module)["sf"], expected, rtol=1e-6)


DEAD = """
func.func @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %w = "top.weight"() {names = ["w"]} : () -> tensor<3x4xf32>
  %none = "top.none"() : () -> none
  %mm = "top.matmul"(%x, %w, %none) {names = ["mm"]} : (tensor<2x3xf32>, tensor<3x4xf32>, none) -> tensor<2x4xf32>
  %t = "top.tanh"(%mm) {names = ["t"]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = "top.sigmoid"(%x) {names = ["y"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
"""


def test_dce():
    module = check_pass("top-dce", DEAD, {"w": randn(3, 4)}, {"x": randn(2, 3)})
    assert op_names(module) == ["top.input", "top.sigmoid"]


def test_weights_unknown_leave_ops_alone():
    """Passes run on a module without its weight table (only the IR) rewrite
    nothing that needs a constant's value."""
    module = parse_module(
        with_bn(
            """
func.func @main(%arg0: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %p = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>""",
            3,
            "tensor<1x3x4x4xf32>",
        )
    )
    canonicalize(module)
    module.verify()
    assert "top.batch_norm" in op_names(module)


# -- the pipeline on imported ONNX graphs ----------------------------------------------


def onnx_model(nodes, inputs, outputs, initializers, opset: int = 13) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in initializers.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def canonicalized_matches_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[str]:
    """Import, canonicalize, interpret; compare with onnxruntime. The TOP op names."""
    result = import_onnx(model)
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    result.module.verify()
    ours = run_module(result.module, feeds, weights_of(result.module))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = session.run(None, feeds)
    assert list(ours) == [o.name for o in model.graph.output]
    for got, want in zip(ours.values(), theirs):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    return op_names(result.module)


def test_pipeline_conv_batchnorm_relu_identity():
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["bn"], epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["r"]),
        helper.make_node("Identity", ["r"], ["y"]),
    ]
    init = {"w": randn(4, 3, 3, 3), "b": randn(4), **bn_stats(4)}
    model = onnx_model(nodes, [("x", [1, 3, 6, 6])], ["y"], init)
    ops = canonicalized_matches_ort(model, {"x": randn(1, 3, 6, 6)})
    assert [n for n in ops if n != "top.weight"] == ["top.input", "top.conv"]


def test_pipeline_transformer_block():
    """MatMul + Add, the layer norm and exact GELU as PyTorch exports them, Dropout. The Add of
    the bias folds into the matmul (top-fold-affine)."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "bias"], ["h"]),
        helper.make_node("ReduceMean", ["h"], ["mean"], axes=[-1]),
        helper.make_node("Sub", ["h", "mean"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["std"]),
        helper.make_node("Div", ["d", "std"], ["n"]),
        helper.make_node("Mul", ["n", "gamma"], ["g"]),
        helper.make_node("Add", ["g", "beta"], ["ln"]),
        helper.make_node("Div", ["ln", "sqrt2"], ["t"]),
        helper.make_node("Erf", ["t"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]),
        helper.make_node("Mul", ["ln", "a"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["gelu"]),
        helper.make_node("Dropout", ["gelu"], ["y"]),
    ]
    init = {
        "w": randn(8, 16), "bias": randn(16), "two": np.float32(2), "eps": np.float32(1e-5),
        "gamma": randn(16), "beta": randn(16), "sqrt2": np.float32(1.4142135),
        "one": np.float32(1), "half": np.float32(0.5),
    }
    model = onnx_model(nodes, [("x", [2, 5, 8])], ["y"], init)
    ops = canonicalized_matches_ort(model, {"x": randn(2, 5, 8)})
    assert [n for n in ops if n not in ("top.weight", "top.none")] == [
        "top.input", "top.matmul", "top.layer_norm", "top.gelu",
    ]


def test_pipeline_affine_steps_as_exporters_write_them():
    """Paddle's learnable affine blocks (a scalar Mul and Add after a conv and after its
    activation), tf2onnx's BatchNorm as Mul and Add of per-channel constants after a conv
    without bias, and PyTorch's Linear on a 3-d input as MatMul then Add: each step folds
    into the conv or matmul beside it (top-fold-affine), and the module still computes what
    onnxruntime does."""
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Mul", ["scale", "c"], ["c1"]),
        helper.make_node("Add", ["c1", "shift"], ["c2"]),
        helper.make_node("HardSwish", ["c2"], ["h"]),
        helper.make_node("Mul", ["scale", "h"], ["h1"]),
        helper.make_node("Add", ["h1", "shift"], ["h2"]),
        helper.make_node("Conv", ["h2", "pw"], ["p"], kernel_shape=[1, 1]),
        helper.make_node("Mul", ["p", "bn_a"], ["p1"]),
        helper.make_node("Add", ["p1", "bn_b"], ["p2"]),
        helper.make_node("Relu", ["p2"], ["r"]),
        helper.make_node("Reshape", ["r", "tokens"], ["t"]),
        helper.make_node("Transpose", ["t"], ["tt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["tt", "fc"], ["mm"]),
        helper.make_node("Add", ["fc_b", "mm"], ["y"]),
    ]
    init = {
        "w": randn(8, 3, 3, 3), "b": randn(8), "scale": np.float32([1.3]), "shift": np.float32([-0.4]),
        "pw": randn(6, 8, 1, 1), "bn_a": positive(1, 6, 1, 1), "bn_b": randn(1, 6, 1, 1),
        "tokens": np.array([1, 6, -1], np.int64), "fc": randn(6, 5), "fc_b": randn(5),
    }
    for opset in (14, 17):  # HardSwish is opset 14
        model = onnx_model(nodes, [("x", [1, 3, 6, 6])], ["y"], init, opset=opset)
        ops = canonicalized_matches_ort(model, {"x": randn(1, 3, 6, 6)})
        computed = [n for n in ops if n not in ("top.weight", "top.none")]
        assert computed == ["top.input", "top.conv", "top.hard_swish", "top.conv", "top.reshape", "top.permute",
                            "top.matmul"], (opset, computed)


def test_pipeline_paddle_swish_with_beta_one():
    """Paddle2ONNX writes swish as x * sigmoid(beta * x) with beta = 1 (PP-OCRv4's recognizer):
    the 1 * x goes (top-constant-fold) and the rest becomes top.silu."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Mul", ["h", "beta"], ["bh"]),
        helper.make_node("Sigmoid", ["bh"], ["s"]),
        helper.make_node("Mul", ["h", "s"], ["y"]),
    ]
    model = onnx_model(nodes, [("x", [1, 5, 8])], ["y"], {"w": randn(8, 6), "beta": np.float32([1.0])})
    ops = canonicalized_matches_ort(model, {"x": 2 * randn(1, 5, 8)})
    assert [n for n in ops if n not in ("top.weight", "top.none")] == ["top.input", "top.matmul", "top.silu"]


def test_pipeline_activations():
    """SiLU as x * Sigmoid(x), hard-swish as x * HardSigmoid(x) and x * Clip(x + 3, 0, 6) / 6."""
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["s"]),
        helper.make_node("Mul", ["x", "s"], ["silu"]),
        helper.make_node("HardSigmoid", ["silu"], ["hs"], alpha=1 / 6),
        helper.make_node("Mul", ["silu", "hs"], ["hsw"]),
        helper.make_node("Add", ["hsw", "three"], ["a"]),
        helper.make_node("Clip", ["a", "zero", "six"], ["c"]),
        helper.make_node("Mul", ["hsw", "c"], ["m"]),
        helper.make_node("Div", ["m", "six"], ["y"]),
    ]
    init = {"three": np.float32(3), "zero": np.float32(0), "six": np.float32(6)}
    model = onnx_model(nodes, [("x", [2, 3, 8])], ["y"], init)
    ops = canonicalized_matches_ort(model, {"x": 4 * randn(2, 3, 8)})
    assert ops == ["top.input", "top.silu", "top.hard_swish", "top.hard_swish"]


def test_pipeline_jax_head():
    """A dense head as tf2onnx writes JAX's: GELU's tanh approximation with the cubic term as
    x * (x * (0.044715 * x)), then softmax as exp(x - max) / sum, the max clamped by
    Maximum(-inf, .) and both reductions reshaped and broadcast back (magika's output)."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Mul", ["c", "h"], ["ch"]),
        helper.make_node("Mul", ["h", "ch"], ["ch2"]),
        helper.make_node("Mul", ["h", "ch2"], ["ch3"]),
        helper.make_node("Add", ["h", "ch3"], ["inner"]),
        helper.make_node("Mul", ["k", "inner"], ["scaled"]),
        helper.make_node("Tanh", ["scaled"], ["th"]),
        helper.make_node("Add", ["one", "th"], ["a"]),
        helper.make_node("Mul", ["half", "a"], ["g"]),
        helper.make_node("Mul", ["h", "g"], ["gelu"]),
        helper.make_node("ReduceMax", ["gelu"], ["max"], axes=[1], keepdims=0),
        helper.make_node("Max", ["minus_inf", "max"], ["clamped"]),
        helper.make_node("Reshape", ["clamped", "rows"], ["max_rows"]),
        helper.make_node("Expand", ["max_rows", "rows"], ["max_b"]),
        helper.make_node("Sub", ["gelu", "max_b"], ["shifted"]),
        helper.make_node("Exp", ["shifted"], ["e"]),
        helper.make_node("ReduceSum", ["e", "axis"], ["total"], keepdims=0),
        helper.make_node("Reshape", ["total", "rows"], ["total_rows"]),
        helper.make_node("Expand", ["total_rows", "rows"], ["total_b"]),
        helper.make_node("Div", ["e", "total_b"], ["y"]),
    ]
    init = {
        "w": randn(6, 10), "c": np.float32(0.044715), "k": np.float32(0.7978845608), "one": np.float32(1),
        "half": np.float32(0.5), "minus_inf": np.float32(-np.inf), "rows": np.array([3, 1], np.int64),
        "axis": np.array([1], np.int64),
    }
    model = onnx_model(nodes, [("x", [3, 6])], ["y"], init)
    ops = canonicalized_matches_ort(model, {"x": 2 * randn(3, 6)})
    assert [n for n in ops if n not in ("top.weight", "top.none")] == ["top.input", "top.matmul", "top.gelu", "top.softmax"]
