"""Shape and data-movement kernels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpu_xdsl.interp.kernels import ResultSpec, kernel


@kernel("reshape")
def reshape(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    return [np.reshape(inputs[0], results[0].shape)]


@kernel("cast")
def cast(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    return [np.asarray(inputs[0]).astype(results[0].dtype)]
