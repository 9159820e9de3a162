"""Binary elementwise kernels with numpy broadcasting."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpu_xdsl.interp.kernels import ResultSpec, kernel
from tpu_xdsl.interp.kernels.activation import fused_relu

_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "pow": np.power,
    "max": np.maximum,
    "min": np.minimum,
}


def _binary(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec], fn) -> list[np.ndarray]:
    lhs, rhs = inputs
    return [fused_relu(np.asarray(fn(lhs, rhs)), attrs)]


for _kind, _fn in _BINARY.items():
    kernel(_kind)(lambda inputs, attrs, results, _fn=_fn: _binary(inputs, attrs, results, _fn))
