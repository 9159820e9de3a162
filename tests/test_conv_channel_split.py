"""Convolutions too large for local memory are cut further instead of refused: 3-D ones
(video) along frames, rows and output channels; each compiled program reproduces the TPU
interpreter on the device model (the same comparison as tests/test_codegen.py)."""

from __future__ import annotations

import pytest

from tests.test_codegen import compile_and_compare, conv, lower
from tpu_xdsl.device.isa import Compute

# s3d's first layer at a tenth of its size: a (1, 7, 7) 3-D convolution with stride
# (1, 2, 2). On cv183x (32 KiB per lane) one frame of one input channel takes
# 2 * 96 * 96 = 18 KiB: cut along N alone (all a 3-D window could be cut along before),
# its input and output need far more than a lane.
S3D_STEM = conv([1, 3, 8, 96, 96], [16, 3, 1, 7, 7], strides=[1, 2, 2], pads=[0, 3, 3, 0, 3, 3])
# Its second: (7, 1, 1) along time, stride 2 in time, 16 channels in and out.
S3D_TEMPORAL = conv([1, 16, 8, 64, 64], [16, 16, 7, 1, 1], strides=[2, 1, 1], pads=[3, 0, 0, 3, 0, 0])


@pytest.mark.parametrize("scheme", ["BF16", "INT8"])
@pytest.mark.parametrize("graph", [S3D_STEM, S3D_TEMPORAL], ids=["stem", "temporal"])
def test_3d_convolution_is_cut_along_frames_and_rows(graph, scheme, tmp_path):
    tpu, feeds = lower(graph, scheme, "cv183x", tmp_path)
    model = compile_and_compare(tpu, feeds)
    assert sum(isinstance(i, Compute) and i.kind == "conv" for i in model.instructions) > 1
