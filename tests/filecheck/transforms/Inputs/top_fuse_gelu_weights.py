"""Weights of top-fuse-gelu.mlir: the scalars of the decomposed GELU."""

import sys

import numpy as np

np.savez(
    sys.argv[1],
    half=np.float32(0.5),
    one=np.float32(1.0),
    two=np.float32(2.0),
    three=np.float32(3.0),
    sqrt2=np.float32(1.4142135),
    inv_sqrt2=np.float32(0.70710678),
    k=np.float32(0.7978845608),
    c=np.float32(0.044715),
)
