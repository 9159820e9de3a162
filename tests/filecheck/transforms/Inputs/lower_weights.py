"""Weights for lower-top-to-tpu.mlir: a 4x3x3x3 filter and a bias."""

import sys

import numpy as np

rng = np.random.default_rng(0)
np.savez(
    sys.argv[1], w=rng.standard_normal((4, 3, 3, 3)).astype(np.float32), b=rng.standard_normal(4).astype(np.float32)
)
