"""INT8 arithmetic shared by the TPU interpreter and the device model (bit-exact).

- `quantize_multiplier`: a real rescale factor as an integer multiplier and a
  right shift, y = (x * multiplier) >> rshift (TPU-MLIR's per-channel
  `multiplier`/`rshift`).
- `requantize`: int32 accumulators to int8/uint8 with a defined rounding mode
  and saturation, in int64 numpy arithmetic (elementwise: no integer matmul).
- `int8_matmul`: exact int8 x int8 -> int32 products through float BLAS:
  every partial sum of integer products is an integer, exact in float32 below
  2^24 and in float64 below 2^53 (DESIGN.md section 8); numpy integer matmul
  is 60-100x slower.
- `QParams` / `ChannelQParams`: how a tensor is quantized (one scale and zero
  point, or one scale per channel of an axis), and `activation_qparams` /
  `channel_qparams`, which choose them from calibrated ranges; weight and bias
  quantization.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

ROUND_MODES = ("half_away_from_zero", "half_up", "half_to_even", "down", "toward_zero")

# float64 sums of int8 products stay exact while K * 127 * 128 < 2^53.
_EXACT_K_LIMIT = (1 << 53) // (128 * 128)


@functools.cache
def int_info(dtype: np.dtype | type) -> np.iinfo:
    """np.iinfo(dtype), made once per dtype: kernels ask on every call, and each
    np.iinfo costs ~10 us (a small INT8 model paid 3 ms a run)."""
    return np.iinfo(dtype)


def quantize_multiplier(scale: float, bits: int = 31) -> tuple[int, int]:
    """(multiplier, rshift) with multiplier < 2^bits and multiplier / 2^rshift ~ scale.

    The multiplier is normalized into [2^(bits-1), 2^bits) for the most
    precision, as TPU-MLIR does for BM1684X (int32 multiplier, shift 0..63).
    A zero scale gives (0, 0).
    """
    if scale < 0 or not math.isfinite(scale):
        raise ValueError(f"rescale factor must be finite and >= 0, got {scale}")
    if scale == 0:
        return 0, 0
    mantissa, exponent = math.frexp(scale)  # scale = mantissa * 2^exponent, mantissa in [0.5, 1)
    multiplier = round(mantissa * (1 << bits))
    rshift = bits - exponent
    if multiplier == 1 << bits:  # rounding overflowed the mantissa
        multiplier //= 2
        rshift -= 1
    if rshift < 0:
        # A factor >= 2^bits (a calibration table with thresholds far apart): the largest
        # multiplier with no shift. The chip's multiplier register holds `bits` bits, and any
        # nonzero integer times 2^bits - 1 saturates the narrow output as the true factor would.
        return (1 << bits) - 1, 0
    while rshift > 63:
        multiplier >>= 1
        rshift -= 1
    return int(multiplier), int(rshift)


def rounding_shift(values: np.ndarray, rshift: np.ndarray | int, mode: str = "half_away_from_zero") -> np.ndarray:
    """values / 2^rshift rounded by `mode`, on int64 arrays (rshift per element or scalar, 0..63).

    The floor q = values >> rshift goes up by one where the remainder
    r = values & (2^rshift - 1) passes the mode's threshold (for half away from
    zero this is gemmlowp's RoundingDivideByPOT): bit operations and small
    integers only, so nothing overflows and every int64 value rounds exactly.
    """
    if mode not in ROUND_MODES:
        raise ValueError(f"round mode '{mode}': choose one of {', '.join(ROUND_MODES)}")
    v = np.asarray(values, dtype=np.int64)
    shift = np.asarray(rshift, dtype=np.int64)
    if not shift.any():
        return v
    mask = ~(np.int64(-1) << shift)  # 2^shift - 1, also for shift 63
    if mode == "toward_zero":  # negatives get 2^shift - 1 added: cannot overflow
        return (v + ((v >> 63) & mask)) >> shift
    floor = v >> shift
    if mode == "down":
        return floor
    below_half = mask >> 1  # 2^(shift-1) - 1; 0 for shift 0, which leaves no remainder
    match mode:
        case "half_up":
            threshold = below_half
        case "half_away_from_zero":  # the tie of a negative value stays down
            threshold = below_half - (v >> 63)
        case _:  # half_to_even: a tie goes up from an odd floor only
            threshold = below_half + 1 - (floor & 1)
    return floor + ((v & mask) > threshold)


def saturate(values: np.ndarray, dtype: np.dtype | type) -> np.ndarray:
    info = int_info(dtype)
    if np.ndim(values) == 0:
        return np.clip(values, info.min, info.max).astype(dtype)
    out = np.empty(np.shape(values), dtype=dtype)
    np.clip(values, info.min, info.max, out=out, casting="unsafe")  # in range: the cast is exact
    return out


# Requantization works on blocks of about this many elements: its int64 temporaries
# stay in cache.
REQUANT_BLOCK = 1 << 16


def requantize(
    acc: np.ndarray,
    multiplier: np.ndarray | int,
    rshift: np.ndarray | int,
    zero_point: int = 0,
    out_dtype: np.dtype | type = np.int8,
    round_mode: str = "half_away_from_zero",
    axis: int = 1,
) -> np.ndarray:
    """sat(round(acc * multiplier / 2^rshift) + zero_point) per channel along `axis`.

    `multiplier` and `rshift` are scalars or one entry per channel of `axis`.
    acc * multiplier fits int64 for |acc| < 2^31 and multiplier < 2^31 + 1 (the
    arithmetic is int64 as written: a larger product wraps).
    """
    acc = np.asarray(acc)
    out = np.empty(acc.shape, dtype=out_dtype)
    if acc.size == 0:
        return out
    if acc.ndim == 0:
        _requantize_block(acc, multiplier, rshift, zero_point, round_mode, out)
        return out
    mult = np.asarray(multiplier, dtype=np.int64)
    shift = np.asarray(rshift, dtype=np.int64)
    if not (mult.ndim or shift.ndim):
        flat, flat_out = acc.reshape(-1), out.reshape(-1)
        for i in range(0, flat.size, REQUANT_BLOCK):
            block = slice(i, i + REQUANT_BLOCK)
            _requantize_block(flat[block], mult, shift, zero_point, round_mode, flat_out[block])
        return out
    channels = acc.shape[axis]
    inner = int(math.prod(acc.shape[axis + 1 :]))
    mult, shift = mult.reshape(-1), shift.reshape(-1)
    if {mult.size, shift.size} - {1, channels}:
        raise ValueError(f"{mult.size} multipliers and {shift.size} shifts for {channels} channels")
    if inner == 1:  # channels on the last axis: per-channel factors are one row
        rows, rows_out = acc.reshape(-1, channels), out.reshape(-1, channels)
        mult, shift = mult.reshape(1, -1), shift.reshape(1, -1)
        step = max(1, REQUANT_BLOCK // channels)
    else:  # one row of `inner` values per (outer index, channel)
        rows, rows_out = acc.reshape(-1, inner), out.reshape(-1, inner)
        outer = rows.shape[0] // channels
        mult = np.tile(mult, outer * channels // mult.size).reshape(-1, 1)
        shift = np.tile(shift, outer * channels // shift.size).reshape(-1, 1)
        step = max(1, REQUANT_BLOCK // inner)
    for r0 in range(0, rows.shape[0], step):
        block = slice(r0, r0 + step)
        m = mult if mult.shape[0] == 1 else mult[block]
        s = shift if shift.shape[0] == 1 else shift[block]
        _requantize_block(rows[block], m, s, zero_point, round_mode, rows_out[block])
    return out


def _requantize_block(
    acc: np.ndarray, multiplier: np.ndarray | int, rshift: np.ndarray | int, zero_point: int,
    round_mode: str, out: np.ndarray,
) -> None:
    """One block of `requantize`, written into `out`."""
    scaled = rounding_shift(acc.astype(np.int64) * np.asarray(multiplier, dtype=np.int64), rshift, round_mode)
    info = int_info(out.dtype)
    np.clip(scaled + zero_point, info.min, info.max, out=out, casting="unsafe")


def int8_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact a @ b for integer inputs (int8/uint8/int16 values) as int32, via float BLAS:
    float32 when every partial sum stays below 2^24, else float64."""
    k = a.shape[-1]
    if k > _EXACT_K_LIMIT:
        raise ValueError(f"reduction length {k} too long for exact float64 accumulation")
    if k * _largest_magnitude(a) * _largest_magnitude(b) < 1 << 24:
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.int32)
    product = np.matmul(a.astype(np.float64), b.astype(np.float64))
    return product.astype(np.int64).astype(np.int32)


