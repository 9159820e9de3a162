"""Weights of top-fuse-layernorm.mlir: eps, the exponent 2, gamma and beta."""

import sys

import numpy as np

rng = np.random.default_rng(0)
np.savez(
    sys.argv[1],
    two=np.float32(2.0),
    eps=np.float32(1e-5),
    eps6=np.full((1,), 1e-6, np.float32),
    gamma=rng.standard_normal(8).astype(np.float32),
    beta=rng.standard_normal(8).astype(np.float32),
    gamma_hw=rng.standard_normal((1, 4, 8)).astype(np.float32),
    per_row=rng.standard_normal((5, 1)).astype(np.float32),
)
