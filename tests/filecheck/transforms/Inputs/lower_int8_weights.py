"""Weights for lower-top-to-tpu-int8.mlir, chosen so that every scale is a power of two over 127."""

import sys

import numpy as np

np.savez(
    sys.argv[1],
    w=np.array([[1.0, -0.5], [0.25, 0.125]], np.float32).reshape(2, 2, 1, 1),
    b=np.array([0.5, -0.25], np.float32),
    wm=np.array([[1.0, 0.0, 0.5], [0.5, 0.25, -0.5]], np.float32),
)
