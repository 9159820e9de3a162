"""Layer groups in codegen: chains of ops run step by step out of local memory give the TPU
interpreter's results bit for bit (INT8) while moving fewer bytes through DDR."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_codegen import GRAPHS, lower, model_of, node, weight
from tpu_xdsl.backend.codegen import codegen
from tpu_xdsl.device.isa import Compute, DmaLoad, DmaStore
from tpu_xdsl.device.runtime import run_model
from tpu_xdsl.dialects.module import main_func
from tpu_xdsl.interp.runner import ModuleRunner
from tpu_xdsl.transforms.tpu_assign_memory import assign_memory
from tpu_xdsl.transforms.tpu_layer_group import layer_group
from tpu_xdsl.weights import attach_weights, weights_of


def conv_chain(flatten: bool = False):
    """conv3x3+relu -> conv3x3 (stride 1) -> add with the first conv's output -> max pool
    (-> flatten into f, an op no layer group takes)."""
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Add", ["c2", "r1"], ["s"]),
        node("MaxPool", ["s"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
    ]
    inits = [
        weight("w1", [16, 8, 3, 3]),
        weight("b1", [16], 0.1),
        weight("w2", [16, 16, 3, 3]),
        weight("b2", [16], 0.1),
    ]
    if flatten:
        nodes.append(node("Flatten", ["y"], ["f"]))
    return model_of(nodes, [("x", [2, 8, 96, 64])], "f" if flatten else "y", inits)


def compute_ops(tpu):
    return [op for op in main_func(tpu).body.block.ops if op.name.startswith("tpu.") and op.name != "tpu.cast"]


def ddr_bytes(model) -> int:
    return sum(i.dst.nbytes if isinstance(i, DmaLoad) else i.src.nbytes
               for i in model.instructions if isinstance(i, (DmaLoad, DmaStore)))


@pytest.mark.parametrize(("scheme", "chip"), [("INT8", "cv183x"), ("INT8", "bm1684x"), ("BF16", "cv183x")])
def test_a_grouped_chain_equals_the_interpreter(scheme, chip, tmp_path):
    tpu, feeds = lower(conv_chain(), scheme, chip, tmp_path)
    expected = ModuleRunner(tpu, weights_of(tpu)).run(feeds)
    alone_module = tpu.clone()
    attach_weights(alone_module, dict(weights_of(tpu)))
    report = layer_group(tpu)
    assert [[op.name for op in plan.ops] for plan in report.plans] == [
        ["tpu.cast", "tpu.conv", "tpu.conv", "tpu.add", "tpu.max_pool", "tpu.cast"]
    ]
    assert ModuleRunner(tpu, weights_of(tpu)).run(feeds).keys() == expected.keys()
    assign_memory(tpu)
    assign_memory(alone_module)
    grouped = codegen(tpu)
    alone = codegen(alone_module)
    for model in (grouped, alone):
        got = run_model(model, feeds).outputs
        for name, value in expected.items():
            if value.dtype.kind in "iu" or scheme == "INT8":
                np.testing.assert_array_equal(got[name], value, err_msg=name)
            else:
                cos = float(np.dot(got[name].ravel().astype(np.float64), value.ravel())
                            / np.linalg.norm(got[name].astype(np.float64)) / np.linalg.norm(value.astype(np.float64)))
                assert cos >= 0.99999, (name, cos)
    # The group keeps its intermediate tensors in local memory.
    assert ddr_bytes(grouped) < 0.6 * ddr_bytes(alone), (ddr_bytes(grouped), ddr_bytes(alone))
    assert len([i for i in grouped.instructions if isinstance(i, Compute) and i.kind == "conv"]) >= 2
    assert grouped.groups and all(i.group == 0 for i in grouped.instructions)


def test_backward_slice_inference_grows_halos_and_copies_a_shared_operand():
    """Rows [32, 64) of conv2(conv1(x)) + conv1(x), both 3x3 with pads 1: conv2 reads rows
    [31, 65) of conv1's output (its halo), the add rows [32, 64) of it (a local copy), and
    conv1 reads rows [30, 66) of x."""
    from tpu_xdsl.backend.layer_groups.steps import Member, plan_step
    from tpu_xdsl.backend.slicing import OpShape

    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1], "dilations": [1, 1], "group": 1}
    act, w = (1, 8, 96, 64), (8, 8, 3, 3)
    members = [
        Member(OpShape("conv", attrs, (act, w, None), (False, True, False), (act,)), ("x", "w1", None), ("c1",)),
        Member(OpShape("conv", attrs, (act, w, None), (False, True, False), (act,)), ("c1", "w2", None), ("c2",)),
        Member(OpShape("add", {}, (act, act), (False, False), (act,)), ("c2", "c1"), ("s",)),
    ]
    step = plan_step(members, {"w1", "w2"}, ((0, 1), (0, 8), (32, 32), (0, 64)))
    assert step is not None
    assert step.boxes["s"][2] == step.boxes["c2"][2] == (32, 32)
    assert step.boxes["c1"][2] == (31, 34)
    assert step.boxes["x"][2] == (30, 36)
    assert step.copies == {(2, 1): ((0, 1), (0, 8), (32, 32), (0, 64))}
    # the first rows: the window's top pad stays a pad, no row above 0 is read
    first = plan_step(members, {"w1", "w2"}, ((0, 1), (0, 8), (0, 32), (0, 64)))
    assert first is not None and first.boxes["c1"][2] == (0, 33) and first.boxes["x"][2] == (0, 34)


@pytest.mark.parametrize("scheme", ["INT8", "INT8_asym"])
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_every_codegen_graph_gives_the_same_int8_outputs_grouped(graph, scheme, tmp_path):
    """The graphs of tests/test_codegen.py on cv183x, compiled with layer groups and op by op:
    identical outputs (where tpu-layer-group finds a group at all)."""
    tpu, feeds = lower(GRAPHS[graph], scheme, "cv183x", tmp_path)
    alone_module = tpu.clone()
    attach_weights(alone_module, dict(weights_of(tpu)))
    layer_group(tpu)
    outputs = {}
    for name, module in (("grouped", tpu), ("alone", alone_module)):
        assign_memory(module)
        outputs[name] = run_model(codegen(module), feeds).outputs
    for key, value in outputs["alone"].items():
        np.testing.assert_array_equal(outputs["grouped"][key], value, err_msg=key)


@pytest.mark.parametrize(
    ("kind", "attrs", "rows_in", "rows_out"),
    [
        ("interp", {"mode": "nearest", "coordinate_mode": "asymmetric", "nearest_mode": "floor",
                    "scales": [1.0, 1.0, 2.0, 2.0]}, 10, 20),
        ("interp", {"mode": "nearest", "coordinate_mode": "asymmetric", "nearest_mode": "floor",
                    "scales": [1.0, 1.0, 8.0, 1.0]}, 5, 40),
        ("interp", {"mode": "nearest", "coordinate_mode": "half_pixel", "nearest_mode": "round_prefer_floor",
                    "scales": [1.0, 1.0, 1.5, 2.0]}, 11, 16),
        ("interp", {"mode": "nearest", "coordinate_mode": "align_corners", "nearest_mode": "round_prefer_ceil"},
         7, 19),
        ("interp", {"mode": "nearest", "coordinate_mode": "half_pixel", "nearest_mode": "round_prefer_floor"},
         12, 5),  # shrinking
        ("upsample", {"scale_h": 3, "scale_w": 2}, 6, 18),
    ],
)
def test_a_nearest_resize_sliced_along_rows_gives_the_rows_of_the_whole(kind, attrs, rows_in, rows_out):
    """Every row box of the output, computed by the kernel from the operand box and the
    attributes `slicing.plan` gives, equals those rows of the whole resize."""
    from tpu_xdsl.backend import slicing
    from tpu_xdsl.kernels import ResultSpec
    from tpu_xdsl.kernels.tpu import TPU_KERNELS

    x_shape = (1, 3, rows_in, 4)
    out_shape = (1, 3, rows_out, 4 * (2 if attrs.get("scales", [0, 0, 0, 2])[3] == 2 or kind == "upsample" else 1))
    shape = slicing.OpShape(kind, attrs, (x_shape,), (False,), (out_shape,))
    assert 2 in slicing.splittable_axes(shape)
    x = np.random.default_rng(0).integers(-128, 128, x_shape).astype(np.int8)
    (whole,) = TPU_KERNELS[kind]([x], dict(attrs), [ResultSpec(out_shape, np.dtype(np.int8))])
    for start in range(rows_out):
        for size in range(1, rows_out - start + 1):
            box = ((0, 1), (0, 3), (start, size), (0, out_shape[3]))
            plan = slicing.plan(shape, box)
            (x_box,) = plan.operands
            assert x_box is not None
            part = x[tuple(slice(s, s + n) for s, n in x_box)]
            (got,) = TPU_KERNELS[kind]([part], plan.attrs, [ResultSpec(slicing.sizes(box), np.dtype(np.int8))])
            np.testing.assert_array_equal(got, whole[:, :, start : start + size], err_msg=f"rows {start}+{size}")


def test_a_linear_resize_is_not_cut_along_rows():
    from tpu_xdsl.backend import slicing

    attrs = {"mode": "linear", "coordinate_mode": "half_pixel", "scales": [1.0, 1.0, 2.0, 2.0]}
    shape = slicing.OpShape("interp", attrs, ((1, 3, 8, 8),), (False,), ((1, 3, 16, 16),))
    assert slicing.splittable_axes(shape) == [0, 1]
    with pytest.raises(ValueError, match="rows"):
        slicing.plan(shape, ((0, 1), (0, 3), (0, 8), (0, 16)))


@pytest.mark.parametrize(
    ("attrs", "x_shape", "out_shape"),
    [
        ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, (1, 3, 13, 9), (1, 27, 7, 5)),
        ({"kernel_shape": [5, 5], "strides": [2, 2], "pads": [2, 1, 2, 2]}, (2, 2, 11, 10), (2, 50, 6, 5)),
        ({"kernel_shape": [2, 3], "strides": [1, 1], "pads": [0, 1, 0, 1]}, (1, 3, 6, 4), (1, 18, 5, 4)),
    ],
)
def test_a_whole_fold_sliced_along_rows_gives_the_rows_of_the_whole(attrs, x_shape, out_shape):
    """fold_taps (a stem's taps as channels) cut like a window: every row box of the
    output from the input rows with the halo and the pads moved to the slice's edges."""
    from tpu_xdsl.backend import slicing
    from tpu_xdsl.kernels import ResultSpec
    from tpu_xdsl.kernels.tpu import TPU_KERNELS

    shape = slicing.OpShape("fold_taps", attrs, (x_shape,), (False,), (out_shape,))
    assert slicing.splittable_axes(shape) == [0, 2]
    x = np.random.default_rng(1).integers(-128, 128, x_shape).astype(np.int8)
    (whole,) = TPU_KERNELS["fold_taps"]([x], dict(attrs), [ResultSpec(out_shape, np.dtype(np.int8))])
    rows = out_shape[2]
    for start in range(rows):
        for size in range(1, rows - start + 1):
            box = ((0, out_shape[0]), (0, out_shape[1]), (start, size), (0, out_shape[3]))
            plan = slicing.plan(shape, box)
            (x_box,) = plan.operands
            assert x_box is not None and x_box[1] == (0, x_shape[1])
            part = x[tuple(slice(s, s + n) for s, n in x_box)]
            (got,) = TPU_KERNELS["fold_taps"]([part], plan.attrs, [ResultSpec(slicing.sizes(box), np.dtype(np.int8))])
            np.testing.assert_array_equal(got, whole[:, :, start : start + size], err_msg=f"rows {start}+{size}")
    by_rows = slicing.OpShape("fold_taps", {"kernel_shape": [7, 1], "strides": [2, 1], "pads": [3, 0, 2, 0]},
                              ((1, 3, 16, 16),), (False,), ((1, 21, 8, 16),))
    assert slicing.splittable_axes(by_rows) == []  # a fold by rows keeps the input's width: alone
