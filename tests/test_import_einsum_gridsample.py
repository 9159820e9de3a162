"""Einsum and GridSample imported and run by the TOP interpreter, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.test_import_nn import (
    assert_matches_ort,
    make_model,
    output,
    top_ops,
    value_info,
)
from tpu_xdsl.frontend.onnx_model import ImportRuleError

F = TensorProto.FLOAT
RNG = np.random.default_rng(14)


def einsum_model(equation: str, shapes: list[tuple[int, ...]], infer: bool = True):
    """A one-Einsum model; `infer=False` declares the output's shape unknown instead of
    running ONNX's shape inference (which refuses the bad equations itself)."""
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], equation=equation)
    inputs = [value_info(n, F, s) for n, s in zip(names, shapes)]
    y = output("y") if infer else helper.make_tensor_value_info("y", F, None)
    return make_model([node], inputs, [y], 12), {
        n: RNG.standard_normal(s).astype(np.float32) for n, s in zip(names, shapes)
    }


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        # MaxViT's attention (torchvision maxvit_t): scores and weighted values, rank 5.
        ("bghid,bghjd->bghij", [(1, 2, 3, 5, 4), (1, 2, 3, 6, 4)]),
        ("bghij,bghjd->bghid", [(1, 2, 3, 5, 6), (1, 2, 3, 6, 4)]),
        ("ij,jk->ik", [(3, 4), (4, 5)]),
        ("ij,kj->ki", [(3, 4), (5, 4)]),  # transposed operand and output
        ("bij,bjk", [(2, 3, 4), (2, 4, 5)]),  # implicit output: 'bik'
        ("...ij,...jk->...ik", [(2, 3, 4, 5), (2, 3, 5, 2)]),
        ("ij->ji", [(3, 4)]),
        ("ijk->j", [(3, 4, 5)]),  # reductions
        ("ij,ij->i", [(3, 4), (3, 4)]),  # rowwise dot: batch label, nothing contracted
        ("i,j->ij", [(3,), (4,)]),  # outer product
        ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)]),  # a chain, left to right
        ("abc,bd->ad", [(2, 3, 4), (3, 5)]),  # c summed away before the product
        ("ii->i", [(4, 4)]),  # diagonals
        ("...ii->...i", [(3, 5, 5)]),
        ("ii", [(4, 4)]),  # implicit output: the trace
        ("iij,jk->ik", [(3, 3, 4), (4, 2)]),
    ],
)
def test_einsum_matches_ort(equation, shapes):
    model, feeds = einsum_model(equation, shapes)
    assert_matches_ort(model, feeds, rtol=1e-4, atol=1e-5)


def test_einsum_is_one_matmul_per_pair():
    """Einsum runs on the matmul path: no op the device lacks."""
    model, _ = einsum_model("bghid,bghjd->bghij", [(1, 2, 3, 5, 4), (1, 2, 3, 6, 4)])
    ops = top_ops(model)
    assert ops.count("top.matmul") == 1
    assert set(ops) <= {"top.matmul", "top.permute", "top.reshape"}


@pytest.mark.parametrize(
    ("equation", "shapes", "message"),
    [
        ("ij,jk->ik", [(3, 4), (1, 5)], "broadcasting Einsum dims"),
        ("ij,jk->iq", [(3, 4), (4, 5)], "output labels"),
        ("ij->i", [(3, 4, 5)], "rank 3"),
    ],
)
def test_einsum_refuses_with_a_message(equation, shapes, message):
    model, _ = einsum_model(equation, shapes, infer=False)
    with pytest.raises(ImportRuleError, match=message):
        top_ops(model)


# -- GridSample ---------------------------------------------------------------------------