def _largest_magnitude(x: np.ndarray) -> int:
    return max(abs(int(x.min())), abs(int(x.max()))) if x.size else 0


def symmetric_scale(threshold: float, bits: int = 8) -> float:
    """Activation scale from a calibration threshold: S = threshold / 2^(bits-1) (public)."""
    return threshold / (1 << (bits - 1))


def quantize_tensor(x: np.ndarray, scale: float | np.ndarray, zero_point: int = 0,
                    dtype: np.dtype | type = np.int8, round_mode: str = "half_away_from_zero") -> np.ndarray:
    """Float -> int8/uint8: sat(round(x / scale) + zero_point).

    x / scale is float64, except half_to_even on float32 x: ONNX's QuantizeLinear rounds
    the float32 quotient (pre-quantized models use this mode), and a float32 division
    puts values exactly half-way between codes that float64 does not (pixels scaled by
    2/255 with scale 2/255); and half_up, the TOSA-compatible mode, which computes as a
    TOSA graph can: floor(x * float32(1 / scale) + 0.5), every step in float32 (TOSA has
    neither float64 nor division), so IREE quantizes to the same codes."""
    if round_mode == "half_up":
        inverse = (1.0 / np.asarray(scale, dtype=np.float64)).astype(np.float32)
        scaled = np.asarray(x, dtype=np.float32) * inverse
        scaled += np.float32(0.5)
    elif round_mode == "half_to_even" and np.asarray(x).dtype == np.float32:
        scaled = (np.asarray(x) / np.asarray(scale, dtype=np.float32)).astype(np.float64)
    else:
        scaled = np.asarray(x, dtype=np.float64) / scale
    if round_mode == "half_to_even":
        rounded = np.rint(scaled)
    elif round_mode == "half_away_from_zero":
        rounded = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)
    elif round_mode == "half_up":  # 0.5 added in float32 above
        rounded = np.floor(scaled).astype(np.float64)
    elif round_mode == "down":
        rounded = np.floor(scaled)
    elif round_mode == "toward_zero":
        rounded = np.trunc(scaled)
    else:
        raise ValueError(f"round mode '{round_mode}': choose one of {', '.join(ROUND_MODES)}")
    info = int_info(dtype)
    # Clip before the integer conversion: inf, NaN (-> 0) and huge values have no int64.
    rounded = np.asarray(rounded, dtype=np.float64)  # a fresh array (0-d for a scalar), clipped in place
    clip_nan_as_zero(rounded, info.min - zero_point, info.max - zero_point)
    return saturate(rounded.astype(np.int64) + zero_point, dtype)


