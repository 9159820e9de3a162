"""Weights of top-constant-fold.mlir."""

import sys

import numpy as np

rng = np.random.default_rng(0)
np.savez(
    sys.argv[1],
    a=rng.standard_normal((2, 3)).astype(np.float32),
    b=rng.standard_normal(3).astype(np.float32),
    w=rng.standard_normal((3, 4)).astype(np.float32),
    idx=np.array([2, 0], np.int64),
    one=np.array([1.0], np.float32),
    zero=np.zeros((1, 3), np.float32),
    ones=np.ones((2, 2, 3), np.float32),
)
