"""Weights of top-fold-affine.mlir: filters, biases and the affine steps' constants."""

import sys

import numpy as np

rng = np.random.default_rng(0)


def randn(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


weights = {
    "w": randn(4, 3, 3, 3),
    "b": randn(4),
    "pw": randn(4, 4, 1, 1),
    "fc": randn(6, 4),
    "a": np.array([1.5], np.float32),
    "d": np.array([-0.25], np.float32),
    "bias4": randn(1, 4, 1, 1),
    "row4": randn(4),
    "map": randn(1, 1, 8, 8),
}
np.savez(sys.argv[1], **weights)
