"""Elementwise kernels: binary arithmetic (numpy broadcasting, fused ReLU on
add/sub/mul), unary math, compare, logical and where."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tpu_xdsl.kernels import ResultSpec, kernel
from tpu_xdsl.kernels.activation import erf, fused_relu, reciprocal


def _register(kind: str, fn: Callable[..., np.ndarray]) -> None:
    def run(
        inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
    ) -> list[np.ndarray]:
        return [fused_relu(np.asarray(fn(*inputs)), attrs)]

    run.__name__ = run.__qualname__ = kind
    run.__doc__ = f"top.{kind}: numpy {getattr(fn, '__name__', kind)}."
    kernel(kind)(run)


def _pow(base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """np.power. A scalar exponent 0.5 is a sqrt, and an integer one up to 4
    (x**2 in LayerNorm's variance, x**3 in GELU's tanh form) multiplications:
    within 2e-7 of powf and ~100x faster than float32 np.power."""
    if exponent.size == 1 and exponent.ndim <= base.ndim:
        e = float(exponent.reshape(()))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if e == 0.5:
                return np.sqrt(base)
            if e == int(e) and 0 < abs(e) <= 4:
                y = _int_power(base, abs(int(e)))
                return reciprocal(y, out=y) if e < 0 else y
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.power(base, exponent)


def _int_power(base: np.ndarray, n: int) -> np.ndarray:
    """base ** n for n >= 1 by repeated squaring (a fresh array)."""
    result = None
    square = base
    while True:
        if n & 1:
            result = (
                square.copy()
                if result is None
                else np.multiply(result, square, out=result)
            )
        n >>= 1
        if not n:
            assert result is not None, "n >= 1 has a set bit"
            return result
        square = square * square


def _rsqrt(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.sqrt(x)
        return reciprocal(y, out=y)


def _quietly(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """`fn` without numpy's warnings for inf/nan results (log(0), 1/0,
    sqrt(-1)): they are ONNX's results too."""

    def run(*args: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return fn(*args)

    run.__name__ = fn.__name__
    return run


for _kind, _fn in {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": _quietly(np.divide),
    "max": np.maximum,  # NaN-propagating, as ONNX Max/Min
    "min": np.minimum,
    "pow": _pow,
    "sqrt": _quietly(np.sqrt),
    "rsqrt": _rsqrt,
    "exp": _quietly(np.exp),
    "log": _quietly(np.log),
    "abs": np.abs,
    "neg": np.negative,
    "reciprocal": _quietly(reciprocal),
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.round,  # half to even, as ONNX Round
    "sin": np.sin,
    "cos": np.cos,
    "sign": np.sign,
    "erf": erf,
}.items():
    _register(_kind, _fn)


_COMPARE = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


@kernel("compare")
def compare(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    lhs, rhs = inputs
    # bool, or the int8 0 and 1 TPU ops hold a mask in
    return [_COMPARE[attrs["mode"]](lhs, rhs).astype(results[0].dtype, copy=False)]


_LOGICAL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


@kernel("logical")
def logical(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """and/or/xor of lhs and rhs, or not of lhs; a nonzero number counts as true."""
    lhs, rhs = inputs
    mode = attrs["mode"]
    result = np.logical_not(lhs) if mode == "not" else _LOGICAL[mode](lhs, rhs)
    return [result.astype(results[0].dtype, copy=False)]


@kernel("where")
def where(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    cond, x, y = inputs
    return [np.where(cond.astype(bool, copy=False), x, y)]
