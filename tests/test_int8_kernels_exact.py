"""The tuned INT8 kernels give exactly the integers of slow, obviously correct references.

The references here use Python integers (rounding, requantization) and int64
numpy loops over kernel taps (conv); the kernels use float BLAS, float64 or
int64 requantization and cache blocks. Shapes are small and random but reach
every path: stride 2, padding, dilation, groups, depthwise, uint8 inputs with
zero points, every round mode, per-channel and scalar multipliers, shifts 0,
> 31 and 63, saturation at both ends, and reductions long enough for the
float64 (chunked float32) sums.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tpu_xdsl.kernels import ResultSpec
from tpu_xdsl.kernels.int8 import INT8_KERNELS
from tpu_xdsl.kernels.int8_sums import finish_sum
from tpu_xdsl.kernels.quant import (
    ROUND_MODES,
    int8_matmul,
    quantize_tensor,
    requantize,
    rounding_shift,
    saturate,
)

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


# -- references ------------------------------------------------------------------------------


def wrap64(v: int) -> int:
    """v as int64 arithmetic leaves it (two's complement wrap-around)."""
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


def round_shift_ref(v: int, s: int, mode: str) -> int:
    """v / 2^s rounded by `mode`, with Python's exact integers."""
    if s == 0:
        return v
    q, r = divmod(v, 1 << s)  # floor and remainder in [0, 2^s)
    half = 1 << (s - 1)
    if mode == "down":
        return q
    if mode == "toward_zero":
        return q + 1 if v < 0 and r else q
    if mode == "half_up":
        return q + 1 if r >= half else q
    if mode == "half_away_from_zero":
        return q + 1 if r > half or (r == half and v >= 0) else q
    assert mode == "half_to_even"
    return q + 1 if r > half or (r == half and q % 2 == 1) else q


def requantize_ref(acc: int, m: int, s: int, zo: int, dtype: np.dtype, mode: str, relu: bool = False) -> int:
    info = np.iinfo(dtype)
    y = wrap64(round_shift_ref(wrap64(acc * m), s, mode) + zo)
    y = min(max(y, int(info.min)), int(info.max))
    return max(y, zo) if relu else y


def requantize_array_ref(acc, mult, shift, zo, dtype, mode, relu=False, axis=1) -> np.ndarray:
    """Elementwise `requantize_ref` with per-channel (along `axis`) or scalar factors."""
    acc = np.asarray(acc, dtype=np.int64)
    channel = np.indices(acc.shape)[axis] if acc.ndim else np.zeros((), int)
    out = np.empty(acc.shape, dtype=dtype)
    for index in np.ndindex(acc.shape):
        c = int(channel[index])
        m = int(mult[c]) if np.ndim(mult) else int(mult)
        s = int(shift[c]) if np.ndim(shift) else int(shift)
        out[index] = requantize_ref(int(acc[index]), m, s, zo, dtype, mode, relu)
    return out


def conv_ref(x, w, bias, zx, strides, pads, dilations, group) -> np.ndarray:
    """sum over taps of int64 einsums on strided views of the zero-padded centered input."""
    spatial = x.ndim - 2
    widths = [(0, 0), (0, 0)] + [(pads[i], pads[i + spatial]) for i in range(spatial)]
    xc = np.pad(x.astype(np.int64) - zx, widths)
    oc, cg, *kernel = w.shape
    sizes = [(xc.shape[2 + i] - (kernel[i] - 1) * dilations[i] - 1) // strides[i] + 1 for i in range(spatial)]
    ocg = oc // group
    out = np.zeros((x.shape[0], oc, *sizes), dtype=np.int64)
    for tap in itertools.product(*(range(k) for k in kernel)):
        window = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dilations, sizes, strides))
        view = xc[(slice(None), slice(None), *window)]
        for g in range(group):
            w_g = w[(slice(g * ocg, (g + 1) * ocg), slice(None), *tap)].astype(np.int64)
            out[:, g * ocg : (g + 1) * ocg] += np.einsum("nc...,oc->no...", view[:, g * cg : (g + 1) * cg], w_g)
    if bias is not None:
        out += bias.astype(np.int64).reshape(1, -1, *([1] * spatial))
    return out


# -- rounding_shift, requantize, saturate, int8_matmul ------------------------------------------


def _values_with_ties(rng, shift: int) -> np.ndarray:
    edges = [INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX - 1, 0, 1, -1, 2, -2, 3, -3]
    spread = rng.integers(INT64_MIN, INT64_MAX, 200, dtype=np.int64, endpoint=True)
    small = rng.integers(-(1 << 20), 1 << 20, 200, dtype=np.int64)
    values = [np.array(edges, dtype=np.int64), spread, small]
    if shift:
        limit = 1 << max(0, 61 - shift)
        k = rng.integers(-limit, limit, 100, dtype=np.int64, endpoint=True)
        values += [(k << shift) + (1 << (shift - 1)), k << shift, (k << shift) - 1]
    return np.concatenate(values)


