"""Matmul, normalization, softmax, reduction, arg and topk kernels.

Normalizations compute the variance as the mean of squared deviations (two
passes, no E[x^2] - E[x]^2 cancellation). Per-channel parameters (batch_norm,
scale, instance_norm, group_norm) apply along axis 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpu_xdsl.kernels import ResultSpec, kernel
from tpu_xdsl.kernels.activation import fused_relu


def _per_channel(p: np.ndarray, ndim: int, dtype: np.dtype) -> np.ndarray:
    """A per-channel parameter (any shape holding C values) shaped [1, C, 1, ...]."""
    return np.asarray(p, dtype=dtype).reshape(1, -1, *([1] * (ndim - 2)))


def _normalize(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) over `axes`, in a new array."""
    mean = np.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    var = np.mean(np.square(centered), axis=axes, keepdims=True)
    var += np.asarray(eps, dtype=var.dtype)
    np.sqrt(var, out=var)
    centered /= var
    return centered


@kernel("matmul")
def matmul(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    a, b, bias = inputs
    if attrs.get("left_transpose"):
        a = np.swapaxes(a, -1, -2)
    if attrs.get("right_transpose"):
        b = np.swapaxes(b, -1, -2)
    y = np.matmul(a, b)
    if bias is not None:
        y = y + bias if y.ndim == 0 else np.add(y, bias, out=y)
    return [fused_relu(y, attrs)]


@kernel("softmax")
def softmax(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    x = inputs[0]
    axis = attrs.get("axis", -1)
    e = x - np.max(x, axis=axis, keepdims=True)
    np.exp(e, out=e)
    e /= np.sum(e, axis=axis, keepdims=True)
    return [e]


@kernel("log_softmax")
def log_softmax(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """x - max - log(sum(exp(x - max)))."""
    x = inputs[0]
    axis = attrs.get("axis", -1)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    shifted -= np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    return [shifted]


@kernel("batch_norm")
def batch_norm(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """(x - mean) / sqrt(var + eps) * scale + bias, as one per-channel x * a + b."""
    x, scale, bias, mean, var = inputs
    eps = float(attrs.get("epsilon", 1e-5))
    a = np.asarray(scale, np.float64) / np.sqrt(np.asarray(var, np.float64) + eps)
    b = np.asarray(bias, np.float64) - np.asarray(mean, np.float64) * a
    y = x * _per_channel(a, x.ndim, x.dtype)
    y += _per_channel(b, x.ndim, x.dtype)
    return [y]


@kernel("scale")
def scale(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """x * scale[c] + bias[c] along axis 1."""
    x, s, b = inputs
    y = x * _per_channel(s, x.ndim, x.dtype)
    if b is not None:
        y += _per_channel(b, x.ndim, x.dtype)
    return [fused_relu(y, attrs)]


@kernel("instance_norm")
def instance_norm(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """Normalize each (n, c) over the spatial dims, then per-channel scale and bias."""
    x, s, b = inputs
    y = _normalize(x, tuple(range(2, x.ndim)), float(attrs.get("epsilon", 1e-5)))
    y *= _per_channel(s, x.ndim, x.dtype)
    y += _per_channel(b, x.ndim, x.dtype)
    return [y]


@kernel("group_norm")
def group_norm(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """Normalize each (n, group of channels); scale/bias hold one value per channel
    (ONNX opset 21) or per group (opset 18)."""
    x, s, b = inputs
    groups = int(attrs["num_groups"])
    n, c = x.shape[:2]
    eps = float(attrs.get("epsilon", 1e-5))
    y = _normalize(x.reshape(n, groups, -1), (2,), eps).reshape(x.shape)
    for p, combine in ((s, np.multiply), (b, np.add)):
        if p is None:
            continue
        p = np.asarray(p).reshape(-1)
        if p.size == groups and groups != c:
            p = np.repeat(p, c // groups)
        combine(y, _per_channel(p, x.ndim, x.dtype), out=y)
    return [y]


@kernel("layer_norm")
def layer_norm(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """Normalize over dims axis..; scale and bias broadcast to x.shape[axis:]."""
    x, s, b = inputs
    axis = int(attrs.get("axis", -1)) % x.ndim
    y = _normalize(x, tuple(range(axis, x.ndim)), float(attrs.get("epsilon", 1e-5)))
    if s is not None:
        y *= s
    if b is not None:
        y += b
    return [y]


@kernel("lrn")
def lrn(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """x / (bias + alpha / size * sum of x^2 over channels c - (size-1)//2 .. c + ceil((size-1)/2))^beta;
    a loop over the `size` channel offsets."""
    x = inputs[0]
    size = int(attrs["size"])
    alpha = float(attrs.get("alpha", 1e-4))
    beta = float(attrs.get("beta", 0.75))
    bias = float(attrs.get("bias", 1.0))
    before = (size - 1) // 2
    c = x.shape[1]
    padded = np.pad(
        np.square(x), [(0, 0), (before, size - 1 - before)] + [(0, 0)] * (x.ndim - 2)
    )
    total = np.zeros_like(x)
    for offset in range(size):
        total += padded[:, offset : offset + c]
    total *= np.asarray(alpha / size, dtype=x.dtype)
    total += np.asarray(bias, dtype=x.dtype)
    np.power(total, np.asarray(beta, dtype=x.dtype), out=total)
    return [np.divide(x, total, out=total)]


# -- reductions -------------------------------------------------------------------------


def _axes(attrs: dict[str, Any], ndim: int) -> tuple[int, ...]:
    axes = attrs.get("axes") or list(range(ndim))
    return tuple(sorted({int(a) % ndim for a in axes})) if ndim else ()


def _log_sum_exp(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0).astype(x.dtype, copy=False)
    y = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    return y if keepdims else np.squeeze(y, axis=axis)


_REDUCERS = {
    "mean": lambda x, axis, keepdims: np.mean(x, axis=axis, keepdims=keepdims),
    "sum": lambda x, axis, keepdims: np.sum(x, axis=axis, keepdims=keepdims),
    "max": lambda x, axis, keepdims: np.max(x, axis=axis, keepdims=keepdims),
    "min": lambda x, axis, keepdims: np.min(x, axis=axis, keepdims=keepdims),
    "prod": lambda x, axis, keepdims: np.prod(x, axis=axis, keepdims=keepdims),
    "l1": lambda x, axis, keepdims: np.sum(np.abs(x), axis=axis, keepdims=keepdims),
    "l2": lambda x, axis, keepdims: np.sqrt(
        np.sum(np.square(x), axis=axis, keepdims=keepdims)
    ),
    "sum_square": lambda x, axis, keepdims: np.sum(
        np.square(x), axis=axis, keepdims=keepdims
    ),
    "log_sum_exp": _log_sum_exp,
}


@kernel("reduce")
def reduce(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """Reduce over `axes` (all when empty) with `mode`; keepdims (default true)."""
    x = inputs[0]
    mode = attrs["mode"]
    if mode not in _REDUCERS:
        raise ValueError(f"top.reduce: unknown mode '{mode}'")
    axes = _axes(attrs, x.ndim)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        y = _REDUCERS[mode](x, axes, bool(attrs.get("keepdims", True)))
    return [np.asarray(y, dtype=x.dtype)]


@kernel("arg")
def arg(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """Index of the first (or with select_last_index the last) max/min along `axis`."""
    x = inputs[0]
    axis = int(attrs["axis"]) % x.ndim
    find = np.argmax if attrs["mode"] == "max" else np.argmin
    if attrs.get("select_last_index"):
        index = x.shape[axis] - 1 - find(np.flip(x, axis=axis), axis=axis)
    else:
        index = find(x, axis=axis)
    if attrs.get("keepdims", True):
        index = np.expand_dims(index, axis)
    return [index.astype(results[0].dtype)]


@kernel("cumsum")
def cumsum(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """Running sum along `axis` (ONNX CumSum), element by element in order as onnxruntime
    sums: floats in f32 (f16/bf16 widened, one rounding on the store), integers in int64.
    exclusive: element i sums those before it (the inclusive sums shifted by one, 0 first);
    reverse: from the end."""
    x = np.asarray(inputs[0])
    axis = int(attrs["axis"]) % x.ndim
    wide = np.float32 if x.dtype.kind in "fV" else np.int64
    y = x.astype(wide, copy=False)
    if attrs.get("reverse"):
        y = np.flip(y, axis)
    total = np.cumsum(y, axis=axis, dtype=wide)
    if attrs.get("exclusive"):
        total = np.concatenate([np.zeros_like(np.take(total, [0], axis=axis)),
                                np.take(total, np.arange(total.shape[axis] - 1), axis=axis)], axis=axis)
    if attrs.get("reverse"):
        total = np.flip(total, axis)
    return [np.ascontiguousarray(total).astype(results[0].dtype, copy=False)]


@kernel("topk")
def topk(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """The k largest (or smallest) along `axis`, sorted; equal values keep the lower
    index first (a stable sort), as ONNX specifies."""
    x = inputs[0]
    k = int(attrs["k"])
    axis = int(attrs.get("axis", -1)) % x.ndim
    keys = -x if attrs.get("largest", True) else x
    order = np.argsort(keys, axis=axis, kind="stable")
    index = np.take(order, np.arange(k), axis=axis)
    values = np.take_along_axis(x, index, axis=axis)
    return [values, index.astype(results[1].dtype)]