def clip_nan_as_zero(x: np.ndarray, low: float, high: float) -> None:
    """x = clip(nan_to_num(x), low, high) in place, for low <= 0 <= high (NaN -> 0, +-inf -> the
    limits), in two passes: np.nan_to_num takes five, and ten times as long where a NaN or inf
    is present."""
    np.clip(x, low, high, out=x)
    np.copyto(x, 0.0, where=np.isnan(x))


def dequantize_tensor(q: np.ndarray, scale: float | np.ndarray, zero_point: int = 0) -> np.ndarray:
    return ((np.asarray(q, dtype=np.int64) - zero_point) * scale).astype(np.float32)


# -- quantization parameters of tensors -------------------------------------------------

INT32_MAX = (1 << 31) - 1


class _Codes:
    """The range of the integer codes of a quantization whose storage type is `dtype`."""

    # Declared as the dataclass fields of the subclasses declare it (they take a numpy
    # scalar type too, and normalize it to np.dtype in __post_init__).
    dtype: np.dtype | type

    @property
    def qmin(self) -> int:
        return int(int_info(self.dtype).min)

    @property
    def qmax(self) -> int:
        return int(int_info(self.dtype).max)


@dataclass(frozen=True)
class QParams(_Codes):
    """Uniform quantization of one tensor: real = (q - zero_point) * scale, q in dtype.

    Activations are int8 (symmetric, a tensor with negative values), uint8
    with zero point 0 (symmetric, a tensor that is never negative) or uint8
    with a zero point (asymmetric).
    """

    scale: float
    zero_point: int = 0
    dtype: np.dtype | type = np.int8

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", float(self.scale))
        object.__setattr__(self, "zero_point", int(self.zero_point))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))

    def quantize(self, x: np.ndarray, round_mode: str = "half_away_from_zero") -> np.ndarray:
        return quantize_tensor(x, self.scale, self.zero_point, self.dtype, round_mode)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        return dequantize_tensor(q, self.scale, self.zero_point)

    def quantized_value(self, real: float) -> int:
        """The code that represents `real` (saturated), e.g. a pad value."""
        return int(self.quantize(np.array([real]))[0])