@pytest.mark.parametrize("mode", ROUND_MODES)
def test_rounding_shift_matches_python_integers_for_every_shift(mode):
    rng = np.random.default_rng(1)
    for shift in range(64):
        values = _values_with_ties(rng, shift)
        got = rounding_shift(values, shift, mode)
        expected = [round_shift_ref(int(v), shift, mode) for v in values]
        assert got.tolist() == expected, f"shift {shift}"


@pytest.mark.parametrize("mode", ROUND_MODES)
def test_rounding_shift_per_element_shifts(mode):
    rng = np.random.default_rng(2)
    values = _values_with_ties(rng, 7)
    shifts = rng.integers(0, 64, values.size)
    got = rounding_shift(values, shifts, mode)
    assert got.tolist() == [round_shift_ref(int(v), int(s), mode) for v, s in zip(values, shifts)]


@pytest.mark.parametrize("mode", ROUND_MODES)
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_requantize_per_channel_and_scalar(mode, dtype):
    rng = np.random.default_rng(3)
    acc = rng.integers(-(1 << 31), 1 << 31, (2, 5, 3, 7), dtype=np.int64)
    acc[0, :, 0, 0] = [0, 1, -1, (1 << 31) - 1, -(1 << 31)]
    mult = rng.integers(1 << 30, 1 << 31, 5)
    mult[1] = 0
    shift = np.array([0, 1, 31, 45, 63])
    zo = 3 if dtype == np.int8 else 100
    got = requantize(acc, mult, shift, zo, dtype, mode, axis=1)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, requantize_array_ref(acc, mult, shift, zo, dtype, mode))
    got = requantize(acc, int(mult[2]), 40, zo, dtype, mode)
    np.testing.assert_array_equal(got, requantize_array_ref(acc, mult[2], 40, zo, dtype, mode))
    # Channels on the last axis (matmul), and a product that wraps int64 as the reference does.
    acc[1, 1, 1] = (1 << 40, 1 << 41, -(1 << 40), 3, 4, 5, 6)
    moved = np.moveaxis(acc, 1, -1)
    got = requantize(moved, mult, shift, zo, dtype, mode, axis=3)
    np.testing.assert_array_equal(got, requantize_array_ref(moved, mult, shift, zo, dtype, mode, axis=3))


def test_requantize_large_tensor_runs_in_blocks_alike():
    rng = np.random.default_rng(4)
    acc = rng.integers(-(1 << 24), 1 << 24, (1, 3, 300, 301), dtype=np.int64)  # > one block per channel
    mult, shift = np.array([1 << 30, 3 << 29, 1234567]), np.array([33, 34, 20])
    got = requantize(acc, mult, shift, -2, np.int8, "half_away_from_zero")
    sample = (slice(None), slice(None), slice(0, 300, 37), slice(None, None, 41))
    expected = requantize_array_ref(acc[sample], mult, shift, -2, np.int8, "half_away_from_zero")
    np.testing.assert_array_equal(got[sample], expected)


def test_saturate_clips_both_ends():
    values = np.array([-1000, -129, -128, 0, 127, 128, 1 << 40], dtype=np.int64)
    assert saturate(values, np.int8).tolist() == [-128, -128, -128, 0, 127, 127, 127]
    assert saturate(values, np.uint8).tolist() == [0, 0, 0, 0, 127, 128, 255]
    assert saturate(np.int64(300), np.uint8) == 255


@pytest.mark.parametrize("k", [100, 1500])
def test_int8_matmul_float32_and_float64_sums(k):
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (6, k), dtype=np.int8)
    b = rng.integers(0, 256, (k, 4)).astype(np.uint8)
    a[0] = -128
    b[:, 0] = 255
    expected = a.astype(np.int64) @ b.astype(np.int64)
    got = int8_matmul(a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, expected)


# -- conv --------------------------------------------------------------------------------------


