"""The kernels of TPU ops, shared by the TPU interpreter and the device model (no xDSL).

Float ops compute f16/bf16 tensors in f32 (GEMMs, `SUMS_IN_FLOAT64`, every float
in float64, so a slice of a tensor rounds as the whole does) and `run_tpu_kernel`
rounds the results to the storage type, as the chip stores them; an op runs its INT8
kernel (`kernels.int8`) when its first input or its result is int8/uint8;
data-movement kernels work on every type.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from tpu_xdsl.kernels import Kernel, ResultSpec, load_all
from tpu_xdsl.kernels.int8 import INT8_KERNELS
from tpu_xdsl.kernels.recurrent_cells import TPU_RECURRENT_KERNELS

_LOW_FLOATS = ("float16", "bfloat16")


# Kernels that sum products (GEMMs). BLAS orders a float sum by the shape of the call
# (blocking, edge kernels, GEMV for one row or column), so the same output element of
# a whole tensor and of a slice of it (a layer group's step, a cut along channels)
# would round differently in float32. Their float tensors are summed in float64
# instead: a product of two f16/bf16/f32 values is exact there (at most 48 bits), and
# what order leaves in the last bits of a float64 sum is far below the rounding to the
# storage type, so the device computing slices equals the interpreter computing whole
# tensors (tests/test_device_float_exact.py).
SUMS_IN_FLOAT64 = frozenset({"conv", "deconv", "matmul"})
_WIDENED = (*_LOW_FLOATS, "float32")
_GEMM_SUMS: ContextVar[str] = ContextVar("gemm_sums", default="float64")


@contextmanager
def gemm_sums_in_float32() -> Iterator[None]:
    """Within: the GEMMs of float tensors sum in float32, as the chip accumulates them, in
    whatever order BLAS takes; about twice as fast, but a slice of a tensor may round
    differently from the whole, so the device model no longer equals the interpreter bit
    for bit. For runs that only score final outputs against a tolerance (search-qtable's
    candidate configurations)."""
    token = _GEMM_SUMS.set("float32")
    try:
        yield
    finally:
        _GEMM_SUMS.reset(token)


def in_f32(kernel: Kernel, kind: str = "") -> Kernel:
    """A kernel that computes f16/bf16 tensors in f32 (float tensors of the kinds in
    SUMS_IN_FLOAT64 in float64, unless `gemm_sums_in_float32`); `run_tpu_kernel` rounds
    the result to the IR's storage type, as the chip stores it."""
    gemm = kind in SUMS_IN_FLOAT64

    def run(
        inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
    ) -> Sequence[np.ndarray | None]:
        wide_dtype = np.dtype(_GEMM_SUMS.get() if gemm else np.float32)
        widened = _WIDENED if wide_dtype == np.float64 else _LOW_FLOATS

        def widen(x: Any) -> Any:
            if isinstance(x, list):
                return [widen(v) for v in x]
            if isinstance(x, np.ndarray) and str(x.dtype) in widened:
                return x.astype(wide_dtype)
            return x

        wide = [ResultSpec(r.shape, wide_dtype) if str(r.dtype) in widened else r for r in results]
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

    def run(
        inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
    ) -> Sequence[np.ndarray | None]:
        if float_kernel is None or (inputs and _is_quantized(inputs[0])) or results[0].dtype in _QUANTIZED:
            return int8_kernel(inputs, attrs, results)
        return float_kernel(inputs, attrs, results)

    return run


TPU_KERNELS: dict[str, Kernel] = {kind: in_f32(k, kind) for kind, k in load_all().items()}
TPU_KERNELS["cast"] = _cast
# LSTM/GRU in the blocks of hidden units the device computes them in (recurrent_cells).
TPU_KERNELS.update(TPU_RECURRENT_KERNELS)
for _kind, _int8 in INT8_KERNELS.items():
    TPU_KERNELS[_kind] = by_type(TPU_KERNELS.get(_kind), _int8)


def has_tpu_kernel(kind: str) -> bool:
    return kind in TPU_KERNELS


def run_tpu_kernel(kind: str, inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[Any]:
    """Run the TPU kernel of `kind` and store its results in the result types."""
    outputs = TPU_KERNELS[kind](inputs, attrs, results)
    return [
        None if out is None else np.asarray(out).astype(spec.dtype, copy=False)
        for out, spec in zip(outputs, results, strict=True)
    ]