def activation_qparams(threshold: float, low: float, high: float, asymmetric: bool) -> QParams:
    """An activation's quantization from its calibrated range.

    Symmetric: S = threshold / 128 and int8 when the tensor can be negative
    (low < 0); a tensor that never is uses all of uint8: S = threshold / 256,
    zero point 0. Asymmetric: uint8 over [max(low, -threshold),
    min(high, threshold)] widened to contain 0 (so that 0, the padding value,
    is exact): S = (hi - lo) / 255, zero point round(-lo / S).
    """
    if threshold <= 0 or not math.isfinite(threshold):
        raise ValueError(f"threshold must be positive and finite, got {threshold}")
    if not asymmetric:
        if low < 0:
            return QParams(symmetric_scale(threshold), 0, np.int8)
        return QParams(threshold / 256, 0, np.uint8)
    lo = min(max(low, -threshold), 0.0)
    hi = max(min(high, threshold), 0.0)
    if hi - lo <= 0:
        return QParams(threshold / 255, 0, np.uint8)
    scale = (hi - lo) / 255
    zero_point = int(min(255, max(0, round(-lo / scale))))
    return QParams(scale, zero_point, np.uint8)


def weight_scales(w: np.ndarray, axis: int | None, floor: np.ndarray | float = 0.0) -> np.ndarray:
    """Symmetric int8 scales max|w| / 127 per channel along `axis` (one scale when None),
    at least `floor` (per channel). An all-zero channel gets the largest scale of the
    others (1 when all are zero), so that a bias on it stays representable."""
    w = np.asarray(w, dtype=np.float64)
    if axis is None:
        top = np.array([np.max(np.abs(w))]) if w.size else np.zeros(1)
    else:
        moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
        top = np.max(np.abs(moved), axis=1) if moved.shape[1] else np.zeros(w.shape[axis])
    scales = np.maximum(top / 127, floor)
    positive = scales[scales > 0]
    fill = positive.max() if positive.size else 1.0
    return np.where(scales > 0, scales, fill)