CONV_CASES = {
    # name: (x shape, dtype, zero point, OC, kernel, strides, pads, dilations, group)
    "1x1": ((1, 16, 5, 6), np.uint8, 0, 12, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    "1x1_long_k": ((1, 1100, 3, 4), np.uint8, 0, 5, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    "3x3_shifted": ((2, 64, 9, 8), np.uint8, 7, 6, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    "3x3_shifted_split_channels": ((1, 600, 5, 6), np.int8, 0, 3, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    "3x3_small_image": ((1, 64, 3, 3), np.int8, 0, 32, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    "3x3_small_image_long_k": ((1, 256, 3, 3), np.uint8, 3, 16, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    "3x3_stride2": ((1, 64, 9, 10), np.uint8, 128, 8, (3, 3), (2, 2), (1, 0, 2, 1), (1, 1), 1),
    "3x3_stride2_long_k": ((1, 128, 7, 8), np.uint8, 0, 8, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    "7x7_stride2": ((1, 3, 17, 15), np.int8, 0, 8, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1),
    "dilated": ((1, 8, 11, 11), np.uint8, 9, 4, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),
    "dilated_stride2": ((1, 8, 11, 12), np.int8, 0, 4, (3, 2), (2, 1), (1, 2, 0, 1), (2, 3), 1),
    "groups": ((1, 8, 7, 7), np.uint8, 4, 6, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),
    "depthwise": ((2, 6, 7, 8), np.uint8, 128, 6, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 6),
    "depthwise_5x5": ((1, 7, 9, 9), np.int8, 0, 7, (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 7),
    "depthwise_dilated_strided": ((2, 5, 10, 9), np.uint8, 3, 5, (3, 3), (2, 1), (2, 1, 1, 2), (2, 3), 5),
    "depthwise_1d": ((1, 4, 11), np.int8, 0, 4, (3,), (2,), (1, 1), (1,), 4),
}


def _requant_attrs(rng, oc: int, scalar: bool, shift_range: tuple[int, int]) -> dict:
    low, high = shift_range
    if scalar:
        return {"multiplier": [int(rng.integers(1 << 30, 1 << 31))], "rshift": [int(rng.integers(low, high + 1))]}
    shifts = rng.integers(low, high + 1, oc)
    shifts[0], shifts[-1] = low, high
    return {"multiplier": rng.integers(1 << 30, 1 << 31, oc).tolist(), "rshift": shifts.tolist()}


def _run_conv_case(
    case: str, mode: str, relu: bool, out_dtype, zo: int, scalar: bool, shifts, with_bias: bool, seed: int
):
    shape, dtype, zx, oc, kernel, strides, pads, dilations, group = CONV_CASES[case]
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    x = rng.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)
    x.reshape(-1)[:3] = [info.min, info.max, zx]
    w = rng.integers(-127, 128, (oc, shape[1] // group, *kernel)).astype(np.int8)
    w.reshape(-1)[:2] = [-128, 127]
    bias = rng.integers(-(1 << 20), 1 << 20, oc).astype(np.int32) if with_bias else None
    attrs = {
        "kernel_shape": list(kernel), "strides": list(strides), "pads": list(pads),
        "dilations": list(dilations), "group": group, "round_mode": mode, "do_relu": relu,
        "input_zero_points": [zx], "output_zero_point": zo,
        **_requant_attrs(rng, oc, scalar, shifts),
    }
    acc = conv_ref(x, w, bias, zx, strides, pads, dilations, group)
    result = ResultSpec(acc.shape, np.dtype(out_dtype))
    (got,) = INT8_KERNELS["conv"]([x, w, bias], attrs, [result])
    m, s = attrs["multiplier"], attrs["rshift"]
    expected = requantize_array_ref(
        acc, m if len(m) > 1 else m[0], s if len(s) > 1 else s[0], zo, out_dtype, mode, relu
    )
    assert got.dtype == out_dtype and got.shape == acc.shape
    np.testing.assert_array_equal(got, expected)
    return got


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv_every_layout(case):
    # Shifts 12..20 saturate much of the output; 36..44 round finely; 46..54 take int64.
    for seed, shifts in enumerate([(12, 20), (36, 44), (46, 54)]):
        _run_conv_case(case, "half_away_from_zero", False, np.int8, 0, False, shifts, True, seed)


def test_conv_saturates_at_both_ends():
    got = _run_conv_case(
        "3x3_shifted_split_channels", "half_away_from_zero", False, np.int8, 0, False, (18, 22), True, 0
    )
    assert (got == -128).any() and (got == 127).any()
    got = _run_conv_case("3x3_stride2", "half_up", True, np.uint8, 100, True, (20, 20), True, 1)
    assert (got == 100).any() and (got == 255).any()


@pytest.mark.parametrize("mode", ROUND_MODES)
def test_conv_ties_round_by_mode(mode):
    """Multipliers 3 << (s - 2) scale by 3/4: half the odd sums are ties. Small codes keep
    the results inside the type; shifts 2 and 46 take the float64 and int64 paths, 62
    the general one, for odd and even output zero points."""
    rng = np.random.default_rng(7)
    x = rng.integers(-3, 4, (1, 4, 6, 6)).astype(np.int8)
    w = rng.integers(-2, 3, (4, 1, 3, 3)).astype(np.int8)
    acc = conv_ref(x, w, None, 0, (1, 1), (1, 1, 1, 1), (1, 1), 4)
    for s in (2, 46, 62):
        for zo, relu in ((0, False), (-3, False), (3, True)):
            attrs = {
                "kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 4, "round_mode": mode,
                "multiplier": [3 << (s - 2)], "rshift": [s], "output_zero_point": zo, "do_relu": relu,
            }
            (got,) = INT8_KERNELS["conv"]([x, w, None], attrs, [ResultSpec(acc.shape, np.dtype(np.int8))])
            expected = requantize_array_ref(acc, 3 << (s - 2), s, zo, np.int8, mode, relu)
            np.testing.assert_array_equal(got, expected, err_msg=f"shift {s} zo {zo}")
    assert ((acc * 3) % 4 == 2).any()  # ties were there


@pytest.mark.parametrize("mode", ROUND_MODES)
@pytest.mark.parametrize(
    ("out_dtype", "zo", "relu"),
    [(np.int8, 0, False), (np.int8, -5, True), (np.uint8, 0, False), (np.uint8, 100, False), (np.uint8, 100, True)],
)
def test_conv_round_modes_zero_points_and_relu(mode, out_dtype, zo, relu):
    for seed, (case, scalar, shifts) in enumerate(
        [
            ("3x3_shifted", False, (30, 44)),
            ("3x3_stride2", True, (40, 40)),
            ("1x1", False, (45, 62)),
            ("depthwise", False, (0, 63)),
        ]
    ):
        _run_conv_case(case, mode, relu, out_dtype, zo, scalar, shifts, seed % 2 == 0, seed)


def test_conv_shift_zero_and_tiny_multipliers():
    # No rounding at all (shift 0) and multipliers of 1 give the raw saturated sum.
    for seed, case in enumerate(["1x1", "3x3_shifted", "depthwise"]):
        for mode in ("half_away_from_zero", "half_to_even"):
            _run_conv_case(case, mode, False, np.int8, 0, True, (0, 0), True, seed)


@pytest.mark.parametrize(
    "case", ["1x1_long_k", "3x3_shifted", "3x3_shifted_split_channels", "3x3_stride2_long_k", "3x3_small_image_long_k"]
)
def test_conv_sums_beyond_float32_stay_exact(case):
    """Extreme codes make sums far above 2^24, where one float32 sum would drop low
    bits; a bias cancels the sum of one pixel so that shift 0 shows every bit of it."""
    shape, dtype, zx, oc, kernel, strides, pads, dilations, group = CONV_CASES[case]
    rng = np.random.default_rng(8)
    info = np.iinfo(dtype)
    extreme = int(info.max) if zx < (int(info.max) + int(info.min)) / 2 else int(info.min)
    x = np.full(shape, extreme, dtype=dtype)
    x.reshape(-1)[::7] = extreme - np.sign(extreme - zx)  # not all the same, still far from zx
    w = rng.choice(np.array([127, 126, 125], dtype=np.int8), (oc, shape[1] // group, *kernel))
    acc = conv_ref(x, w, None, zx, strides, pads, dilations, group)
    assert np.abs(acc).max() > 1 << 24
    center = acc[0, :, acc.shape[2] // 2, acc.shape[3] // 2]
    bias = (rng.integers(-100, 100, oc) - center).astype(np.int32)
    attrs = {
        "kernel_shape": list(kernel), "strides": list(strides), "pads": list(pads), "dilations": list(dilations),
        "group": group, "input_zero_points": [zx], "multiplier": [1], "rshift": [0],
    }
    (got,) = INT8_KERNELS["conv"]([x, w, bias], attrs, [ResultSpec(acc.shape, np.dtype(np.int8))])
    expected = np.clip(acc + bias.reshape(1, -1, 1, 1), -128, 127)
    np.testing.assert_array_equal(got, expected)
    assert (np.abs(expected) < 100).any()


# -- matmul, add / sub ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ROUND_MODES)
@pytest.mark.parametrize("k", [64, 2048])
def test_matmul_per_column_requantization(mode, k):
    rng = np.random.default_rng(k)
    a = rng.integers(0, 256, (3, k)).astype(np.uint8)
    b = rng.integers(-127, 128, (5, k)).astype(np.int8)  # right_transpose: [N, K]
    bias = rng.integers(-(1 << 20), 1 << 20, 5).astype(np.int32)
    attrs = {
        "right_transpose": True, "input_zero_points": [17], "round_mode": mode, "output_zero_point": 2,
        "multiplier": rng.integers(1 << 30, 1 << 31, 5).tolist(), "rshift": [20, 35, 40, 44, 50],
    }
    acc = (a.astype(np.int64) - 17) @ b.astype(np.int64).T + bias
    (got,) = INT8_KERNELS["matmul"]([a, b, bias], attrs, [ResultSpec(acc.shape, np.dtype(np.int8))])
    expected = requantize_array_ref(acc, attrs["multiplier"], attrs["rshift"], 2, np.int8, mode, axis=1)
    np.testing.assert_array_equal(got, expected)


def test_matmul_sums_beyond_float32_stay_exact():
    rng = np.random.default_rng(9)
    a = np.full((2, 3000), 255, dtype=np.uint8)
    a[:, ::5] = 254
    b = rng.choice(np.array([127, 126], dtype=np.int8), (3000, 4))
    acc = a.astype(np.int64) @ b.astype(np.int64)
    bias = (rng.integers(-50, 50, 4) - acc[0]).astype(np.int32)
    attrs = {"multiplier": [1], "rshift": [0]}
    (got,) = INT8_KERNELS["matmul"]([a, b, bias], attrs, [ResultSpec(acc.shape, np.dtype(np.int8))])
    np.testing.assert_array_equal(got, np.clip(acc + bias, -128, 127))


def _add_ref(a, b, za, zb, m0, m1, s, zo, dtype, mode, relu):
    a64, b64 = np.broadcast_arrays(a.astype(np.int64) - za, b.astype(np.int64) - zb)
    acc = a64 * m0 + b64 * m1
    return requantize_array_ref(acc, 1, s, zo, dtype, mode, relu)


@pytest.mark.parametrize("mode", ROUND_MODES)
@pytest.mark.parametrize(
    ("out_dtype", "zo", "relu"),
    [(np.int8, 0, False), (np.int8, 0, True), (np.uint8, 0, False), (np.uint8, 90, False), (np.int8, -7, True)],
)
def test_add_and_sub_every_mode(mode, out_dtype, zo, relu):
    rng = np.random.default_rng(6)
    a = rng.integers(0, 256, (2, 3, 9, 11)).astype(np.uint8)
    b = rng.integers(-128, 128, (2, 3, 9, 11)).astype(np.int8)
    a.reshape(-1)[:2], b.reshape(-1)[:2] = [0, 255], [-128, 127]
    for s in (0, 1, 31, 40, 52, 53, 63):
        m0 = int(rng.integers(1, 1 << 31)) >> max(0, 31 - s)
        m1 = -int(rng.integers(1, 1 << 31)) >> max(0, 30 - s)  # negative: sub
        attrs = {
            "multiplier": [m0, m1], "rshift": [s], "input_zero_points": [128, 0],
            "output_zero_point": zo, "round_mode": mode, "do_relu": relu,
        }
        (got,) = INT8_KERNELS["add"]([a, b], attrs, [ResultSpec(a.shape, np.dtype(out_dtype))])
        np.testing.assert_array_equal(
            got, _add_ref(a, b, 128, 0, m0, m1, s, zo, out_dtype, mode, relu), err_msg=f"shift {s}"
        )


@pytest.mark.parametrize("mode", ROUND_MODES)
@pytest.mark.parametrize(("out_dtype", "zo", "relu"), [(np.int8, 0, False), (np.uint8, 0, True), (np.int8, -7, True)])
def test_add_with_per_channel_multipliers(mode, out_dtype, zo, relu):
    """2C multipliers (a's per channel, then b's), one shift; b broadcasts like an SE scale."""
    rng = np.random.default_rng(16)
    a = rng.integers(-128, 128, (1, 5, 6, 7)).astype(np.int8)
    b = rng.integers(0, 256, (1, 5, 1, 1)).astype(np.uint8)
    a.reshape(-1)[:2] = [-128, 127]
    for s in (0, 1, 31, 40, 52, 53, 63):
        ma = [int(v) >> max(0, 31 - s) for v in rng.integers(1, 1 << 31, 5)]
        mb = [-(int(v) >> max(0, 30 - s)) for v in rng.integers(1, 1 << 31, 5)]
        attrs = {
            "multiplier": ma + mb, "rshift": [s], "input_zero_points": [0, 3],
            "output_zero_point": zo, "round_mode": mode, "do_relu": relu,
        }
        (got,) = INT8_KERNELS["add"]([a, b], attrs, [ResultSpec(a.shape, np.dtype(out_dtype))])
        column = (1, 5, 1, 1)
        expected = _add_ref(
            a, b, 0, 3, np.array(ma).reshape(column), np.array(mb).reshape(column), s, zo, out_dtype, mode, relu
        )
        np.testing.assert_array_equal(got, expected, err_msg=f"shift {s}")


def test_add_ties_and_broadcasting():
    # m0 = m1 = 2^(s-1) makes every odd sum a tie; b broadcasts along the channels.
    a = np.arange(-128, 128, dtype=np.int8).reshape(1, 2, 128, 1)
    b = np.array([-3, 0, 5], dtype=np.int8).reshape(1, 1, 1, 3)
    for mode in ROUND_MODES:
        for s in (1, 2, 33):
            attrs = {"multiplier": [1 << (s - 1), 1 << (s - 1)], "rshift": [s], "round_mode": mode}
            shape = (1, 2, 128, 3)
            (got,) = INT8_KERNELS["add"]([a, b], attrs, [ResultSpec(shape, np.dtype(np.int8))])
            expected = _add_ref(a, b, 0, 0, 1 << (s - 1), 1 << (s - 1), s, 0, np.int8, mode, False)
            np.testing.assert_array_equal(got, expected, err_msg=f"{mode} shift {s}")


@pytest.mark.parametrize("mode", ROUND_MODES)
@pytest.mark.parametrize(
    ("out_dtype", "zo", "relu"), [(np.int8, 0, False), (np.uint8, 0, True), (np.int8, -7, True), (np.uint8, 90, False)]
)
def test_mul_every_mode_per_channel_and_scalar(mode, out_dtype, zo, relu):
    """A product of codes, b broadcast like an SE scale, requantized per channel or by one
    multiplier, against Python integers; shifts from 0 to 63 (the largest leave float64's
    exact range and take the integer path)."""
    rng = np.random.default_rng(26)
    a = rng.integers(-128, 128, (1, 5, 6, 7)).astype(np.int8)
    b = rng.integers(0, 256, (1, 5, 1, 1)).astype(np.uint8)
    a.reshape(-1)[:2], b.reshape(-1)[:2] = [-128, 127], [0, 255]
    acc = (a.astype(np.int64) - 0) * (b.astype(np.int64) - 3)
    for s in (0, 1, 20, 31, 37, 40, 53, 63):
        for mult in (
            [int(v) >> max(0, 31 - s) for v in rng.integers(1, 1 << 31, 5)],
            [int(rng.integers(1, 1 << 31)) >> max(0, 31 - s)],
        ):
            attrs = {"multiplier": mult, "rshift": [s], "input_zero_points": [0, 3], "output_zero_point": zo,
                     "round_mode": mode, "do_relu": relu}
            (got,) = INT8_KERNELS["mul"]([a, b], attrs, [ResultSpec(a.shape, np.dtype(out_dtype))])
            m = np.array(mult) if len(mult) > 1 else mult[0]
            expected = requantize_array_ref(acc, m, s, zo, out_dtype, mode, relu)
            np.testing.assert_array_equal(got, expected, err_msg=f"shift {s}, {len(mult)} multipliers")


# -- cast, lut -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ROUND_MODES)
@pytest.mark.parametrize(("dtype", "zp"), [(np.int8, 0), (np.uint8, 37)])
def test_cast_to_int_in_blocks_matches_quantize_tensor(mode, dtype, zp):
    rng = np.random.default_rng(10)
    x = (rng.standard_normal((1, 3, 150, 151)) * 3).astype(np.float32)  # several blocks
    x.reshape(-1)[:8] = [np.nan, np.inf, -np.inf, 0.025, -0.025, 0.075, 1e30, -1e30]  # ties of scale 0.05
    attrs = {"scale": 0.05, "zero_point": zp, "round_mode": mode}
    (got,) = INT8_KERNELS["cast"]([x], attrs, [ResultSpec(x.shape, np.dtype(dtype))])
    np.testing.assert_array_equal(got, quantize_tensor(x, 0.05, zp, dtype, mode))
    assert got.dtype == dtype and got.reshape(-1)[1] == np.iinfo(dtype).max
    # by definition: NaN is 0 (the zero point), -inf and -1e30 the smallest code
    assert got.reshape(-1)[0] == zp and got.reshape(-1)[2] == got.reshape(-1)[7] == np.iinfo(dtype).min


def test_lut_indexes_by_byte():
    rng = np.random.default_rng(11)
    table = rng.integers(-128, 128, 256).astype(np.int8)
    x = np.arange(-128, 128, dtype=np.int8).reshape(2, 4, 32)
    (got,) = INT8_KERNELS["lut"]([x, table], {}, [ResultSpec(x.shape, np.dtype(np.int8))])
    assert got.reshape(-1).tolist() == [int(table[v & 0xFF]) for v in x.reshape(-1).tolist()]
    u = x.view(np.uint8)
    (got,) = INT8_KERNELS["lut"]([u, table], {}, [ResultSpec(x.shape, np.dtype(np.int8))])
    assert got.reshape(-1).tolist() == [int(table[v]) for v in u.reshape(-1).tolist()]


@pytest.mark.parametrize("table_dtype", [np.int8, np.uint8])
def test_lut_on_a_large_tensor_looks_up_every_byte_pair(table_dtype):
    """Large tensors look bytes up two at a time: every (first, second) byte pair, both
    signs of table, equals the table entry of each byte."""
    rng = np.random.default_rng(12)
    info = np.iinfo(table_dtype)
    table = rng.integers(int(info.min), int(info.max) + 1, 256).astype(table_dtype)
    first, second = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    pairs = np.stack([first, second], axis=-1).astype(np.uint8).view(np.int8)
    x = np.concatenate([pairs, pairs[::-1]]).reshape(1, 16, 128, 128)
    (got,) = INT8_KERNELS["lut"]([x, table], {}, [ResultSpec(x.shape, np.dtype(table_dtype))])
    bytes_ = x.view(np.uint8).reshape(-1)
    assert got.dtype == table_dtype
    assert np.array_equal(got.reshape(-1), table[bytes_])


@pytest.mark.parametrize("mode", ROUND_MODES)
@pytest.mark.parametrize(
    ("dtype", "zo", "relu"), [(np.uint8, 0, False), (np.int8, 0, False), (np.uint8, 200, False), (np.int8, -9, True)]
)
def test_conv_requantization_at_the_edges_of_its_fast_paths(mode, dtype, zo, relu):
    """Sums whose scaled values sit at ties and at the saturation edges, and up to the
    bound, for shifts on both sides of the float64 plan's limit (44 / 45 here)."""
    rng = np.random.default_rng(12)
    bound = 1 << 31
    mult = np.array([(1 << 31) - 1, 3 << 29, 1 << 30, 1234567891])
    for shift in (0, 20, 43, 44, 45, 46, 51, 62):
        targets = np.array([-300, -256, -129, -128.5, -1.5, -0.5, 0.5, 1.5, 126.5, 127.5, 128, 254.5, 255.5, 256, 300])
        rows = []
        for m in mult:
            exact = np.floor(targets * 2.0**shift / m)
            near = np.concatenate([exact - 1, exact, exact + 1, rng.integers(-bound, bound, 8)])
            rows.append(np.clip(near, -bound, bound))
        acc = np.array(rows).reshape(1, 4, -1)
        bias = np.array([0, -7, 1 << 20, -(1 << 20)], dtype=np.int32)
        attrs = {
            "multiplier": mult.tolist(),
            "rshift": [shift],
            "round_mode": mode,
            "output_zero_point": zo,
            "do_relu": relu,
        }
        result = ResultSpec(acc.shape, np.dtype(dtype))
        got = finish_sum(acc, bias, attrs, result, bound)
        total = acc.astype(np.int64) + bias.reshape(1, -1, 1)
        expected = requantize_array_ref(total, mult, shift, zo, dtype, mode, relu)
        np.testing.assert_array_equal(got, expected, err_msg=f"shift {shift}")


@pytest.mark.parametrize("channels", [3, 256, 257])  # row * 256 + byte in uint16 up to 256 rows
def test_lut_with_a_table_per_channel(channels):
    rng = np.random.default_rng(17)
    table = rng.integers(0, 256, (channels, 256)).astype(np.uint8)
    x = rng.integers(-128, 128, (2, channels, 4, 5)).astype(np.int8)
    x[0, -1, 0, :2] = [-1, 127]  # the last row's last entries
    (got,) = INT8_KERNELS["lut"]([x, table], {}, [ResultSpec(x.shape, np.dtype(np.uint8))])
    for n, c, h, w in np.ndindex(x.shape):
        assert got[n, c, h, w] == table[c, int(x[n, c, h, w]) & 0xFF]


def test_cast_with_per_channel_scales():
    x = np.array([[[0.5, -0.5]], [[0.5, -0.5]]], np.float32).reshape(1, 2, 1, 2)
    scales = np.array([0.25, 0.1], np.float32)
    (q,) = INT8_KERNELS["cast"]([x, scales], {}, [ResultSpec(x.shape, np.dtype(np.int8))])
    assert q.reshape(-1).tolist() == [2, -2, 5, -5]
    (real,) = INT8_KERNELS["cast"]([q, scales], {}, [ResultSpec(x.shape, np.dtype(np.float32))])
    np.testing.assert_allclose(real.reshape(-1), [0.5, -0.5, 0.5, -0.5], rtol=1e-6)


# -- pooling ---------------------------------------------------------------------------------


def _window_sums_ref(x: np.ndarray, zx: int, kernel, strides, pads, out) -> np.ndarray:
    """Sums of x - zx over each window in Python-sized integers (int64), padding adding 0."""
    centered_x = x.astype(np.int64) - zx
    padded = np.zeros((*x.shape[:2], x.shape[2] + pads[0] + pads[2], x.shape[3] + pads[1] + pads[3]), np.int64)
    padded[:, :, pads[0] : pads[0] + x.shape[2], pads[1] : pads[1] + x.shape[3]] = centered_x
    total = np.zeros((*x.shape[:2], *out), np.int64)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            total += padded[:, :, i : i + strides[0] * out[0] : strides[0], j : j + strides[1] * out[1] : strides[1]]
    return total


@pytest.mark.parametrize("mode", ROUND_MODES)
@pytest.mark.parametrize(
    ("shape", "kernel", "strides", "pads"),
    [
        ((1, 6, 12, 96), (12, 96), (1, 1), (0, 0, 0, 0)),  # global, as an SE block pools
        ((2, 3, 9, 10), (3, 3), (2, 2), (1, 1, 1, 1)),
        ((1, 4, 300, 300), (300, 300), (1, 1), (0, 0, 0, 0)),  # 90000 taps: float64 sums
    ],
)
def test_avg_pool_window_sums_requantize_exactly(mode, shape, kernel, strides, pads):
    rng = np.random.default_rng(31)
    out = tuple((shape[2 + d] + pads[d] + pads[d + 2] - kernel[d]) // strides[d] + 1 for d in range(2))
    for dtype, zx, zo, relu in ((np.int8, 0, 0, False), (np.uint8, 131, -5, True)):
        info = np.iinfo(dtype)
        x = rng.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)
        x.reshape(-1)[:2] = [info.min, info.max]
        acc = _window_sums_ref(x, zx, kernel, strides, pads, out)
        scalar, per_channel = [int(rng.integers(1 << 29, 1 << 31))], rng.integers(1 << 20, 1 << 31, shape[1]).tolist()
        for mult, s in ((scalar, 38), (per_channel, 44)):
            attrs = {"kernel_shape": list(kernel), "strides": list(strides), "pads": list(pads), "multiplier": mult,
                     "rshift": [s], "input_zero_points": [zx], "output_zero_point": zo, "round_mode": mode,
                     "do_relu": relu}
            (got,) = INT8_KERNELS["avg_pool"]([x], attrs, [ResultSpec(acc.shape, np.dtype(np.int8))])
            m = np.array(mult) if len(mult) > 1 else mult[0]
            expected = requantize_array_ref(acc, m, s, zo, np.int8, mode, relu)
            np.testing.assert_array_equal(got, expected, err_msg=f"{dtype.__name__}, {len(mult)} multipliers")


_ROUNDINGS = {
    "half_away_from_zero": lambda q: np.sign(q) * np.floor(np.abs(q) + 0.5),
    "half_to_even": np.rint,
    "half_up": lambda q: np.floor(q + 0.5),
    "down": np.floor,
    "toward_zero": np.trunc,
}


@pytest.mark.parametrize("mode", ROUND_MODES)
def test_cast_to_int_divides_like_quantize_tensor(mode):
    """Values whose float32 and float64 quotients round to different codes in `mode`: the
    cast kernel must give quantize_tensor's codes for them (float64 quotients except where
    quantize_tensor documents float32)."""
    scale = 0.0370001
    rng = np.random.default_rng(12)
    x = (rng.standard_normal(4_000_000) * 2).astype(np.float32)
    wide, narrow = x.astype(np.float64) / scale, (x / np.float32(scale)).astype(np.float64)
    rounding = _ROUNDINGS[mode]
    split = x[rounding(wide) != rounding(narrow)]
    assert split.size >= 4  # the data does tell the two divisions apart
    x = np.concatenate([split, x[:5000]]).reshape(1, 1, 1, -1)
    attrs = {"scale": scale, "zero_point": 0, "round_mode": mode}
    (got,) = INT8_KERNELS["cast"]([x], attrs, [ResultSpec(x.shape, np.dtype(np.int8))])
    np.testing.assert_array_equal(got, quantize_tensor(x, scale, 0, np.int8, mode))


def test_copysign_half_is_numpys_copysign_bit_for_bit():
    from tpu_xdsl.kernels.int8_sums import _copysign_half

    p = np.concatenate([[0.0, -0.0, 0.5, -0.5, 5e-324, -5e-324, 1e308, -1e308, np.inf, -np.inf],
                        np.random.default_rng(3).standard_normal(1000) * 300])
    got = np.empty_like(p)
    _copysign_half(p, got)
    assert np.array_equal(got.view(np.int64), np.copysign(0.5, p).view(np.int64))


@pytest.mark.parametrize(
    ("multiplier", "rshift", "largest", "possible"),
    [
        ([3 << 8], [10], 1, False),  # 3/4: v = 1 gives 0.75, no half
        ([3 << 8], [10], 2, True),  # v = 2 gives 1.5
        ([1 << 30], [31], 1, True),  # 1/2
        ([(1 << 31) - 1], [40], (1 << 39) - 1, False),  # odd m: a tie needs 2^39 | v
        ([(1 << 31) - 1], [40], 1 << 39, True),
        ([5 << 6], [6], 1 << 40, False),  # m / 2^s = 5: integers only
        ([0], [20], 1 << 40, False),
        ([7, 1 << 19], [20], 1, True),  # per channel: the second one halves
        ([7, 3 << 10], [20, 20], 255, False),  # exponents 20 and 10: 255 < 2^9
        ([7, 3 << 10], [20, 20], 512, True),
        ([7], [20, 12], 2047, False),  # one multiplier, a shift per channel
        ([7], [20, 12], 2048, True),
    ],
)
def test_ties_possible_by_hand(multiplier, rshift, largest, possible):
    from tpu_xdsl.kernels.int8_sums import ties_possible

    assert ties_possible(np.array(multiplier), np.array(rshift), largest) is possible
    if not possible:  # brute force: no v in range rounds from a tie
        m = np.broadcast_to(np.array(multiplier, dtype=object), np.broadcast_shapes(len(multiplier), len(rshift)))
        s = np.broadcast_to(np.array(rshift, dtype=object), m.shape)
        v = range(-min(largest, 4096), min(largest, 4096) + 1)
        assert not any((x * int(mc)) % (1 << int(sc)) == 1 << (int(sc) - 1) for mc, sc in zip(m, s) for x in v if sc)


def test_requantization_without_ties_takes_rint():
    """A conv sum scaled by an odd multiplier over a large shift has no ties: the float64
    plan rounds by rint (fewer passes than half away from zero), with the same codes."""
    from tpu_xdsl.kernels.int8_sums import _REQUANT_PLANS, FloatRequant

    rng = np.random.default_rng(5)
    acc = rng.integers(-(1 << 20), 1 << 20, (1, 8, 5, 7)).astype(np.float32)
    bias = rng.integers(-1000, 1000, 8).astype(np.int32)
    mult = (rng.integers(1 << 29, 1 << 30, 8) | 1).tolist()
    for zo in (0, 3, -4):
        attrs = {"multiplier": mult, "rshift": [34], "round_mode": "half_away_from_zero", "output_zero_point": zo}
        result = ResultSpec(acc.shape, np.dtype(np.int8))
        got = finish_sum(acc, bias, attrs, result, 1 << 20)
        (plan, _), = [entry[2] for key, entry in _REQUANT_PLANS._entries.items() if entry[0] is attrs]
        assert isinstance(plan, FloatRequant) and plan.rounding == "rint"
        total = acc.astype(np.int64) + bias.reshape(1, -1, 1, 1)
        expected = requantize_array_ref(total, np.array(mult), 34, zo, np.int8, "half_away_from_zero", False)
        np.testing.assert_array_equal(got, expected)
