"""What the INT8 kernels share: zero points, rounding modes and channel axes from an op's
attributes, and the exact finish of a sum of integer products (bias, requantization by
multiplier and shift, output zero point, saturation) in float64 where that is provably
exact, else in int64, else through `quant.requantize` (see `kernels.int8`)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from tpu_xdsl.kernels import ResultSpec
from tpu_xdsl.kernels.memo import ConstantMemo
from tpu_xdsl.kernels.quant import (
    REQUANT_BLOCK,
    int_info,
    requantize,
)

DEFAULT_ROUND_MODE = "half_away_from_zero"
_FLOAT32_EXACT = 1 << 24
_FLOAT64_EXACT = 1 << 53


def zero_point(attrs: dict[str, Any], index: int) -> int:
    points = attrs.get("input_zero_points") or []
    return int(points[index]) if index < len(points) else 0


def round_mode(attrs: dict[str, Any]) -> str:
    return attrs.get("round_mode") or DEFAULT_ROUND_MODE


def channel_axis(attrs: dict[str, Any], ndim: int) -> int:
    """The axis per-channel vectors run along: `channel_axis`, else 1."""
    return int(attrs.get("channel_axis", 1) or 1) % max(ndim, 1)


def magnitude_bound(x: np.ndarray, zp: int) -> int:
    """The largest |x - zp| the dtype of `x` allows."""
    info = int_info(x.dtype)
    return max(abs(int(info.min) - zp), abs(int(info.max) - zp))


def exact_float(terms: int, *bounds: int) -> np.dtype:
    """float32 when a sum of `terms` products of factors bounded by `bounds` is exact in
    it (below 2^24), else float64."""
    largest = terms * int(math.prod(bounds))
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


def float32_terms(*bounds: int) -> int | None:
    """How many products bounded by `bounds` a float32 sum holds exactly (every partial
    sum below 2^24), None when not even one."""
    return (_FLOAT32_EXACT - 1) // int(math.prod(bounds)) or None


class IntRequant(NamedTuple):
    """`finish_sum` in int64: sat(((acc * mult + bias_term [+ sign]) + addend) >> shift)."""

    mult: np.ndarray  # per channel, shifted to the common shift
    addend: np.ndarray  # per channel: rounding offset + zo << shift (+ bias * mult)
    bias_term: np.ndarray | None  # bias * mult, when added before the sign step
    signed_ties: bool  # half away from zero: a negative sum rounds its ties down
    shift: int


class FloatRequant(NamedTuple):
    """`finish_sum` in float64: sat(round((acc + bias) * scale + offset) [+ zo])."""

    scale: np.ndarray  # per channel: multiplier / 2^rshift, exact
    bias: np.ndarray | None  # per channel, as float64 (exact)
    offset: float  # see `float_rounding`
    rounding: str  # "floor", "rint", "trunc" or "away" (trunc(p + copysign(0.5, p)))
    zo_after: int


def finish_sum(
    acc: np.ndarray, bias: np.ndarray | None, attrs: dict[str, Any], result: ResultSpec, bound: int
) -> np.ndarray:
    """`finish` for the sums of conv-like ops: `acc` [N, C, ...] holds exact integers in
    float (a strided view is fine), |acc| <= `bound`, plus an int32 bias per channel.

    Blocks of a few channels are requantized in cache by one of two exact plans:
    float64, when every result that does not saturate is a product below 2^53
    (`_float_requant`), else int64, when nothing can overflow (`_int_requant`);
    otherwise the general path. The plan is made once per op (`_REQUANT_PLANS`)."""
    plan, low = _REQUANT_PLANS.get(
        attrs, (result.shape, result.dtype, bound), (bias,), lambda: _requant_plan(bias, attrs, result, bound)
    )
    if plan is None:
        total = as_int64(acc)
        if bias is not None:
            total += bias.astype(np.int64).reshape(1, -1, *([1] * (acc.ndim - 2)))
        return finish(total, attrs, result)
    high = int(int_info(result.dtype).max)
    inner = int(math.prod(acc.shape[2:]))
    step = max(1, REQUANT_BLOCK // max(inner, 1))
    column = (-1, *([1] * (acc.ndim - 2)))
    out = np.empty(result.shape, dtype=result.dtype)
    if isinstance(plan, FloatRequant):
        _float_blocks(acc, plan, column, step, inner, low, high, out)
    else:
        _int_blocks(acc, plan, column, step, inner, low, high, out)
    return out


# The requantization plans of `finish_sum`, by the op's attributes and bias (`ConstantMemo`):
# per-op constant work (multiplier and shift arrays, exactness bounds) paid once instead of
# on every run.
_REQUANT_PLANS: ConstantMemo[tuple[IntRequant | FloatRequant | None, int]] = ConstantMemo()


def _requant_plan(
    bias: np.ndarray | None, attrs: dict[str, Any], result: ResultSpec, bound: int
) -> tuple[IntRequant | FloatRequant | None, int]:
    """`finish_sum`'s plan (None: the general path) and the lowest output code."""
    multiplier = np.asarray(attrs.get("multiplier") or [1], dtype=np.int64)
    rshift = np.asarray(attrs.get("rshift") or [0], dtype=np.int64)
    zo = int(attrs.get("output_zero_point", 0) or 0)
    info = int_info(result.dtype)
    channels = result.shape[1]
    usable = (
        info.min <= zo <= info.max
        and not {multiplier.size, rshift.size} - {1, channels}
        and 0 <= rshift.min()
        and rshift.max() <= 62
    )
    low = max(int(info.min), zo) if attrs.get("do_relu") else int(info.min)
    plan: IntRequant | FloatRequant | None = None
    if usable:
        mode = round_mode(attrs)
        if low >= zo:
            # A negative sum rounds to <= 0 in every mode, clamped to low >= zo (ReLU,
            # or uint8 with zero point 0): half up and floor do the same there.
            mode = {"half_away_from_zero": "half_up", "toward_zero": "down"}.get(mode, mode)
        largest_bias = 0 if bias is None or not bias.size else max(abs(int(bias.min())), abs(int(bias.max())))
        parts = (multiplier, rshift, bias, zo, mode, channels, bound + largest_bias)
        plan = _float_requant(*parts, low, int(info.max)) or _int_requant(*parts)
    return plan, low


