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

Per-channel vectors (the multipliers of add/sub/mul, the rows of a lut table,
the scales of a cast) run along axis 1, or along `channel_axis` when the op has
it (the last axis of a features-last tensor).

`do_relu` clamps below at the output zero point (real 0).

Products are summed in float BLAS, exactly: every partial sum of a product of
integers is an integer, exact in float32 while the largest possible sum is
below 2^24 and in float64 below 2^53 (DESIGN.md section 8). No integer matmul.
conv and matmul run float32 GEMMs over chunks of the reduction short enough
for 2^24 and add the chunks in float64 (`conv_pool.conv_sum`); their
requantization (`int8_sums.finish_sum`) and add/sub run in cache-sized blocks in
float64 where that is provably exact, else in int64 where nothing can
overflow, else through `quant.requantize`. tests/test_int8_kernels_exact.py
checks them against integer references.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tpu_xdsl.kernels import K, Kernel, ResultSpec
from tpu_xdsl.kernels import conv_pool as float_conv_pool
from tpu_xdsl.kernels.int8_sums import (
    NO_RELU,
    as_int64,
    centered,
    channel_axis,
    exact_float,
    finish,
    finish_sum,
    float32_terms,
    float_rounding,
    float_spec,
    magnitude_bound,
    round_and_saturate,
    round_mode,
    zero_point,
)
from tpu_xdsl.kernels.memo import ConstantMemo
from tpu_xdsl.kernels.quant import (
    channel_shape,
    clip_nan_as_zero,
    int_info,
    quantize_tensor,
    requantize,
    rounding_shift,
    saturate,
)

INT8_KERNELS: dict[str, Kernel] = {}


def int8_kernel(*kinds: str) -> Callable[[K], K]:
    def register(fn: K) -> K:
        for kind in kinds:
            if kind in INT8_KERNELS:
                raise ValueError(f"INT8 kernel for '{kind}' registered twice")
            INT8_KERNELS[kind] = fn
        return fn

    return register


# -- convolution-like ------------------------------------------------------------------------


