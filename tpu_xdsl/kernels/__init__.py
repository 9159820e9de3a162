"""Numpy kernels for TOP ops (and float TPU ops), one per op kind, in a registry.

A kernel is `fn(inputs, attrs, results) -> list[np.ndarray]`:
`inputs` holds one numpy array per operand (None for a `top.none` operand, a
list for a variadic operand), `attrs` the op's attributes as Python values
(`tpu_xdsl.dialects.attr_values`), and `results` one `ResultSpec` (shape,
numpy dtype) per result, for ops whose output is defined by the result type
(reshape, expand, cast, interp). Kernels know nothing of xDSL.

Kernels compute in the dtype of their inputs and return arrays of the result
dtype. No Python loops over elements, pixels or channels: conv and matmul go
through BLAS GEMM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np


@dataclass(frozen=True)
class ResultSpec:
    """What the IR says a result is: its static shape and numpy dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype


# A kernel returns one array per result, None for a result the op does not produce (a
# `none` result of a recurrent op, whose ResultSpec has shape ()).
Kernel = Callable[[Sequence[Any], dict[str, Any], Sequence[ResultSpec]], Sequence[np.ndarray | None]]

KERNELS: dict[str, Kernel] = {}
# A kernel function as it is written: registering it keeps its own (narrower) signature.
K = TypeVar("K", bound=Kernel)


def kernel(*kinds: str) -> Callable[[K], K]:
    """Register `fn` as the kernel of each op kind (the op name without dialect)."""

    def register(fn: K) -> K:
        for kind in kinds:
            if kind in KERNELS:
                raise ValueError(f"kernel for '{kind}' registered twice")
            KERNELS[kind] = fn
        return fn

    return register


def load_all() -> dict[str, Kernel]:
    """Import every kernel module so the registry is complete."""
    # breaks the cycle registry -> kernels (each kernel module imports the registry)
    from tpu_xdsl.kernels import (  # noqa: F401
        activation,
        conv_pool,
        elementwise,
        nn,
        recurrent,
        sampling,
        tensor,
    )

    return KERNELS