def _float_requant(
    multiplier: np.ndarray, rshift: np.ndarray, bias: np.ndarray | None, zo: int, mode: str,
    channels: int, largest: int, low: int, high: int,
) -> FloatRequant | None:
    """The float64 plan, when exact. A result that does not saturate has |p| < R =
    max(high - zo, zo - low) + 1, so |(acc + bias) * m| < R * 2^s: with
    (R + |zo| + 1) * 2^s <= 2^53 that product, p + offset and its rounding are
    exact in float64. A larger p saturates in both paths (rounding is monotone)."""
    reach = max(high - zo, zo - low) + 1
    if (reach + abs(zo) + 1) << int(rshift.max()) > 1 << 53:
        return None
    if largest >= 1 << 53 or np.abs(multiplier).max() >= 1 << 53:  # acc + bias, m / 2^s exact
        return None
    offset, rounding, zo_after = float_rounding(mode, zo)
    if rounding in ("away", "rint") and not ties_possible(multiplier, rshift, largest):
        # No value sits halfway between two integers: every round-to-nearest mode is rint,
        # and rint(p + zo) = rint(p) + zo (two passes fewer than away's copysign and add).
        offset, rounding, zo_after = float(zo), "rint", 0
    return FloatRequant(
        scale=np.broadcast_to(multiplier / np.exp2(rshift.astype(np.float64)), (channels,)),
        bias=None if bias is None or not bias.any() else bias.reshape(-1).astype(np.float64),
        offset=offset,
        rounding=rounding,
        zo_after=zo_after,
    )


def ties_possible(multiplier: np.ndarray, rshift: np.ndarray, largest: int) -> bool:
    """Whether some v * m / 2^s, |v| <= `largest` an integer, can be a tie (an odd multiple
    of 1/2), per channel. With m = odd * 2^t and e = s - t, v * m / 2^s = v * odd / 2^e:
    for e <= 0 an integer; else a tie needs v * odd = 2^(e-1) (mod 2^e), so 2^(e-1)
    divides v (odd is odd), impossible for 0 < |v| < 2^(e-1) (v = 0 gives 0)."""
    m, s = np.broadcast_arrays(np.abs(np.asarray(multiplier, np.int64)), np.asarray(rshift, np.int64))
    nonzero = m != 0
    if not nonzero.any():
        return False
    lowest_bit = (m & -m)[nonzero]
    exponents = s[nonzero] - np.log2(lowest_bit.astype(np.float64)).astype(np.int64)
    rounded = exponents[exponents >= 1]
    return rounded.size > 0 and largest >= 1 << (int(rounded.min()) - 1)


def float_rounding(mode: str, zo: int) -> tuple[float, str, int]:
    """(offset, rounding, zo_after): round(p) + zo as rounding(p + offset) + zo_after, for
    p a multiple of 2^-s held exactly in float64. Rounding commutes with adding an
    integer, except half to even with an odd one and the modes symmetric about 0."""
    if mode in ("half_up", "down"):
        return zo + (0.5 if mode == "half_up" else 0.0), "floor", 0
    if mode == "half_to_even":
        return (zo, "rint", 0) if zo % 2 == 0 else (0.0, "rint", zo)
    return 0.0, "trunc" if mode == "toward_zero" else "away", zo


def round_and_saturate(
    p: np.ndarray, scratch: np.ndarray, rounding: str, zo_after: int, low: int, high: int, out: np.ndarray
) -> None:
    """out = clip(rounding(p) + zo_after, low, high), in place on p (float64).

    The cast into `out` truncates toward zero, and rounding and clipping to integer bounds
    commute (both are monotone and keep integers). So where truncation is the rounding,
    the cast does it and the rounding pass goes: floor of values clipped to low >= 0, and
    trunc (also after adding copysign(0.5, p)) when no zero point follows."""
    if rounding == "rint":
        np.rint(p, out=p)
    elif rounding == "floor":
        if low < 0:
            np.floor(p, out=p)
    else:
        if rounding == "away":
            _copysign_half(p, scratch)
            p += scratch
        if zo_after:
            np.trunc(p, out=p)
    if zo_after:
        p += zo_after
    # Clipping in place and then casting: a clip that casts float64 to int8 as it
    # writes runs through numpy's buffered casting loop, twice as slow.
    np.clip(p, low, high, out=p)
    np.copyto(out, p, casting="unsafe")