@int8_kernel("conv")
def conv(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    """Float32 GEMMs over chunks of the reduction whose sums stay exact (below 2^24), the
    chunks added in float64, then requantization fused with the bias."""
    x, w, b = inputs
    zx = zero_point(attrs, 0)
    group = int(attrs.get("group", 1))
    kernel_shape, strides, pads, dilations = float_conv_pool.spatial_params(attrs, x.ndim - 2)
    terms = (x.shape[1] // group) * int(math.prod(w.shape[2:]))
    bounds = (magnitude_bound(x, zx), magnitude_bound(w, 0))
    dtype = exact_float(terms, *bounds)
    max_terms = float32_terms(*bounds)
    if max_terms:
        dtype, max_terms = np.dtype(np.float32), min(max_terms, terms)
    acc = float_conv_pool.conv_sum(
        centered(x, zx, dtype), w, group, kernel_shape, strides, pads, dilations, results[0].shape, max_terms
    )
    return [finish_sum(acc, b, attrs, results[0], terms * bounds[0] * bounds[1])]


@int8_kernel("deconv")
def deconv(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    x, w, b = inputs
    zx = zero_point(attrs, 0)
    group = int(attrs.get("group", 1))
    kernel_shape = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides") or [1] * len(kernel_shape))
    # An output pixel sums over the input channels of its group and the taps that reach it.
    overlap = int(math.prod([-(-k // s) for k, s in zip(kernel_shape, strides)]))
    terms = (x.shape[1] // group) * overlap
    dtype = exact_float(terms, magnitude_bound(x, zx), magnitude_bound(w, 0))
    (acc,) = float_conv_pool.deconv(
        [centered(x, zx, dtype), w.astype(dtype), None], {**attrs, **NO_RELU}, float_spec(results[0], dtype)
    )
    acc = as_int64(acc)
    if b is not None:
        acc += b.astype(np.int64).reshape(1, -1, *([1] * (x.ndim - 2)))
    return [finish(acc, attrs, results[0])]


@int8_kernel("matmul")
def matmul(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    """(a - za) @ (b - zb) + bias, per output column (last axis) requantization; float32
    GEMMs over exact chunks of K as in conv."""
    a, b, bias = inputs
    za, zb = zero_point(attrs, 0), zero_point(attrs, 1)
    if attrs.get("left_transpose"):
        a = np.swapaxes(a, -1, -2)
    if attrs.get("right_transpose"):
        b = np.swapaxes(b, -1, -2)
    bounds = (magnitude_bound(a, za), magnitude_bound(b, zb))
    dtype = exact_float(a.shape[-1], *bounds)
    max_terms = float32_terms(*bounds)
    if max_terms:
        dtype = np.dtype(np.float32)
    ca, cb = centered(a, za, dtype), centered(b, zb, dtype)
    total = None
    for k in float_conv_pool.term_chunks(a.shape[-1], max_terms):
        total = float_conv_pool.add_partial(total, np.matmul(ca[..., k], cb[..., k, :]))
    assert total is not None, "term_chunks yields at least one chunk"
    acc = as_int64(total)
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
    """(a - za) * m0 + (b - zb) * m1 >> rshift (sub: the lowering negates m1); with 2C
    multipliers, m0 and m1 per channel (axis 1)."""
    a, b = inputs
    m = attrs["multiplier"]
    fast = _rescaled_sum_in_float(a, b, attrs, results[0])
    if fast is not None:
        return [fast]
    if len(m) == 2:
        ma, mb = int(m[0]), int(m[1])
    else:  # per channel: C multipliers for a, then C for b, along the channel axis
        shape = channel_shape(len(results[0].shape), channel_axis(attrs, len(results[0].shape)))
        ma = np.asarray(m[: len(m) // 2], np.int64).reshape(shape)
        mb = np.asarray(m[len(m) // 2 :], np.int64).reshape(shape)
    acc = _centered_int(a, zero_point(attrs, 0)) * ma
    acc = acc + _centered_int(b, zero_point(attrs, 1)) * mb
    return [finish(np.broadcast_to(acc, results[0].shape), attrs, results[0], multiplier=[1])]


# Float64 holds every integer below 2^53 and every multiple of 2^-s below 2^(53-s).
_FLOAT64_SAFE = 1 << 52


def _rescaled_sum_in_float(
    a: np.ndarray, b: np.ndarray, attrs: dict[str, Any], result: ResultSpec
) -> np.ndarray | None:
    """`add` in float64, exactly: (a - za) * m0 / 2^s + (b - zb) * m1 / 2^s is a sum of
    multiples of 2^-s whose numerators stay below 2^52, so every product, sum and the
    rounding (floor / rint / trunc, + 0.5) is exact, and the result equals the int64
    path's. Per-channel multipliers (2C of them) broadcast along axis 1. None when the
    bound or the attributes do not allow it. The factors are worked out once per op
    (`_ADD_PLANS`)."""
    if a.dtype.kind not in "iu" or b.dtype.kind not in "iu":
        return None
    key = (a.dtype.str, b.dtype.str, np.dtype(result.dtype).str, len(result.shape))
    plan = _ADD_PLANS.get(attrs, key, (), lambda: _rescaled_sum_plan(a, b, attrs, result))
    if plan is None:
        return None
    c0, c1, offset, rounding, zo_after, low, high = plan
    out = np.empty(result.shape, dtype=result.dtype)
    if isinstance(c0, float) and a.shape == b.shape == out.shape:
        pairs = _flat_blocks(a, b, out)
    else:
        pairs = [(np.broadcast_to(a, out.shape), np.broadcast_to(b, out.shape), out)]
    for a_block, b_block, out_block in pairs:
        p = np.multiply(a_block, c0, dtype=np.float64)
        q = np.multiply(b_block, c1, dtype=np.float64)
        p += q
        p += offset
        round_and_saturate(p, q, rounding, zo_after, low, high, out_block)
    return out


# `_rescaled_sum_in_float`'s factors per op: (c0, c1, offset, rounding, zo_after, low, high),
# c0, c1 and offset floats or per-channel arrays; None where the float path is not exact.
_ADD_PLANS: ConstantMemo[tuple[Any, ...] | None] = ConstantMemo()


def _rescaled_sum_plan(
    a: np.ndarray, b: np.ndarray, attrs: dict[str, Any], result: ResultSpec
) -> tuple[Any, ...] | None:
    """The factors of `_rescaled_sum_in_float` for operands of the dtypes of `a` and `b`."""
    m = [int(v) for v in attrs["multiplier"]]
    za, zb = zero_point(attrs, 0), zero_point(attrs, 1)
    rshift = attrs.get("rshift") or [0]
    zo = int(attrs.get("output_zero_point", 0) or 0)
    info = int_info(result.dtype)
    if len(rshift) != 1 or not 0 <= int(rshift[0]) <= 52 or not info.min <= zo <= info.max:
        return None
    s = int(rshift[0])
    half = len(m) // 2
    m0, m1 = max(abs(v) for v in m[:half]), max(abs(v) for v in m[half:])
    largest = (
        magnitude_bound(a, 0) * m0 + magnitude_bound(b, 0) * m1
        + abs(za) * m0 + abs(zb) * m1 + ((abs(zo) + 1) << s)
    )
    if largest >= _FLOAT64_SAFE:
        return None
    low = max(int(info.min), zo) if attrs.get("do_relu") else int(info.min)
    mode = round_mode(attrs)
    if low >= zo:  # below zero every mode gives <= 0, clamped to low: the cheaper twin does
        mode = {"half_away_from_zero": "half_up", "toward_zero": "down"}.get(mode, mode)
    scale = 2.0**-s
    offset, rounding, zo_after = float_rounding(mode, zo)
    if len(m) == 2:
        c0, c1 = m[0] * scale, m[1] * scale
        offset -= (za * m[0] + zb * m[1]) * scale
    else:  # per channel: the factors broadcast along the channel axis, on whole tensors
        ndim = len(result.shape)
        shape = channel_shape(ndim, channel_axis(attrs, ndim))
        c0 = (np.asarray(m[:half], np.float64) * scale).reshape(shape)
        c1 = (np.asarray(m[half:], np.float64) * scale).reshape(shape)
        offset = offset - (za * c0 + zb * c1)
    return c0, c1, offset, rounding, zo_after, low, int(info.max)


_ELEMENTWISE_BLOCK = 1 << 15

# Round modes `_quantize_block` computes (the others, on float32 quotients, by quantize_tensor).
_QUANTIZED_IN_PLACE = ("half_away_from_zero", "down", "toward_zero")


def _quantize_block(
    x: np.ndarray, scale: float, zp: int, mode: str, limits: tuple[int, int],
    scaled: np.ndarray, halves: np.ndarray, out: np.ndarray,
) -> None:
    """out = `quantize_tensor(x, scale, zp, out.dtype, mode)` for the modes of
    `_QUANTIZED_IN_PLACE`, in two float64 buffers and no other temporaries: the same float64
    quotient x / scale, then half away from zero as trunc(q + copysign(0.5, q)) (for
    q >= 0 floor(q + 0.5); below, minus that of -q: the same sum negated), NaN as 0 and
    +-inf clipped, as quantize_tensor does."""
    np.divide(x, scale, out=scaled, dtype=np.float64)  # float32 widened exactly, a float64 quotient
    if mode == "half_away_from_zero":
        np.copysign(0.5, scaled, out=halves)
        scaled += halves
        np.trunc(scaled, out=scaled)
    elif mode == "down":
        np.floor(scaled, out=scaled)
    else:
        np.trunc(scaled, out=scaled)
    clip_nan_as_zero(scaled, limits[0] - zp, limits[1] - zp)
    if zp:
        scaled += zp
    np.copyto(out, scaled, casting="unsafe")  # integers in range: exact


def _flat_blocks(*arrays: np.ndarray) -> list[tuple[np.ndarray, ...]]:
    """Matching flat blocks of same-shape arrays (the last one written through)."""
    flat = [np.ascontiguousarray(x).reshape(-1) for x in arrays[:-1]] + [arrays[-1].reshape(-1)]
    size = flat[-1].size
    return [tuple(x[i : i + _ELEMENTWISE_BLOCK] for x in flat) for i in range(0, size, _ELEMENTWISE_BLOCK)]


@int8_kernel("mul")
def mul(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    a, b = inputs
    za, zb = zero_point(attrs, 0), zero_point(attrs, 1)
    shape = results[0].shape
    axis = channel_axis(attrs, len(shape))
    if len(shape) >= 2 and axis == 1:  # the product of two codes is exact in float: conv's requantization
        bound = magnitude_bound(a, za) * magnitude_bound(b, zb)
        dtype = exact_float(1, bound)
        acc = centered(a, za, dtype) * centered(b, zb, dtype)
        return [finish_sum(np.broadcast_to(acc, shape), None, attrs, results[0], bound)]
    acc = _centered_int(a, za) * _centered_int(b, zb)
    return [finish(np.broadcast_to(acc, shape), attrs, results[0], axis=axis)]


@int8_kernel("lut")
def lut(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    """table[byte]: a 256-entry table indexed by the input's byte (int8 as two's complement);
    a [C, 256] table has one row per channel (of the channel axis)."""
    x, table = inputs
    index = x.view(np.uint8) if x.dtype == np.int8 else x
    if _pairs_fit(index, table):
        return [_lookup_pairs(index, table).astype(results[0].dtype, copy=False)]
    if table.ndim == 2:  # one table per channel: row c, entry byte
        axis = channel_axis(attrs, x.ndim)
        # row * 256 + byte: below 2^16 for up to 256 channels, a quarter of the bytes of intp
        rows_type = np.uint16 if table.shape[0] <= 256 and index.dtype == np.uint8 else np.intp
        rows = np.arange(table.shape[0], dtype=rows_type).reshape(channel_shape(x.ndim, axis)) * rows_type(256)
        index = index + rows
    return [np.take(table.reshape(-1), index).astype(results[0].dtype, copy=False)]


# Above this many bytes, a one-byte LUT looks up two bytes at a time (`_lookup_pairs`).
_PAIR_LOOKUP_ABOVE = 1 << 17


def _pairs_fit(index: np.ndarray, table: np.ndarray) -> bool:
    return (
        table.ndim == 1 and table.size == 256 and table.itemsize == 1 and index.dtype == np.uint8
        and index.size > _PAIR_LOOKUP_ABOVE and index.size % 2 == 0 and index.flags.c_contiguous
        and sys.byteorder == "little"
    )


def _lookup_pairs(index: np.ndarray, table: np.ndarray) -> np.ndarray:
    """table[index] for a one-byte table, on byte pairs: each uint16 of the index is two
    bytes, low first (little-endian), and a 65536-entry table gives both entries at once;
    half the lookups of np.take, whose per-element cost dominates."""
    entries = table.view(np.uint8).astype(np.uint16)
    pairs = (entries[:, None] << 8 | entries[None, :]).reshape(-1)  # [high byte, low byte]
    looked_up = np.take(pairs, index.reshape(-1).view(np.uint16))
    return looked_up.view(np.uint8).view(table.dtype).reshape(index.shape)


# -- pooling and reductions ------------------------------------------------------------------


@int8_kernel("max_pool")
def max_pool(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    """The largest code of each window (padding: the smallest code, which never wins)."""
    x = inputs[0]
    y, *_ = float_conv_pool._pool_reduce(x, attrs, results, int_info(x.dtype).min, np.maximum)
    zo = int(attrs.get("output_zero_point", zero_point(attrs, 0)) or 0)
    if attrs.get("do_relu"):
        y = np.maximum(y, np.asarray(zo, dtype=y.dtype))
    return [y.astype(results[0].dtype, copy=False)]


@int8_kernel("avg_pool")
def avg_pool(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    """The window sum of x - zx (padding adds real 0) times the multiplier, which holds the
    1 / count of the window (lowering allows only windows of one size)."""
    x = inputs[0]
    zx = zero_point(attrs, 0)
    taps = int(math.prod(attrs["kernel_shape"]))
    bound = magnitude_bound(x, zx)
    # Window sums of integers below 2^24 (2^53) are exact in float32 (float64), whatever the
    # order of the additions; then conv's requantization.
    centered_x = centered(x, zx, exact_float(taps, bound))
    total, *_ = float_conv_pool._pool_reduce(centered_x, attrs, results, 0, np.add)
    return [finish_sum(total, None, attrs, results[0], taps * bound)]


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
    """Each input requantized to the output's scale by its own (m_i, r_i), then joined;
    with C multipliers and shifts per input (the first input's, then the next's), per
    channel along the channel axis."""
    parts = list(inputs)  # the variadic operand, flattened
    axis = int(attrs["axis"])
    multipliers = attrs.get("multiplier")
    if not multipliers:
        return [np.concatenate(parts, axis=axis).astype(results[0].dtype, copy=False)]
    zo = int(attrs.get("output_zero_point", 0) or 0)
    mode = round_mode(attrs)
    dtype = results[0].dtype
    rshifts = attrs["rshift"]
    ndim = len(results[0].shape)
    channels = results[0].shape[channel_axis(attrs, ndim)] if len(multipliers) > len(parts) else 1
    scaled = []
    for i, part in enumerate(parts):
        centered_part = _centered_int(part, zero_point(attrs, i))
        if channels > 1:
            block = slice(i * channels, (i + 1) * channels)
            scaled.append(
                requantize(
                    centered_part,
                    np.asarray(multipliers[block]),
                    np.asarray(rshifts[block]),
                    zo,
                    dtype,
                    mode,
                    axis=channel_axis(attrs, ndim),
                )
            )
            continue
        m, r = int(multipliers[i]), int(rshifts[i])
        scaled.append(saturate(rounding_shift(centered_part * m, r, mode) + zo, dtype))
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
    (q - zero_point) * scale, rounded to the result's float type. A second operand holds
    per-channel scales (along the channel axis) instead."""
    x = np.asarray(inputs[0])
    out = results[0].dtype
    scale_value = float(attrs.get("scale", 1.0))
    zp = int(attrs.get("zero_point", 0) or 0)
    if len(inputs) > 1:  # per-channel scales, zero point 0
        scales = np.asarray(inputs[1], np.float32).reshape(channel_shape(x.ndim, channel_axis(attrs, x.ndim)))
        if out.kind in "iu":
            return [quantize_tensor(x.astype(np.float32), scales.astype(np.float64), 0, out, round_mode(attrs))]
        return [(x.astype(np.float32) * scales).astype(out)]
    if out.kind in "iu":
        # Elementwise: in cache-sized blocks the float64 temporaries stay in cache.
        flat = x.astype(np.float32).reshape(-1)
        q = np.empty(flat.shape, dtype=out)
        mode = round_mode(attrs)
        if mode not in _QUANTIZED_IN_PLACE:
            for i in range(0, flat.size, _ELEMENTWISE_BLOCK):
                block = slice(i, i + _ELEMENTWISE_BLOCK)
                q[block] = quantize_tensor(flat[block], scale_value, zp, out, mode)
            return [q.reshape(x.shape)]
        scaled = np.empty(min(flat.size, _ELEMENTWISE_BLOCK))
        halves = np.empty_like(scaled) if mode == "half_away_from_zero" else scaled
        info = int_info(out)
        for i in range(0, flat.size, _ELEMENTWISE_BLOCK):
            block = slice(i, i + _ELEMENTWISE_BLOCK)
            _quantize_block(flat[block], scale_value, zp, mode, (int(info.min), int(info.max)),
                            scaled[: q[block].size], halves[: q[block].size], q[block])
        return [q.reshape(x.shape)]
    real = (x.astype(np.float32) - np.float32(zp)) * np.float32(scale_value)
    return [real.astype(out)]