def quantize_weights(w: np.ndarray, scales: np.ndarray, axis: int | None) -> np.ndarray:
    """w / scale rounded half away from zero into int8 (-127..127), per channel along `axis`."""
    w = np.asarray(w, dtype=np.float64)
    shape = [1] * w.ndim
    if axis is not None:
        shape[axis] = -1
    s = np.asarray(scales, dtype=np.float64).reshape(shape if axis is not None else ())
    q = quantize_tensor(w, s, 0, np.int8)
    return np.maximum(q, -127).astype(np.int8)


def quantize_bias(b: np.ndarray, scales: np.ndarray | float) -> np.ndarray:
    """A float bias as int32 in units of the accumulator (input scale x weight scale)."""
    q = np.asarray(b, dtype=np.float64) / np.asarray(scales, dtype=np.float64)
    q = np.sign(q) * np.floor(np.abs(q) + 0.5)
    return np.clip(q, -INT32_MAX, INT32_MAX).astype(np.int32)


def quantize_multipliers(scales: np.ndarray | list[float], bits: int = 31) -> tuple[list[int], int]:
    """Several rescale factors with one shared right shift: multipliers m_i with
    m_i / 2^rshift ~ scales[i], the largest normalized to `bits` bits (signs kept)."""
    values = [float(s) for s in scales]
    largest = max(abs(v) for v in values)
    if largest == 0:
        return [0] * len(values), 0
    _, rshift = quantize_multiplier(largest, bits)
    top = (1 << bits) - 1  # see quantize_multiplier: a factor past the register saturates
    multipliers = [int(np.sign(v) * min(math.floor(abs(v) * 2.0**rshift + 0.5), top)) for v in values]
    return multipliers, rshift


@dataclass(frozen=True, eq=False)
class ChannelQParams(_Codes):
    """Symmetric quantization with one scale per channel of `axis`: real = q * scales[c].

    The axis is 1 for [N, C, ...] tensors and the last axis for features-last
    [N, L, C] tensors (matmul outputs and what follows them). The chip keeps
    channel c of axis 1 in lane c % npu_num, so per-channel factors along axis 1
    cost nothing: consumers fold them into their weights or per-lane multipliers;
    along the last axis they are a vector each lane reads (docs/quantization.md).
    """

    scales: np.ndarray
    dtype: np.dtype | type = np.int8
    zero_point: int = 0
    axis: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "scales", np.asarray(self.scales, dtype=np.float64).reshape(-1))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        object.__setattr__(self, "axis", int(self.axis))

    def shaped(self, ndim: int) -> np.ndarray:
        """The scales shaped to broadcast along `axis` of an `ndim`-d tensor."""
        return self.scales.reshape(channel_shape(ndim, self.axis))

    def quantize(self, x: np.ndarray, round_mode: str = "half_away_from_zero") -> np.ndarray:
        x = np.asarray(x)
        return quantize_tensor(x, self.shaped(x.ndim), 0, self.dtype, round_mode)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        q = np.asarray(q)
        return dequantize_tensor(q, self.shaped(q.ndim), 0)


def channel_shape(ndim: int, axis: int = 1) -> tuple[int, ...]:
    """How a vector with one entry per channel of `axis` broadcasts against an `ndim`-d tensor."""
    shape = [1] * max(ndim, 1)
    shape[axis % max(ndim, 1)] = -1
    return tuple(shape)


def channel_qparams(low: np.ndarray, high: np.ndarray, threshold: float, axis: int = 1) -> ChannelQParams:
    """Per-channel symmetric quantization from per-channel calibrated ranges: channel c's
    threshold T_c = max(|min_c|, |max_c|), at least `threshold` / 128 (so that no channel
    is finer than 1/128 of the tensor's range, which bounds the weights folded with
    it); S_c = T_c / 128 in int8, T_c / 256 in uint8 when no channel is ever negative."""
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    channel = np.maximum(np.maximum(np.abs(low), np.abs(high)), threshold / 128)
    if np.all(low >= 0):
        return ChannelQParams(channel / 256, np.uint8, axis=axis)
    return ChannelQParams(channel / 128, np.int8, axis=axis)
