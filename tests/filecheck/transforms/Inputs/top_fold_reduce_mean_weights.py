"""Weights of top-fold-reduce-mean.mlir: 1/512 (how jax2tf writes a mean over 512), its
reciprocal 512, and a scale that is no count's reciprocal."""

import sys

import numpy as np

np.savez(
    sys.argv[1],
    inv512=np.float32(1.0 / 512),
    n512=np.full((1,), 512.0, np.float32),
    half=np.float32(0.5),
)
