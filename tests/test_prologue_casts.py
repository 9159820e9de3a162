"""A cast that runs inside the slices of the op after it (`backend/prologue.py`): the INT8
dequantization before a softmax never goes to DDR, tpu-assign-memory keeps the cast's
input live while the softmax writes, and the device still gives the interpreter's
results."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_codegen import compile_and_compare, lower, node
from tests.test_int8 import model_of
from tpu_xdsl.backend.prologue import prologue_casts
from tpu_xdsl.device.isa import Compute, DmaStore
from tpu_xdsl.dialects.module import main_func, tensor_names


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
