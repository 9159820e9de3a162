"""Weights and per-channel ranges for lower-top-to-tpu-channels-last.mlir (powers of two throughout)."""

import sys

import numpy as np

np.savez(
    sys.argv[1],
    w=np.array([[1.0, 0.0], [0.0, 0.25]], np.float32),  # [K, N]: column n is output feature n
    m_ranges=np.array([[-1.0, -0.25], [1.0, 0.25]], np.float32),  # [min; max] per feature (last axis)
    s_ranges=np.array([[0.0, 0.0], [1.0, 0.5]], np.float32),
    a_ranges=np.array([[-2.0, -0.5], [2.0, 0.5]], np.float32),
)
