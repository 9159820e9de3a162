"""Casts that run inside the slices of the op next to them (`backend/fused_casts.py`): the
INT8 dequantization before a softmax and the quantization after it never go to DDR,
tpu-assign-memory keeps the first cast's input live while the softmax writes and places
the second's result as if the softmax wrote it, tpu-layer-group leaves the second out of
groups, and the device still gives the interpreter's results."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_codegen import compile_and_compare, lower, node
from tests.test_int8 import init, model_of
from tpu_xdsl.backend.codegen import codegen
from tpu_xdsl.backend.fused_casts import epilogue_casts, prologue_casts
from tpu_xdsl.device.isa import Compute, DmaLoad, DmaStore
from tpu_xdsl.device.runtime import run_model
from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.transforms.tpu_assign_memory import assign_memory
from tpu_xdsl.transforms.tpu_layer_group import layer_group
from tpu_xdsl.weights import attach_weights, weights_of


def relu_softmax():
    """relu (INT8) -> softmax (no INT8 form: a cast to float before it) on [1, 40, 600]."""
    return model_of([node("Relu", ["x"], ["r"]), node("Softmax", ["r"], ["y"], axis=-1)],
                    [("x", [1, 40, 600])], "y", [])


@pytest.mark.parametrize("chip", ["bm1684x", "cv183x"])
def test_the_cast_before_a_softmax_runs_in_its_slices(chip, tmp_path):
    tpu, feeds = lower(relu_softmax(), "INT8", chip, tmp_path)
    ops = list(main_func(tpu).body.block.ops)
    found = prologue_casts(ops)
    assert [op.name for op in found] == ["tpu.softmax"]
    (cast,) = found.values()
    cast_name = tensor_names(cast)[0]
    model = compile_and_compare(tpu, feeds)  # every tensor the device writes equals the interpreter's
    casts = [i for i in model.instructions if isinstance(i, Compute) and i.layer == cast_name]
    softmaxes = [i for i in model.instructions if isinstance(i, Compute) and i.kind == "softmax"]
    assert casts and len(casts) == len(softmaxes), "one cast per slice of the softmax"
    assert not [i for i in model.instructions if isinstance(i, DmaStore) and i.layer == cast_name]
    # The cast's input is not placed under the softmax's result, which its slices write
    # while they read it.
    source, result = cast.operands[0], next(op for op in found).results[0]

    def span(value):
        addr = value.owner.attributes["ddr"].data[value.index].value.data  # type: ignore[union-attr]
        shape = value.type.get_shape()
        return addr, addr + int(np.prod(shape)) * value.type.element_type.bitwidth // 8

    (a0, a1), (b0, b1) = span(source), span(result)
    assert a1 <= b0 or b1 <= a0


def _span(value) -> tuple[int, int]:
    addr = value.owner.attributes["ddr"].data[value.index].value.data
    return addr, addr + int(np.prod(value.type.get_shape())) * value.type.element_type.bitwidth // 8


def test_a_cast_two_ops_read_stays_alone(tmp_path):
    """Two softmaxes of the same INT8 tensor read one cast to float: it runs alone, and the
    device still gives the interpreter's results."""
    model = model_of([node("Relu", ["x"], ["r"]), node("Softmax", ["r"], ["s"], axis=-1),
                      node("Softmax", ["r"], ["t"], axis=1), node("Add", ["s", "t"], ["y"])],
                     [("x", [1, 16, 64])], "y", [])
    tpu, feeds = lower(model, "INT8", "bm1684x", tmp_path)
    ops = list(main_func(tpu).body.block.ops)
    shared = [op for op in ops if op.name == "tpu.cast" and len(list(op.results[0].uses)) > 1]
    assert shared, "the lowering shares one cast between the two softmaxes"
    assert not set(shared) & set(prologue_casts(ops).values())
    compile_and_compare(tpu, feeds)


