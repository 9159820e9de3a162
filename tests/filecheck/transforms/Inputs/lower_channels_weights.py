"""Weights and per-channel ranges for lower-top-to-tpu-channels.mlir (powers of two throughout)."""

import sys

import numpy as np

np.savez(
    sys.argv[1],
    w=np.array([[1.0, 0.0], [0.0, 0.5]], np.float32).reshape(2, 2, 1, 1),
    wd=np.array([[1.0, 1.0]], np.float32).reshape(1, 2, 1, 1),
    c_ranges=np.array([[-2.0, -0.5], [1.0, 0.25]], np.float32),  # [min; max] per channel
    y_ranges=np.array([[0.0, 0.0], [0.5, 0.25]], np.float32),
)
