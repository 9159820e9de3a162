"""Convolutions mapped so more of the array works (`backend/first_conv.py`,
`backend/deconv_blocks.py`): a first convolution on few channels with its kernel taps (all,
or the rows) folded into its input channels ("3ic", `tpu.fold_taps`), and a deconvolution
whose kernel equals its stride as a 1x1 convolution and a depth2space (and a 1x1
convolution after a depth2space moved before it). The INT8 results
equal the TPU interpreter's on the module before the rewrite, bit for bit, and the array
runs fewer cycles (the cycle counts below are the formula of docs/device.md, "Timing",
worked by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_codegen import lower, node, weight
from tests.test_int8 import lowered, model_of
from tpu_xdsl.backend.codegen import codegen
from tpu_xdsl.device.isa import Compute
from tpu_xdsl.device.runtime import run_model
from tpu_xdsl.dialects.attr_values import to_py
from tpu_xdsl.dialects.module import tensor_names
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
    (fold,) = [op for op in tpu.walk() if op.name == "tpu.fold_taps"]
    assert fold.results[0].type.get_shape() == (1, 21, 56, 112)  # 7 rows x 3 channels, 56 output rows
    convs = [op for op in tpu.walk() if op.name == "tpu.conv"]
    assert [to_py(op.attributes["kernel_shape"]) for op in convs] == [[1, 7]]
    # 16 output channels on one lane row, 21 input channels in one pass of 64, 7 taps instead
    # of 49, ceil(56 * 56 / 4) = 784 groups of output pixels.
    assert _conv_cycles(program) == 7 * 784


def _stem_5x5(channels: int, size: int):
    return model_of(
        [node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[5, 5], strides=[2, 2], pads=[2, 1, 2, 2]),
         node("Relu", ["c"], ["y"])],
        [("x", [1, channels, size, size])], "y", [weight("w", [16, channels, 5, 5], 0.1), weight("b", [16], 0.1)],
    )


def test_a_5x5_stem_on_2_channels_folds_all_its_taps_into_channels(tmp_path):
    """25 taps x 2 channels = 50 fit the 64 input channels of a pass: the conv becomes 1x1
    over the padded windows (asymmetric pads: the fold's border fills differ per tap)."""
    tpu, feeds = lower(_stem_5x5(2, 224), "INT8", "bm1684x", tmp_path)
    _, program = _compiled_equal(tpu, feeds)
    (fold,) = [op for op in tpu.walk() if op.name == "tpu.fold_taps"]
    assert fold.results[0].type.get_shape() == (1, 50, 112, 112)
    (conv,) = [op for op in tpu.walk() if op.name == "tpu.conv"]
    assert to_py(conv.attributes["kernel_shape"]) == [1, 1] and to_py(conv.attributes["pads"]) == [0, 0, 0, 0]
    # one tap over ceil(112 * 112 / 4) = 3136 groups of output pixels, where 25 ran
    assert _conv_cycles(program) == 3136


def _stem_3x3():
    return model_of(
        [node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
         node("Relu", ["c"], ["y"])],
        [("x", [1, 3, 320, 320])], "y", [weight("w", [16, 3, 3, 3], 0.1), weight("b", [16], 0.1)],
    )


def test_a_3x3_stem_folds_all_its_taps_inside_its_layer_group(tmp_path):
    """A MobileNet stem (3x3 stride 2 on 3 channels) on bm1684x: 27 folded channels fit
    one pass, so the fold joins the group of the input's cast and the conv, a local move
    timed at the DMA's rate (latency + bytes / (DDR -> local bytes per cycle)), cut along
    rows with the conv; bit for bit. cv183x's DMA (4 GB/s at 650 MHz) makes the move
    cost more than the 8 taps save: not folded there."""
    from tpu_xdsl.device.chip import chip_config

    chip = "bm1684x"
    tpu, feeds = lower(_stem_3x3(), "INT8", chip, tmp_path)
    _, program = _compiled_equal(tpu, feeds)
    (group,) = [op for op in tpu.walk() if op.name == "tpu.group"]
    inside = {op.name for op in group.regions[0].block.ops}
    assert {"tpu.cast", "tpu.fold_taps", "tpu.conv"} <= inside
    folds = [i for i in program.instructions if isinstance(i, Compute) and i.kind == "fold_taps"]
    assert sum(i.outputs[0].view[2] for i in folds) == 160 and all(i.outputs[0].view[1] == 27 for i in folds)
    config = chip_config(chip)
    rate = config.ddr_to_lmem_bytes_per_s / config.clock_hz
    for fold in folds:
        moved = 27 * fold.outputs[0].view[2] * 160
        assert cycles_of(config, fold) == config.compute_latency + config.dma_latency + -(-moved // rate)
    (tmp_path / "cv183x").mkdir()
    slow, feeds = lower(_stem_3x3(), "INT8", "cv183x", tmp_path / "cv183x")
    _compiled_equal(slow, feeds)
    assert not [op for op in slow.walk() if op.name == "tpu.fold_taps"]


def cycles_of(chip, instruction) -> int:
    from tpu_xdsl.device.timing import cycles

    return cycles(chip, instruction)


def test_a_small_stem_is_not_folded_where_the_copies_cost_more_than_the_taps_save(tmp_path):
    tpu, feeds = lower(_stem_5x5(2, 16), "INT8", "bm1684x", tmp_path)
    _compiled_equal(tpu, feeds)
    assert not [op for op in tpu.walk() if op.name == "tpu.fold_taps"]


def test_a_folded_stem_exports_to_tosa_and_iree_computes_the_same_codes(tmp_path):
    from tests.test_tosa_int8 import _text
    from tpu_xdsl.export import iree
    from tpu_xdsl.export.convert_tpu_to_tosa import export_tpu_tosa

    _, tpu, feeds, _ = lowered(_stem_5x5(2, 224), tmp_path, samples=4, chip_name="bm1684x", round_mode="half_up")
    expected = ModuleRunner(tpu, weights_of(tpu)).run(feeds)
    layer_group(tpu)
    assert [op for op in tpu.walk() if op.name == "tpu.fold_taps"]
    weights = dict(weights_of(tpu))
    got = iree.load_vmfb(iree.compile_tosa(_text(export_tpu_tosa(tpu, weights)))).run(feeds)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name].astype(np.int16) + 128 if value.dtype == np.uint8 else got[name],
                                      value, err_msg=name)


