"""Matmul, normalization and softmax kernels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpu_xdsl.interp.kernels import ResultSpec, kernel
from tpu_xdsl.interp.kernels.activation import fused_relu


@kernel("matmul")
def matmul(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    a, b, bias = inputs
    if attrs.get("left_transpose"):
        a = np.swapaxes(a, -1, -2)
    if attrs.get("right_transpose"):
        b = np.swapaxes(b, -1, -2)
    y = np.matmul(a, b)
    if bias is not None:
        y = y + bias
    return [fused_relu(y, attrs)]


@kernel("softmax")
def softmax(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    x = inputs[0]
    axis = attrs.get("axis", -1)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return [e / np.sum(e, axis=axis, keepdims=True)]
