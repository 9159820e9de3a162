"""INT8 arithmetic: multipliers, rounding shifts, requantization, exact int8 GEMM."""

import numpy as np
import pytest

from tpu_xdsl.kernels.quant import (
    int8_matmul,
    quantize_multiplier,
    quantize_multipliers,
    quantize_tensor,
    requantize,
    rounding_shift,
    symmetric_scale,
)


@pytest.mark.parametrize("scale", [0.5, 1.0, 0.0123, 3.7e-5, 1.999, 123.456, 2**-40])
def test_multiplier_and_shift_represent_the_scale(scale):
    multiplier, rshift = quantize_multiplier(scale)
    assert 0 < multiplier < 2**31 and 0 <= rshift <= 63
    assert abs(multiplier / 2**rshift - scale) / scale < 2**-29


def test_multiplier_of_one_half_is_exact():
    assert quantize_multiplier(0.5) == (2**30, 31)
    assert quantize_multiplier(0.0) == (0, 0)
    with pytest.raises(ValueError):
        quantize_multiplier(-1.0)


# Halving 5, -5, 6, -6, 7, -7 gives 2.5, -2.5, 3, -3, 3.5, -3.5: each mode by hand.
@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("half_away_from_zero", [3, -3, 3, -3, 4, -4]),
        ("half_up", [3, -2, 3, -3, 4, -3]),
        ("half_to_even", [2, -2, 3, -3, 4, -4]),
        ("down", [2, -3, 3, -3, 3, -4]),
        ("toward_zero", [2, -2, 3, -3, 3, -3]),
    ],
)
def test_rounding_shift_modes(mode, expected):
    values = np.array([5, -5, 6, -6, 7, -7])
    assert rounding_shift(values, 1, mode).tolist() == expected
    assert rounding_shift(values, 0, mode).tolist() == values.tolist()


def test_requantize_per_channel_with_saturation():
    acc = np.array([[100, -100], [300, 5]], dtype=np.int32)
    # Column 0 scales by 0.5, column 1 by 0.75.
    out = requantize(acc, [2**30, 3 * 2**29], [31, 31], axis=1)
    assert out.dtype == np.int8
    assert out.tolist() == [[50, -75], [127, 4]]
    asym = requantize(acc, 2**30, 31, zero_point=128, out_dtype=np.uint8, axis=1)
    assert asym.dtype == np.uint8
    assert asym.tolist() == [[178, 78], [255, 131]]


def test_int8_matmul_is_exact():
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, size=(7, 4096), dtype=np.int8)
    b = rng.integers(-128, 128, size=(4096, 5), dtype=np.int8)
    exact = a.astype(np.int64) @ b.astype(np.int64)  # the slow reference, in the test only
    np.testing.assert_array_equal(int8_matmul(a, b), exact)


def test_quantize_tensor_and_symmetric_scale():
    assert symmetric_scale(2.56) == 0.02
    q = quantize_tensor(np.array([0.26, -0.26, 1.0, 100.0, 0.005, -0.005]), 0.01)
    assert q.tolist() == [26, -26, 100, 127, 1, -1]


def test_factor_past_the_register_saturates_instead_of_growing():
    """A rescale factor >= 2^31 (thresholds 1e38 and 3 in one table) has no right shift: the
    largest int32 multiplier with shift 0, which saturates int8 as the true factor would."""
    assert quantize_multiplier(2.0**40) == (2**31 - 1, 0)
    assert quantize_multiplier(1e38 / 3) == (2**31 - 1, 0)
    multipliers, rshift = quantize_multipliers([1e30, -2.0, 0.5])
    assert rshift == 0 and multipliers == [2**31 - 1, -2, 1]