def grid_model(x_shape, grid_shape, opset: int, **attrs):
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], **attrs)
    inputs = [value_info("x", F, x_shape), value_info("grid", F, grid_shape)]
    # Points a little beyond [-1, 1] exercise the padding modes.
    feeds = {
        "x": RNG.standard_normal(x_shape).astype(np.float32),
        "grid": RNG.uniform(-1.2, 1.2, grid_shape).astype(np.float32),
    }
    return make_model([node], inputs, [output("y")], opset), feeds


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_2d_matches_ort(mode, padding_mode, align_corners):
    model, feeds = grid_model(
        (2, 3, 5, 7), (2, 4, 6, 2), 16,
        mode=mode, padding_mode=padding_mode, align_corners=align_corners,
    )
    assert_matches_ort(model, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_3d_matches_ort(mode, align_corners):
    """Opset 20: volumetric inputs and the renamed modes."""
    model, feeds = grid_model(
        (1, 2, 3, 4, 5), (1, 2, 3, 4, 3), 20, mode=mode, align_corners=align_corners
    )
    assert_matches_ort(model, feeds, rtol=1e-4, atol=1e-5)


def test_grid_sample_by_hand():
    """A 2x2 image sampled at its centre (bilinear: the mean), at a corner pixel's centre,
    and outside it (zeros padding: 0), align_corners=0."""
    model, _ = grid_model((1, 1, 2, 2), (1, 1, 3, 2), 16, align_corners=0)
    x = np.array([[[[1.0, 2.0], [3.0, 4.0]]]], dtype=np.float32)
    # x then y; pixel centres at -0.5 and 0.5 when align_corners=0.
    grid = np.array([[[[0.0, 0.0], [0.5, -0.5], [3.0, 3.0]]]], dtype=np.float32)
    from tests.test_import_nn import run_ours

    (y,) = run_ours(model, {"x": x, "grid": grid})
    np.testing.assert_allclose(y.reshape(-1), [2.5, 2.0, 0.0], rtol=1e-6)


def test_grid_sample_refuses_a_grid_of_the_wrong_shape():
    node = helper.make_node("GridSample", ["x", "grid"], ["y"])
    inputs = [value_info("x", F, (1, 2, 4, 4)), value_info("grid", F, (1, 3, 3, 3))]
    y = helper.make_tensor_value_info("y", F, None)
    model = make_model([node], inputs, [y], 16)
    with pytest.raises(ImportRuleError, match=r"grid \[1, 3, 3, 3\] must be \[N, \*output, 2\]"):
        top_ops(model)


# -- on the device -------------------------------------------------------------------------


def _device_graphs():
    from tests.test_codegen import model_of, node
    from tests.test_int8 import init

    x = RNG.uniform(-1.1, 1.1, (2, 24, 20, 2)).astype(np.float32)
    return {
        # RAFT's lookup: bilinear, align_corners, zeros padding, at a constant grid here.
        "grid_sample": model_of(
            [node("Relu", ["x"], ["r"]),
             node("GridSample", ["r", "grid"], ["y"], mode="bilinear", align_corners=1)],
            [("x", [2, 40, 64, 96])], "y", [init("grid", x)], opset=16,
        ),
        "einsum_attention": model_of(
            [node("Einsum", ["x", "k"], ["y"], equation="bghid,bghjd->bghij")],
            [("x", [1, 2, 3, 16, 8]), ("k", [1, 2, 3, 20, 8])], "y", [], opset=12,
        ),
    }


@pytest.mark.parametrize(("chip", "scheme"), [("bm1684x", "F16"), ("bm1684x", "F32"), ("bm1684x", "INT8"),
                                              ("cv183x", "BF16")])
@pytest.mark.parametrize("graph", ["grid_sample", "einsum_attention"])
def test_device_reproduces_the_interpreter(graph, chip, scheme, tmp_path):
    """INT8 runs GridSample in float between casts (no INT8 form): the device too. On
    cv183x (32 KiB per lane) the grid_sample input does not fit whole and is cut."""
    from tests.test_codegen import compile_and_compare, lower
    from tpu_xdsl.device.isa import Compute

    tpu, feeds = lower(_device_graphs()[graph], scheme, chip, tmp_path)
    model = compile_and_compare(tpu, feeds)
    if graph == "grid_sample" and chip == "cv183x":
        assert sum(isinstance(i, Compute) and i.kind == "grid_sample" for i in model.instructions) > 1