_SIGN_BIT = np.int64(-(1 << 63))
_HALF_BITS = np.float64(0.5).view(np.int64)


def _copysign_half(p: np.ndarray, out: np.ndarray) -> None:
    """out = copysign(0.5, p) for float64 arrays, bit for bit: p's sign bit set on 0.5's
    bits, two integer passes (numpy's copysign runs about 4x slower than either)."""
    bits = out.view(np.int64)
    np.bitwise_and(p.view(np.int64), _SIGN_BIT, out=bits)
    np.bitwise_or(bits, _HALF_BITS, out=bits)


def _int_requant(
    multiplier: np.ndarray, rshift: np.ndarray, bias: np.ndarray | None, zo: int, mode: str,
    channels: int, largest: int,
) -> IntRequant | None:
    """The int64 plan, when nothing overflows: bias, rounding offset and zero point fold
    into one addend per channel, per-channel shifts into the multipliers
    (m << (shift - s) over 2^shift rounds alike)."""
    if mode not in ("half_away_from_zero", "half_up", "down"):
        return None
    shift = int(rshift.max())
    # Python-int bounds first: the int64 arrays below then cannot overflow.
    largest_mult = max(abs(int(multiplier.min())), abs(int(multiplier.max()))) << (shift - int(rshift.min()))
    if largest_mult >= 1 << 63 or largest * largest_mult + (abs(zo) + 2) * (1 << shift) >= 1 << 63:
        return None
    mult = np.broadcast_to(multiplier << (shift - rshift), (channels,))
    half = 1 << (shift - 1) if shift and mode != "down" else 0
    signed_ties = mode == "half_away_from_zero" and shift > 0
    bias_term = None if bias is None or not bias.any() else bias.reshape(-1).astype(np.int64) * mult
    addend = np.full(channels, half + (zo << shift), dtype=np.int64)
    if bias_term is not None and not signed_ties:
        addend += bias_term
        bias_term = None
    return IntRequant(mult, addend, bias_term, signed_ties, shift)


def _float_blocks(
    acc: np.ndarray, plan: FloatRequant, column: tuple[int, ...], step: int, inner: int,
    low: int, high: int, out: np.ndarray,
) -> None:
    scale = plan.scale.reshape(column)
    bias = None if plan.bias is None else plan.bias.reshape(column)
    buffer = np.empty(step * inner)
    scratch = np.empty(step * inner)
    for image in range(acc.shape[0]):
        for c0 in range(0, acc.shape[1], step):
            rows = slice(c0, c0 + step)
            block = acc[image, rows]
            p = buffer[: block.size].reshape(block.shape)
            # Widen first: a ufunc mixing float32 and float64 operands casts through
            # numpy's buffered loop, several times slower than a copy and in-place ops.
            np.copyto(p, block)
            if bias is not None:
                p += bias[rows]
            p *= scale[rows]
            if plan.offset:
                p += plan.offset
            spare = scratch[: block.size].reshape(block.shape)
            round_and_saturate(p, spare, plan.rounding, plan.zo_after, low, high, out[image, rows])


def _int_blocks(
    acc: np.ndarray, plan: IntRequant, column: tuple[int, ...], step: int, inner: int,
    low: int, high: int, out: np.ndarray,
) -> None:
    mult, addend = plan.mult.reshape(column), plan.addend.reshape(column)
    bias_term = None if plan.bias_term is None else plan.bias_term.reshape(column)
    buffer = np.empty(step * inner, dtype=np.int64)
    signs = np.empty(step * inner, dtype=np.int64) if plan.signed_ties else buffer
    for image in range(acc.shape[0]):
        for c0 in range(0, acc.shape[1], step):
            rows = slice(c0, c0 + step)
            block = acc[image, rows]
            v = buffer[: block.size].reshape(block.shape)
            np.copyto(v, block, casting="unsafe")  # exact integers; widened first as in _float_blocks
            v *= mult[rows]
            if bias_term is not None:
                np.add(v, bias_term[rows], out=v)
            if plan.signed_ties:  # v - 1 below zero
                sign = signs[: block.size].reshape(block.shape)
                np.right_shift(v, 63, out=sign)
                np.add(v, sign, out=v)
            np.add(v, addend[rows], out=v)
            np.right_shift(v, plan.shift, out=v)
            np.clip(v, low, high, out=v)
            np.copyto(out[image, rows], v, casting="unsafe")


def float_spec(result: ResultSpec, dtype: np.dtype) -> list[ResultSpec]:
    return [ResultSpec(result.shape, dtype)]


NO_RELU = {"do_relu": False, "relu_limit": None}
