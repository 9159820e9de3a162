"""Weights for convert-tpu-to-tosa.mlir: an int8 1x1 filter, its int32 bias and a uint8 table."""

import sys

import numpy as np

np.savez(
    sys.argv[1],
    w=np.array([[127, -64], [127, 64]], np.int8).reshape(2, 2, 1, 1),
    b=np.array([2032, -4064], np.int32),
    t=np.arange(256, dtype=np.uint8),
)