def test_fold_taps_is_the_windows_of_the_padded_input():
    from tpu_xdsl.kernels import ResultSpec, load_all

    x = np.arange(2 * 3 * 7 * 6, dtype=np.int8).reshape(2, 3, 7, 6)
    attrs = {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 2, 1]}
    (got,) = load_all()["fold_taps"]([x], attrs, [ResultSpec((2, 18, 4, 2), np.dtype(np.int8))])
    padded = np.zeros((2, 3, 10, 7), np.int8)
    padded[:, :, 1:8, 0:6] = x
    for i in range(3):
        for j in range(2):
            for r in range(4):
                for q in range(2):
                    tap = i * 2 + j
                    assert np.array_equal(got[:, tap * 3:(tap + 1) * 3, r, q], padded[:, :, i + 2 * r, j + 3 * q])


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


def _reads_a_depth2space(tpu) -> list[str]:
    return [op.name for op in tpu.walk() if op.name == "tpu.conv"
            and getattr(op.operands[0].owner, "name", "") == "tpu.depth2space"]


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_a_1x1_convolution_after_a_depth2space_moves_before_it(mode, tmp_path):
    """depth2space then a 1x1 convolution (8 -> 3 channels) becomes the convolution on the
    blocks (block-diagonal, 32 -> 12 channels) then the depth2space: the same codes, bit for
    bit, and the copy moves 12 channels where it moved 32."""
    model = model_of(
        [node("Relu", ["x"], ["r"]), node("DepthToSpace", ["r"], ["d"], blocksize=2, mode=mode),
         node("Conv", ["d", "w", "b"], ["y"], kernel_shape=[1, 1])],
        [("x", [1, 32, 20, 20])], "y", [weight("w", [3, 8, 1, 1], 0.4), weight("b", [3], 0.2)],
    )
    tpu, feeds = lower(model, "INT8", "bm1684x", tmp_path)
    assert _reads_a_depth2space(tpu)
    _compiled_equal(tpu, feeds)
    assert not _reads_a_depth2space(tpu)
    (space,) = [op for op in tpu.walk() if op.name == "tpu.depth2space"]
    assert space.operands[0].type.get_shape() == (1, 12, 20, 20) and to_py(space.attributes["mode"]) == mode


def test_a_dbnet_head_copies_its_narrow_output_instead_of_its_wide_input(tmp_path):
    """Two block deconvolutions in a row, as PP-OCR's detection head (24 -> 24 -> 1
    channels, each 2x2 stride 2): the second one's 1x1 convolution moves before the first
    one's depth2space and runs in its group."""
    model = model_of(
        [node("ConvTranspose", ["x", "w1", "b1"], ["u"], kernel_shape=[2, 2], strides=[2, 2]),
         node("Relu", ["u"], ["r"]),
         node("ConvTranspose", ["r", "w2", "b2"], ["v"], kernel_shape=[2, 2], strides=[2, 2]),
         node("Sigmoid", ["v"], ["y"])],
        [("x", [1, 24, 40, 40])], "y",
        [weight("w1", [24, 24, 2, 2], 0.3), weight("b1", [24], 0.2), weight("w2", [24, 1, 2, 2], 0.3),
         weight("b2", [1], 0.5)],
    )
    tpu, feeds = lower(model, "INT8", "bm1684x", tmp_path)
    _, program = _compiled_equal(tpu, feeds)
    assert not _reads_a_depth2space(tpu) and not [op for op in tpu.walk() if op.name == "tpu.deconv"]
    spaces = [op for op in tpu.walk() if op.name == "tpu.depth2space"]
    # The depth2spaces move the last convolution's output (16 channels at 40 x 40, then 4 at
    # 80 x 80), where the first one moved its 96 input channels at 40 x 40.
    assert [op.operands[0].type.get_shape() for op in spaces] == [(1, 16, 40, 40), (1, 4, 80, 80)]
    copied = sum(i.src.nbytes for i in program.instructions if type(i).__name__ == "DmaCopy")
    assert copied == 2 * 16 * 40 * 40
    (moved,) = [op for op in tpu.walk() if op.name == "tpu.conv" and tensor_names(op)[0].endswith("_before_space")]
    assert moved.parent_op().name == "tpu.group"  # with the first block convolution
