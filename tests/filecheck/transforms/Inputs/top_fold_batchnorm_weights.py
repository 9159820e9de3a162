"""Weights of top-fold-batchnorm.mlir: conv/deconv/matmul operands and BatchNorm statistics."""

import sys

import numpy as np

rng = np.random.default_rng(0)


def stats(c: int) -> dict[str, np.ndarray]:
    return {
        "gamma": rng.uniform(0.5, 1.5, c).astype(np.float32),
        "beta": rng.standard_normal(c).astype(np.float32),
        "mean": rng.standard_normal(c).astype(np.float32),
        "var": rng.uniform(0.5, 2.0, c).astype(np.float32),
    }


weights = {
    "w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
    "b": rng.standard_normal(4).astype(np.float32),
    "dw": rng.standard_normal((4, 3, 2, 2)).astype(np.float32),
    "fc": rng.standard_normal((6, 4)).astype(np.float32),
    **{f"{k}4": v for k, v in stats(4).items()},
    **{f"{k}3": v for k, v in stats(3).items()},
    **{f"{k}6": v for k, v in stats(6).items()},
}
np.savez(sys.argv[1], **weights)
