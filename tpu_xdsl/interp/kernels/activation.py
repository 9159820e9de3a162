"""Activation kernels, and the ReLU that conv/matmul/add fuse."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpu_xdsl.interp.kernels import ResultSpec, kernel


def relu_limited(x: np.ndarray, limit: float | None) -> np.ndarray:
    y = np.maximum(x, 0)
    if limit is not None and limit > 0:
        y = np.minimum(y, limit)
    return y.astype(x.dtype, copy=False)


def fused_relu(y: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    """Apply the `do_relu`/`relu_limit` that canonicalization fuses into an op."""
    if not attrs.get("do_relu", False):
        return y
    return relu_limited(y, attrs.get("relu_limit"))


@kernel("relu")
def relu(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    return [relu_limited(inputs[0], attrs.get("relu_limit"))]


@kernel("sigmoid")
def sigmoid(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    x = inputs[0]
    return [(1.0 / (1.0 + np.exp(-x))).astype(x.dtype, copy=False)]


@kernel("tanh")
def tanh(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    return [np.tanh(inputs[0])]
