"""Coefficient images (`backend/codegen/constants.py`): a layer group's adjacent weights
come in one transfer of their lane image where the timing model says that is faster, the
results unchanged, no weight held twice in DDR and the roofline bound counting the weights'
own bytes.

Expected cycles are worked out by hand from bm1684x's figures (200 cycles of DMA latency,
58 bytes a cycle from DDR to local memory).
"""

from __future__ import annotations

import numpy as np

from tests.test_codegen import lower
from tests.test_layer_group_codegen import conv_chain
from tpu_xdsl.backend import slicing
from tpu_xdsl.backend.codegen import Codegen, codegen
from tpu_xdsl.backend.codegen.constants import Constant, _segments
from tpu_xdsl.backend.codegen.driver import POLICIES
from tpu_xdsl.backend.lanes import lane_bytes
from tpu_xdsl.backend.layer_groups.layout import compact_weights
from tpu_xdsl.backend.layer_groups.steps import Member
from tpu_xdsl.backend.slicing import OpShape
from tpu_xdsl.device.chip import BM1684X, chip_config
from tpu_xdsl.device.isa import DdrView, DmaLoad, LocalTensor
from tpu_xdsl.device.runtime import roofline_terms, run_model
from tpu_xdsl.device.simulator import schedule
from tpu_xdsl.dialects.module import main_func
from tpu_xdsl.interp.runner import ModuleRunner
from tpu_xdsl.transforms.tpu_assign_memory import assign_memory
from tpu_xdsl.transforms.tpu_layer_group import layer_group
from tpu_xdsl.weights import attach_weights, weights_of


def _constant(key: str, addr: int, dtype: str, shape4: tuple[int, int, int, int]) -> Constant:
    size = int(np.prod(shape4))
    return Constant(key, DdrView.contiguous(0, dtype, (size,)), LocalTensor(addr, dtype, shape4, (size,)))


def test_a_filter_and_its_bias_come_in_one_image():
    # 64 output channels of 1024 int8 taps (1024 bytes a lane), then 64 int32 biases (one
    # plane of 4 bytes a lane, 64 with its padding).
    weights = _constant("w", 0, "int8", (1, 64, 1, 1024))
    bias = _constant("b", 1024, "int32", (1, 64, 1, 1))
    alone = (200 + -(-65536 // 58)) + (200 + -(-256 // 58))  # 1330 + 205
    image = 200 + -(-(1024 + 64) * 64 // 58)  # 1401
    assert image < alone
    assert [[c.key for c in s] for s in _segments(BM1684X, [weights, bias])] == [["w", "b"]]


def test_a_tensor_on_one_lane_is_not_spread_over_all_of_them():
    # One channel of 19,200 bytes sits in lane 0; its image would move 64 lanes' worth.
    lone = _constant("one", 0, "int8", (1, 1, 1, 19200))
    wide = _constant("wide", 19200, "int8", (1, 64, 1, 64))
    alone = (200 + -(-19200 // 58)) + (200 + -(-4096 // 58))  # 532 + 271
    image = 200 + -(-(19200 + 64) * 64 // 58)
    assert alone < image
    assert [[c.key for c in s] for s in _segments(BM1684X, [lone, wide])] == [["one"], ["wide"]]


def test_a_grouped_chain_loads_its_weights_as_images_with_the_same_results(tmp_path):
    tpu, feeds = lower(conv_chain(), "INT8", "bm1684x", tmp_path)
    expected = ModuleRunner(tpu, weights_of(tpu)).run(feeds)
    alone_module = tpu.clone()
    attach_weights(alone_module, dict(weights_of(tpu)))
    layer_group(tpu)
    assign_memory(tpu)
    assign_memory(alone_module)
    grouped, alone = codegen(tpu), codegen(alone_module)
    got = run_model(grouped, feeds).outputs
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    images = [i for i in grouped.instructions if isinstance(i, DmaLoad) and i.dst.dtype == "uint8"
              and not i.dst.eu_align]
    assert images, "the group's filters and biases come in images"
    # Fewer loads of coefficients than weights (two convolutions' filters and biases, ...).
    weights = [op for op in main_func(tpu).body.block.ops if op.name == "top.weight"]
    weight_loads = [i for i in grouped.instructions if isinstance(i, DmaLoad)
                    and i.src.addr + i.src.nbytes <= len(grouped.coefficients)]
    assert len(weights) >= 4
    assert len(weight_loads) < len(weights)
    # The bound counts the weights themselves, as op by op (where no image exists).
    assert alone.weight_bytes is None or alone.weight_bytes == len(alone.coefficients)
    assert grouped.weight_bytes == len(alone.coefficients)
    assert roofline_terms(grouped)[1] == roofline_terms(alone)[1]


def test_codegen_keeps_the_fastest_way_of_loading_a_groups_weights(tmp_path):
    tpu, feeds = lower(conv_chain(), "INT8", "cv183x", tmp_path)
    layer_group(tpu)
    assign_memory(tpu)
    chip = chip_config("cv183x")
    each = [schedule(chip, Codegen(tpu, chip, loads).run().instructions).total_cycles for loads in POLICIES]
    chosen = codegen(tpu)
    assert schedule(chip, chosen.instructions).total_cycles == min(each)
    expected = ModuleRunner(tpu, weights_of(tpu)).run(feeds)
    got = run_model(chosen, feeds).outputs
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_a_convolutions_filter_and_bias_keep_their_planes_packed():
    """TPU-MLIR keeps a convolution's filter and bias without execution-unit padding between
    planes (BM168x's is_eu_align); other weights (a table) keep aligned planes."""
    attrs = {"kernel_shape": [1, 1], "pads": [0, 0, 0, 0], "strides": [1, 1], "dilations": [1, 1], "group": 1}
    act, out, w, b = (1, 32, 4, 4), (1, 200, 4, 4), (200, 32, 1, 1), (200,)
    conv = Member(OpShape("conv", attrs, (act, w, b), (False, True, True), (out,)), ("x", "w", "b"), ("y",))
    table = Member(OpShape("lut", {}, (out, (200, 256)), (False, True), (out,)), ("y", "t"), ("z",))
    assert compact_weights([conv, table]) == {"w", "b"}
    # 200 output channels on 64 lanes: 4 planes a lane of 32 int8 taps (128 bytes packed,
    # 4 x 64 aligned) and of one int32 bias (16 bytes packed, 4 x 64 aligned).
    whole = slicing.whole(w)
    assert lane_bytes("int8", whole, True, 64, 64, eu_align=False) == 128
    assert lane_bytes("int8", whole, True, 64, 64) == 256
    assert lane_bytes("int32", slicing.whole(b), True, 64, 64, eu_align=False) == 16
    assert lane_bytes("int32", slicing.whole(b), True, 64, 64) == 256