def softmax_then_conv():
    """relu (INT8) -> softmax over channels (no INT8 form: float between two casts) ->
    1x1 conv (INT8), on [1, 16, 48, 48], as YOLOv8's box-distribution head."""
    w = np.random.default_rng(4).standard_normal((4, 16, 1, 1)).astype(np.float32)
    return model_of([node("Relu", ["x"], ["r"]), node("Softmax", ["r"], ["s"], axis=1),
                     node("Conv", ["s", "w"], ["y"], kernel_shape=[1, 1])],
                    [("x", [1, 16, 48, 48])], "y", [init("w", w)])


@pytest.mark.parametrize("chip", ["bm1684x", "cv183x"])
def test_the_cast_after_a_softmax_runs_in_its_slices(chip, tmp_path):
    tpu, feeds = lower(softmax_then_conv(), "INT8", chip, tmp_path)
    grouped = tpu.clone()
    attach_weights(grouped, dict(weights_of(tpu)))
    ops = list(main_func(tpu).body.block.ops)
    (softmax,) = [op for op in ops if op.name == "tpu.softmax"]
    found = epilogue_casts(ops)
    assert list(found) == [softmax]
    cast = found[softmax]
    model = compile_and_compare(tpu, feeds)  # every tensor the device writes equals the interpreter's
    softmax_name, cast_name = tensor_names(softmax)[0], tensor_names(cast)[0]
    casts = [i for i in model.instructions if isinstance(i, Compute) and i.layer == cast_name]
    softmaxes = [i for i in model.instructions if isinstance(i, Compute) and i.kind == "softmax"]
    assert casts and len(casts) == len(softmaxes), "one cast per slice of the softmax"
    # The softmax's slices load and store INT8 tensors only (the dequantized input and the
    # float result stay in local memory); the cast stores nothing of its own.
    moves = [i for i in model.instructions if isinstance(i, (DmaLoad, DmaStore)) and i.layer == softmax_name]
    assert {type(i) for i in moves} == {DmaLoad, DmaStore}
    assert all((i.src if isinstance(i, DmaStore) else i.dst).dtype in ("int8", "uint8") for i in moves)
    assert not [i for i in model.instructions if isinstance(i, DmaStore) and i.layer == cast_name]
    # The cast's result is written while the softmax's input is read: not on its bytes.
    (a0, a1), (b0, b1) = _span(softmax.operands[0]), _span(cast.results[0])
    assert a1 <= b0 or b1 <= a0
    # In layer groups no group takes the cast (it would load the softmax's float result to
    # quantize it); it still runs in the softmax's slices, and the outputs are the same.
    report = layer_group(grouped)
    assert all(cast_name not in tensor_names(op) for plan in report.plans for op in plan.ops)
    ops = list(main_func(grouped).body.block.ops)
    assert [tensor_names(c) for c in epilogue_casts(ops).values()] == [[cast_name]]
    assign_memory(grouped)
    in_groups = codegen(grouped)
    assert [i for i in in_groups.instructions if isinstance(i, Compute) and i.layer == cast_name]
    expected = run_model(model, feeds).outputs
    for name, value in run_model(in_groups, feeds).outputs.items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)


def test_a_float_result_two_ops_read_keeps_its_store(tmp_path):
    """The softmax's float result also goes to the model's output: no cast runs in its
    slices, and the device still gives the interpreter's results."""
    w = np.random.default_rng(4).standard_normal((4, 16, 1, 1)).astype(np.float32)
    graph = model_of([node("Relu", ["x"], ["r"]), node("Softmax", ["r"], ["s"], axis=1),
                      node("Conv", ["s", "w"], ["c"], kernel_shape=[1, 1]),
                      node("ReduceMean", ["s"], ["m"], axes=[1], keepdims=1), node("Add", ["c", "m"], ["y"])],
                     [("x", [1, 16, 24, 24])], "y", [init("w", w)], opset=13)
    tpu, feeds = lower(graph, "INT8", "bm1684x", tmp_path)
    assert not epilogue_casts(list(main_func(tpu).body.block.ops))
    compile_and_compare(tpu, feeds)
