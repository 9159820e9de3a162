"""Run TPU modules as the device will: float ops compute in f32 and round to the
storage type (f16/bf16) on every store; INT8 ops run the integer kernels of
`kernels.int8` (exact accumulation, multiplier/shift requantization, LUTs);
`tpu.cast` converts between types (quantizing and dequantizing with its scale).

An op runs its INT8 kernel when its first input or its result is int8/uint8;
data-movement ops (reshape, permute, slice, ...) have one kernel for every type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.interpreter import register_impls

from tpu_xdsl.dialects import Tpu
from tpu_xdsl.interp.kernels import Kernel, ResultSpec, load_all
from tpu_xdsl.interp.kernels.int8 import INT8_KERNELS
from tpu_xdsl.interp.top_interpreter import make_functions

_LOW_FLOATS = ("float16", "bfloat16")


def in_f32(kernel: Kernel) -> Kernel:
    """A kernel that computes f16/bf16 tensors in f32; `_run_kernel` rounds the result
    to the IR's storage type, as the chip stores it."""

    def run(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
        def widen(x: Any) -> Any:
            if isinstance(x, list):
                return [widen(v) for v in x]
            if isinstance(x, np.ndarray) and str(x.dtype) in _LOW_FLOATS:
                return x.astype(np.float32)
            return x

        wide = [
            ResultSpec(r.shape, np.dtype(np.float32)) if str(r.dtype) in _LOW_FLOATS else r
            for r in results
        ]
        return kernel(widen(list(inputs)), attrs, wide)

    return run


def _cast(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    """Float <-> float conversion rounds to nearest even (numpy/ml_dtypes casts)."""
    return [np.asarray(inputs[0]).astype(np.float32).astype(results[0].dtype)]


def _is_quantized(x: Any) -> bool:
    if isinstance(x, list):
        return bool(x) and _is_quantized(x[0])
    return isinstance(x, np.ndarray) and x.dtype in _QUANTIZED


_QUANTIZED = (np.dtype(np.int8), np.dtype(np.uint8))


def by_type(float_kernel: Kernel | None, int8_kernel: Kernel) -> Kernel:
    """The INT8 kernel for ops on int8/uint8 tensors, the float one otherwise."""

    def run(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
        if float_kernel is None or (inputs and _is_quantized(inputs[0])) or results[0].dtype in _QUANTIZED:
            return int8_kernel(inputs, attrs, results)
        return float_kernel(inputs, attrs, results)

    return run


_kernels: dict[str, Kernel] = {kind: in_f32(k) for kind, k in load_all().items()}
_kernels["cast"] = _cast
for _kind, _int8 in INT8_KERNELS.items():
    _kernels[_kind] = by_type(_kernels.get(_kind), _int8)
_TpuKernelFunctions = make_functions(Tpu, _kernels, "TpuKernelFunctions")


@register_impls
class TpuFunctions(_TpuKernelFunctions):
    """TPU op implementations (float and INT8)."""

    def __init__(self) -> None:
        self.static_cache: dict[Any, Any] = {}

