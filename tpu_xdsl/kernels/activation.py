"""Activation kernels, the ReLU that conv/matmul/add fuse, and erf (which gelu needs).

Each kernel computes in its input's dtype (integers in f32) and leaves its
input untouched. Piecewise activations are branch-free (max(x, 0) plus a
negative part), several times faster than np.where. Ops
whose formula overflows in a branch that is then discarded (exp of a large
argument) silence the overflow warning instead of paying for a guard.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpu_xdsl.kernels import ResultSpec, kernel

_SQRT_2_OVER_PI = 0.7978845608028654
_SQRT_HALF = 0.7071067811865476

# erf(x) ~ x * P(x^2) / Q(x^2) on [-4, 4] (erf rounds to +-1 in f32 beyond):
# the f32 rational approximation of Eigen and XLA, a few f32 ulps from erf.
_ERF_P = np.array((-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
          -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
          -1.60960333262415e-02), np.float32)  # fmt: skip
_ERF_Q = np.array((-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
          -7.37332916720468e-03, -1.42647390514189e-02), np.float32)  # fmt: skip


def as_float(x: np.ndarray) -> np.ndarray:
    """x, or x as f32 when it holds integers (the caller casts the result to its dtype)."""
    return x.astype(np.float32) if x.dtype.kind in "iub" else x


def _horner(x2: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    acc = np.full_like(x2, coefficients[0])
    for c in coefficients[1:]:
        acc *= x2
        acc += c
    return acc


def erf(x: np.ndarray) -> np.ndarray:
    """erf elementwise, within 1e-6 of math.erf for f32 (NaN stays NaN)."""
    dtype = x.dtype
    clamped = np.clip(x, -4.0, 4.0).astype(np.float32, copy=False)
    x2 = clamped * clamped
    p = _horner(x2, _ERF_P)
    p *= clamped
    p /= _horner(x2, _ERF_Q)
    return p.astype(dtype, copy=False)


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


def reciprocal(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """np.reciprocal(x), bit for bit; for floats as numpy's division 1 / x, whose
    vectorized loop runs about twice as fast as np.reciprocal's."""
    if x.dtype.kind != "f":
        return np.reciprocal(x, out=out)
    return np.divide(x.dtype.type(1), x, out=out)


def _one_plus_exp_of_minus(x: np.ndarray) -> np.ndarray:
    """1 + exp(-x), a fresh float array; exp overflows to inf for x < -88 (f32)."""
    with np.errstate(over="ignore"):
        t = np.negative(x)
        np.exp(t, out=t)
    t += 1
    return t


def sigmoid_of(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)); the inf of a large negative x gives the right 0."""
    t = _one_plus_exp_of_minus(as_float(x))
    return reciprocal(t, out=t)


@kernel("relu")
def relu(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    return [relu_limited(inputs[0], attrs.get("relu_limit"))]


def _positive_plus(x: np.ndarray, negative_part: np.ndarray) -> np.ndarray:
    """max(x, 0) + negative_part: the branch-free form of piecewise activations
    (negative_part is 0 where x >= 0); several times faster than np.where."""
    y = np.maximum(x, 0)
    y += negative_part
    return y.astype(x.dtype, copy=False)


@kernel("leaky_relu")
def leaky_relu(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """x for x >= 0, alpha * x otherwise."""
    x = as_float(inputs[0])
    negative = np.minimum(x, 0)
    negative *= attrs.get("alpha", 0.01)
    return [_positive_plus(x, negative)]


@kernel("prelu")
def prelu(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """slope * x for x < 0; slope broadcasts to x (unidirectional)."""
    x, slope = as_float(inputs[0]), inputs[1]
    return [_positive_plus(x, np.minimum(x, 0) * slope)]


@kernel("elu")
def elu(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    x = as_float(inputs[0])
    negative = np.expm1(np.minimum(x, 0))
    negative *= attrs.get("alpha", 1.0)
    return [_positive_plus(x, negative)]


@kernel("sigmoid")
def sigmoid(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    return [sigmoid_of(inputs[0])]


@kernel("silu")
def silu(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """x * sigmoid(x) (Swish with alpha 1), as x / (1 + exp(-x)): one pass fewer than
    the product, and one rounding; a large negative x gives -0, as the product does."""
    x = as_float(inputs[0])
    t = _one_plus_exp_of_minus(x)
    with np.errstate(invalid="ignore"):  # -inf / inf: NaN, as -inf * 0
        return [np.divide(x, t, out=t)]


@kernel("hard_sigmoid")
def hard_sigmoid(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    x = inputs[0]
    y = x * attrs.get("alpha", 0.2)
    y += attrs.get("beta", 0.5)
    np.clip(y, 0, 1, out=y)
    return [y.astype(x.dtype, copy=False)]


@kernel("hard_swish")
def hard_swish(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """x * max(0, min(1, x / 6 + 1/2)) (ONNX HardSwish: alpha 1/6, beta 1/2)."""
    x = inputs[0]
    y = x * (1 / 6)
    y += 0.5
    np.clip(y, 0, 1, out=y)
    y *= x
    return [y.astype(x.dtype, copy=False)]


@kernel("tanh")
def tanh(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    return [np.tanh(inputs[0])]


def softplus_of(x: np.ndarray) -> np.ndarray:
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)): no overflow, and
    ~10x faster than np.logaddexp."""
    x = as_float(x)
    t = np.abs(x)
    np.negative(t, out=t)
    np.exp(t, out=t)
    np.log1p(t, out=t)
    t += np.maximum(x, 0)
    return t


@kernel("softplus")
def softplus(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    return [softplus_of(inputs[0])]


@kernel("mish")
def mish(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """x * tanh(softplus(x))."""
    x = inputs[0]
    y = softplus_of(x)
    np.tanh(y, out=y)
    y *= x
    return [y]


@kernel("gelu")
def gelu(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """x * Phi(x): 0.5x(1 + erf(x/sqrt2)), or with approximate="tanh"
    0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))."""
    x = inputs[0]
    if attrs.get("approximate", "none") == "tanh":
        inner = x * x
        inner *= 0.044715
        inner += 1
        inner *= x
        inner *= _SQRT_2_OVER_PI
        y = np.tanh(inner, out=inner)
    else:
        y = erf(x * _SQRT_HALF)
    y += 1
    y *= x
    y *= 0.5
    return [y.astype(x.dtype, copy=False)]


@kernel("clip")
def clip(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """min(max(x, min), max): with min > max every element is max, as in ONNX."""
    x = inputs[0]
    y = x
    if attrs.get("min") is not None:
        y = np.maximum(y, attrs["min"])
    if attrs.get("max") is not None:
        y = np.minimum(y, attrs["max"])
    return [x.copy() if y is x else y.astype(x.dtype, copy=False)]
