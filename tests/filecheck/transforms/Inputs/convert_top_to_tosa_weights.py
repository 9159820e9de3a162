"""Weights of convert-top-to-tosa.mlir: two convolutions and a classifier."""

import sys

import numpy as np

rng = np.random.default_rng(0)
np.savez(
    sys.argv[1],
    w0=rng.standard_normal((8, 3, 3, 3)).astype(np.float32),
    b0=rng.standard_normal(8).astype(np.float32),
    w1=rng.standard_normal((8, 1, 3, 3)).astype(np.float32),
    wfc=rng.standard_normal((8, 4)).astype(np.float32),
)
