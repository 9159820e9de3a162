"""INT8 kernels of TPU ops: integer arithmetic exactly as the chip does it.

Tensors are int8 or uint8 codes with a zero point; an op subtracts its input
zero points (`input_zero_points`, 0 when absent), accumulates exactly
(int32 on the chip), requantizes by integer multiplier and right shift
(`multiplier`, `rshift`, rounding by `round_mode`, default half away from
zero), adds `output_zero_point` and saturates to the result type:

- conv, deconv, matmul, scale: acc = sum((x - zx) * w) + bias (int32 bias,
  int8 weights per output channel), then per-channel requantization along
  axis 1 (the last axis for matmul);
- add, sub: acc = (a - za) * m0 + (b - zb) * m1, one shared shift; mul:
  acc = (a - za) * (b - zb) * m0;
- avg_pool, reduce (mean, sum): the window / axis sum of (x - zx) times m0;
- concat: each input requantized to the output (m_i, r_i);
- max_pool, reduce max/min: codes compared as they are (the input's scale);
- lut: output = table[byte of x] (the input's two's complement byte for int8);
- cast: float -> int quantizes with `scale`/`zero_point`, int -> float
  dequantizes; requant: multiplier/shift on an integer tensor.

`do_relu` clamps below at the output zero point (real 0).

Products are summed in float BLAS, exactly: every partial sum of a product of
integers is an integer, exact in float32 while the largest possible sum is
below 2^24 and in float64 below 2^53 (DESIGN.md section 8). No integer matmul.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tpu_xdsl.interp.kernels import Kernel, ResultSpec
from tpu_xdsl.interp.kernels import conv_pool as float_conv_pool
from tpu_xdsl.quant import quantize_tensor, requantize, rounding_shift, saturate

INT8_KERNELS: dict[str, Kernel] = {}

DEFAULT_ROUND_MODE = "half_away_from_zero"
_FLOAT32_EXACT = 1 << 24
_FLOAT64_EXACT = 1 << 53


def int8_kernel(*kinds: str) -> Callable[[Kernel], Kernel]:
    def register(fn: Kernel) -> Kernel:
        for kind in kinds:
            if kind in INT8_KERNELS:
                raise ValueError(f"INT8 kernel for '{kind}' registered twice")
            INT8_KERNELS[kind] = fn
        return fn

    return register


# -- shared pieces ------------------------------------------------------------------------


def zero_point(attrs: dict[str, Any], index: int) -> int:
    points = attrs.get("input_zero_points") or []
    return int(points[index]) if index < len(points) else 0


def round_mode(attrs: dict[str, Any]) -> str:
    return attrs.get("round_mode") or DEFAULT_ROUND_MODE


def magnitude_bound(x: np.ndarray, zp: int) -> int:
    """The largest |x - zp| the dtype of `x` allows."""
    info = np.iinfo(x.dtype)
    return max(abs(int(info.min) - zp), abs(int(info.max) - zp))


def exact_float(terms: int, *bounds: int) -> np.dtype:
    """float32 when a sum of `terms` products of factors bounded by `bounds` is exact in
    it (below 2^24), else float64."""
    largest = terms * int(np.prod(bounds))
    if largest < _FLOAT32_EXACT:
        return np.dtype(np.float32)
    if largest >= _FLOAT64_EXACT:
        raise ValueError(f"a sum of {terms} products bounded by {bounds} is not exact even in float64")
    return np.dtype(np.float64)


def centered(x: np.ndarray, zp: int, dtype: np.dtype) -> np.ndarray:
    """x - zp as `dtype` (exact: small integers)."""
    y = x.astype(dtype)
    if zp:
        y -= zp
    return y


def as_int64(y: np.ndarray) -> np.ndarray:
    """A float array holding exact integers as int64."""
    return y.astype(np.int64)


def finish(
    acc: np.ndarray,
    attrs: dict[str, Any],
    result: ResultSpec,
    axis: int = 1,
    multiplier: list[int] | None = None,
) -> np.ndarray:
    """Requantize an int64 accumulator to the result type by the op's multiplier (or the
    given one) and rshift, per channel along `axis` when they have one entry per
    channel; then the fused ReLU."""
    multiplier = list(multiplier or attrs.get("multiplier") or [1])
    rshift = list(attrs.get("rshift") or [0])
    zo = int(attrs.get("output_zero_point", 0) or 0)
    mult: Any = multiplier if len(multiplier) > 1 else multiplier[0]
    shift: Any = rshift if len(rshift) > 1 else rshift[0]
    if acc.ndim == 0:
        acc = acc.reshape(1)
    y = requantize(acc, mult, shift, zo, result.dtype, round_mode(attrs), axis=axis % max(acc.ndim, 1))
    y = y.reshape(result.shape)
    if attrs.get("do_relu"):
        np.maximum(y, np.asarray(zo, dtype=y.dtype), out=y)
    return y


def _float_spec(result: ResultSpec, dtype: np.dtype) -> list[ResultSpec]:
    return [ResultSpec(result.shape, dtype)]


_NO_RELU = {"do_relu": False, "relu_limit": None}


# -- convolution-like ------------------------------------------------------------------------


@int8_kernel("conv")
def conv(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    x, w, b = inputs
    zx = zero_point(attrs, 0)
    group = int(attrs.get("group", 1))
    terms = (x.shape[1] // group) * int(np.prod(w.shape[2:]))
    dtype = exact_float(terms, magnitude_bound(x, zx), magnitude_bound(w, 0))
    (acc,) = float_conv_pool.conv(
        [centered(x, zx, dtype), w.astype(dtype), None], {**attrs, **_NO_RELU}, _float_spec(results[0], dtype)
    )
    acc = as_int64(acc)
    if b is not None:
        acc += b.astype(np.int64).reshape(1, -1, *([1] * (x.ndim - 2)))
    return [finish(acc, attrs, results[0])]


@int8_kernel("deconv")
def deconv(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    x, w, b = inputs
    zx = zero_point(attrs, 0)
    group = int(attrs.get("group", 1))
    kernel_shape = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides") or [1] * len(kernel_shape))
    # An output pixel sums over the input channels of its group and the taps that reach it.
    overlap = int(np.prod([-(-k // s) for k, s in zip(kernel_shape, strides)]))
    terms = (x.shape[1] // group) * overlap
    dtype = exact_float(terms, magnitude_bound(x, zx), magnitude_bound(w, 0))
    (acc,) = float_conv_pool.deconv(
        [centered(x, zx, dtype), w.astype(dtype), None], {**attrs, **_NO_RELU}, _float_spec(results[0], dtype)
    )
    acc = as_int64(acc)
    if b is not None:
        acc += b.astype(np.int64).reshape(1, -1, *([1] * (x.ndim - 2)))
    return [finish(acc, attrs, results[0])]


@int8_kernel("matmul")
def matmul(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    """(a - za) @ (b - zb) + bias, per output column (last axis) requantization."""
    a, b, bias = inputs
    za, zb = zero_point(attrs, 0), zero_point(attrs, 1)
    if attrs.get("left_transpose"):
        a = np.swapaxes(a, -1, -2)
    if attrs.get("right_transpose"):
        b = np.swapaxes(b, -1, -2)
    dtype = exact_float(a.shape[-1], magnitude_bound(a, za), magnitude_bound(b, zb))
    acc = as_int64(np.matmul(centered(a, za, dtype), centered(b, zb, dtype)))
    if bias is not None:
        acc += bias.astype(np.int64)
    return [finish(acc, attrs, results[0], axis=-1)]


@int8_kernel("scale")
def scale(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    """(x - zx) * s[c] + bias[c] along axis 1 (int8 s, int32 bias), per-channel requantization."""
    x, s, bias = inputs
    zx = zero_point(attrs, 0)
    shape = (1, -1, *([1] * (x.ndim - 2)))
    acc = (x.astype(np.int64) - zx) * s.astype(np.int64).reshape(shape)
    if bias is not None:
        acc += bias.astype(np.int64).reshape(shape)
    return [finish(acc, attrs, results[0])]


# -- elementwise ------------------------------------------------------------------------------


def _centered_int(x: np.ndarray, zp: int) -> np.ndarray:
    y = x.astype(np.int64)
    if zp:
        y -= zp
    return y


@int8_kernel("add", "sub")
def add(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    """(a - za) * m0 + (b - zb) * m1 >> rshift (sub: the lowering negates m1)."""
    a, b = inputs
    m = attrs["multiplier"]
    acc = _centered_int(a, zero_point(attrs, 0)) * int(m[0])
    acc = acc + _centered_int(b, zero_point(attrs, 1)) * int(m[1])
    return [finish(np.broadcast_to(acc, results[0].shape), attrs, results[0], multiplier=[1])]


@int8_kernel("mul")
def mul(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    a, b = inputs
    acc = _centered_int(a, zero_point(attrs, 0)) * _centered_int(b, zero_point(attrs, 1))
    return [finish(np.broadcast_to(acc, results[0].shape), attrs, results[0])]


@int8_kernel("lut")
def lut(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    """table[byte]: a 256-entry table indexed by the input's byte (int8 as two's complement)."""
    x, table = inputs
    index = x.view(np.uint8) if x.dtype == np.int8 else x
    return [table.reshape(-1)[index].astype(results[0].dtype, copy=False)]


# -- pooling and reductions ------------------------------------------------------------------


@int8_kernel("max_pool")
def max_pool(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    """The largest code of each window (padding: the smallest code, which never wins)."""
    x = inputs[0]
    y, *_ = float_conv_pool._pool_reduce(x, attrs, results, np.iinfo(x.dtype).min, np.maximum)
    zo = int(attrs.get("output_zero_point", zero_point(attrs, 0)) or 0)
    if attrs.get("do_relu"):
        y = np.maximum(y, np.asarray(zo, dtype=y.dtype))
    return [y.astype(results[0].dtype, copy=False)]


@int8_kernel("avg_pool")
def avg_pool(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    """The window sum of x - zx (padding adds real 0) times the multiplier, which holds the
    1 / count of the window (lowering allows only windows of one size)."""
    x = inputs[0]
    total, *_ = float_conv_pool._pool_reduce(_centered_int(x, zero_point(attrs, 0)), attrs, results, 0, np.add)
    return [finish(total, attrs, results[0])]


@int8_kernel("reduce")
def reduce(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    x = inputs[0]
    axes = tuple(a % x.ndim for a in attrs["axes"]) if attrs.get("axes") else tuple(range(x.ndim))
    mode = attrs["mode"]
    if mode in ("max", "min"):
        y = (np.max if mode == "max" else np.min)(x, axis=axes, keepdims=True)
        return [y.reshape(results[0].shape).astype(results[0].dtype, copy=False)]
    total = np.sum(_centered_int(x, zero_point(attrs, 0)), axis=axes)
    return [finish(np.asarray(total).reshape(results[0].shape), attrs, results[0])]


# -- data movement with requantization ------------------------------------------------------


@int8_kernel("concat")
def concat(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    """Each input requantized to the output's scale by its own (m_i, r_i), then joined."""
    parts = list(inputs)  # the variadic operand, flattened
    axis = int(attrs["axis"])
    multipliers = attrs.get("multiplier")
    if not multipliers:
        return [np.concatenate(parts, axis=axis).astype(results[0].dtype, copy=False)]
    zo = int(attrs.get("output_zero_point", 0) or 0)
    mode = round_mode(attrs)
    dtype = results[0].dtype
    scaled = []
    for i, part in enumerate(parts):
        m, r = int(multipliers[i]), int(attrs["rshift"][i])
        scaled.append(saturate(rounding_shift(_centered_int(part, zero_point(attrs, i)) * m, r, mode) + zo, dtype))
    y = np.concatenate(scaled, axis=axis)
    if attrs.get("do_relu"):
        np.maximum(y, np.asarray(zo, dtype=dtype), out=y)
    return [y]


@int8_kernel("requant")
def requant(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    x = inputs[0]
    multiplier, rshift = attrs["multiplier"], attrs["rshift"]
    mult: Any = multiplier if len(multiplier) > 1 else multiplier[0]
    shift: Any = rshift if len(rshift) > 1 else rshift[0]
    y = requantize(
        x, mult, shift, int(attrs.get("zero_point", 0) or 0), results[0].dtype, round_mode(attrs),
        axis=int(attrs.get("axis", 1)) % max(x.ndim, 1),
    )
    return [y]


@int8_kernel("cast")
def cast(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    """float -> int8/uint8: sat(round(x / scale) + zero_point); int -> float:
    (q - zero_point) * scale, rounded to the result's float type."""
    x = np.asarray(inputs[0])
    out = results[0].dtype
    scale_value = float(attrs.get("scale", 1.0))
    zp = int(attrs.get("zero_point", 0) or 0)
    if out.kind in "iu":
        return [quantize_tensor(x.astype(np.float32), scale_value, zp, out, round_mode(attrs))]
    real = (x.astype(np.float32) - np.float32(zp)) * np.float32(scale_value)
    return [real.astype(out)]
