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


# Too large even in the smallest output slices on cv183x: the three input rows one output
# row needs hold 1024 / 32 lanes x 3 x 256 x 2 bytes = 48 KiB per lane, above its 32 KiB,
# and a row cannot be cut; so the input channels are cut and the parts summed. A ReLU
# follows (fused into the conv: it must apply to the sum, not to each part).
WIDE_2D = conv([1, 1024, 4, 256], [8, 1024, 3, 3], relu=True, pads=[1, 1, 1, 1])
WIDE_3D = conv([1, 512, 3, 4, 256], [8, 512, 3, 3, 3], pads=[1, 1, 1, 1, 1, 1])


@pytest.mark.parametrize("graph", [WIDE_2D, WIDE_3D], ids=["2d", "3d"])
def test_convolution_too_wide_is_cut_along_input_channels(graph, tmp_path):
    tpu, feeds = lower(graph, "BF16", "cv183x", tmp_path)
    model = compile_and_compare(tpu, feeds)
    computes = [i for i in model.instructions if isinstance(i, Compute)]
    convs = [i for i in computes if i.kind == "conv"]
    x_channels = graph.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    # Every conv reads a part of the input channels, and the parts are summed.
    assert all(i.inputs[0].view[1] < x_channels for i in convs)
    assert any(i.kind == "add" for i in computes)
