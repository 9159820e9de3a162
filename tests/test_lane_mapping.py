"""Convolutions mapped so more of the array works (`backend/first_conv.py`,
`backend/deconv_blocks.py`): a first convolution on 3 channels with its kernel rows folded
into its input channels ("3ic"), and a deconvolution whose kernel equals its stride as a
1x1 convolution and a depth2space. The INT8 results equal the TPU interpreter's on the
module before the rewrite, bit for bit, and the array runs fewer cycles (the cycle
counts below are the formula of docs/device.md, "Timing", worked by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_codegen import lower, node, weight
from tests.test_int8 import model_of
from tpu_xdsl.backend.codegen import codegen
from tpu_xdsl.device.isa import Compute
from tpu_xdsl.device.runtime import run_model
from tpu_xdsl.dialects.attr_values import to_py
from tpu_xdsl.interp.runner import ModuleRunner
from tpu_xdsl.transforms.tpu_assign_memory import assign_memory
from tpu_xdsl.transforms.tpu_layer_group import layer_group
from tpu_xdsl.weights import weights_of


def _compiled_equal(tpu, feeds) -> tuple[dict, object]:
    """The interpreter's outputs before grouping; after grouping (with the rewrites) the
    interpreter and the device give the same, bit for bit. Returns (outputs, program)."""
    expected = ModuleRunner(tpu, weights_of(tpu)).run(feeds)
    layer_group(tpu)
    regrouped = ModuleRunner(tpu, weights_of(tpu)).run(feeds)
    assign_memory(tpu)
    model = codegen(tpu)
    got = run_model(model, feeds).outputs
    for name, value in expected.items():
        np.testing.assert_array_equal(regrouped[name], value, err_msg=name)
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    return expected, model


def _conv_cycles(model, kind: str = "conv") -> int:
    from tpu_xdsl.device.chip import chip_config
    from tpu_xdsl.device.timing import cycles

    chip = chip_config(model.chip)
    return sum(cycles(chip, i) - chip.compute_latency for i in model.instructions
               if isinstance(i, Compute) and i.kind == kind)


def test_a_7x7_stem_on_3_channels_folds_its_kernel_rows_into_channels(tmp_path):
    model = model_of(
        [node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[7, 7], strides=[2, 2], pads=[3, 3, 3, 3]),
         node("Relu", ["c"], ["y"])],
        [("x", [1, 3, 112, 112])], "y", [weight("w", [16, 3, 7, 7], 0.1), weight("b", [16], 0.1)],
    )
    tpu, feeds = lower(model, "INT8", "bm1684x", tmp_path)
    _, program = _compiled_equal(tpu, feeds)
    (concat,) = [op for op in tpu.walk() if op.name == "tpu.concat"]
    assert concat.results[0].type.get_shape() == (1, 21, 56, 112)  # 7 rows x 3 channels, 56 output rows
    convs = [op for op in tpu.walk() if op.name == "tpu.conv"]
    assert [to_py(op.attributes["kernel_shape"]) for op in convs] == [[1, 7]]
    # 16 output channels on one lane row, 21 input channels in one pass of 64, 7 taps instead
    # of 49, ceil(56 * 56 / 4) = 784 groups of output pixels.
    assert _conv_cycles(program) == 7 * 784


@pytest.mark.parametrize("scheme", ["INT8", "INT8_per_tensor"])
def test_a_block_deconvolution_becomes_a_1x1_convolution_and_a_depth2space(scheme, tmp_path):
    model = model_of(
        [node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
        [("x", [1, 24, 40, 40])], "y", [weight("w", [24, 1, 2, 2], 0.3), weight("b", [1], 0.5)],
    )
    tpu, feeds = lower(model, scheme, "bm1684x", tmp_path)
    _, program = _compiled_equal(tpu, feeds)
    assert not [op for op in tpu.walk() if op.name == "tpu.deconv"]
    (space,) = [op for op in tpu.walk() if op.name == "tpu.depth2space"]
    assert space.results[0].type.get_shape() == (1, 1, 80, 80)
    (conv,) = [op for op in tpu.walk() if op.name == "tpu.conv"]
    assert conv.results[0].type.get_shape() == (1, 4, 40, 40)
    # One 1x1 tap over ceil(40 * 40 / 4) = 400 pixel groups, where the deconvolution ran
    # 4 taps over ceil(80 * 80 / 4) = 1600 with one lane of 64 busy.
    assert _conv_cycles(program) == 400


def test_an_overlapping_deconvolution_stays_a_deconvolution(tmp_path):
    model = model_of(
        [node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[3, 3], strides=[2, 2])],
        [("x", [1, 8, 16, 16])], "y", [weight("w", [8, 4, 3, 3], 0.3)],
    )
    tpu, feeds = lower(model, "INT8", "bm1684x", tmp_path)
    _compiled_equal(tpu, feeds)
    assert [op for op in tpu.walk() if op.name == "tpu.deconv"]
    assert not [op for op in tpu.walk() if op.name == "tpu.depth2space"]
