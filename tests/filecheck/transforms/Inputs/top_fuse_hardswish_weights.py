"""Weights of top-fuse-hardswish.mlir: the scalars of x * relu6(x + 3) / 6."""

import sys

import numpy as np

np.savez(
    sys.argv[1],
    three=np.float32(3.0),
    six=np.float32(6.0),
    sixth=np.float32(1 / 6),
    five=np.float32(5.0),
    three_c=np.full((1, 3, 1, 1), 3.0, np.float32),
)
