"""Per-op constant work of kernels (`kernels.memo.ConstantMemo`): found again for the same
attributes and equal constants (the interpreters pass the same arrays on every run, the
device model fresh copies out of local memory), made anew when a constant differs."""

from __future__ import annotations

import numpy as np

from tests.test_int8_kernels_exact import conv_ref, requantize_array_ref
from tpu_xdsl.kernels import ResultSpec
from tpu_xdsl.kernels.int8 import INT8_KERNELS
from tpu_xdsl.kernels.memo import ConstantMemo


def test_equal_copies_find_the_entry_and_other_values_make_a_new_one():
    memo: ConstantMemo[int] = ConstantMemo()
    made = []

    def make(value: int):
        return lambda: made.append(value) or value

    attrs = {"multiplier": [3]}
    bias = np.arange(4, dtype=np.int32)
    assert memo.get(attrs, "k", (bias,), make(1)) == 1
    assert memo.get(attrs, "k", (bias.copy(),), make(2)) == 1  # an equal fresh array
    assert made == [1]
    assert memo.get(attrs, "k", (bias + 1,), make(3)) == 3  # other values
    assert memo.get(attrs, "k", (bias.astype(np.int64),), make(4)) == 4  # same values, other dtype
    assert memo.get(attrs, "k", (None,), make(5)) == 5
    assert memo.get({"multiplier": [3]}, "k", (bias,), make(6)) == 6  # an equal but other dict
    assert memo.get(attrs, "other key", (bias,), make(7)) == 7
    assert made == [1, 3, 4, 5, 6, 7]


def test_an_array_written_after_the_entry_was_made_does_not_find_it():
    memo: ConstantMemo[str] = ConstantMemo()
    attrs: dict = {}
    local = np.zeros(3, np.int32)  # a buffer later overwritten in place, as local memory is
    assert memo.get(attrs, "k", (local,), lambda: "zeros") == "zeros"
    local[:] = 7
    assert memo.get(attrs, "k", (local,), lambda: "sevens") == "sevens"


def test_a_full_memo_forgets_and_still_answers():
    memo: ConstantMemo[int] = ConstantMemo(kept=2)
    attrs: dict = {}
    for i in range(5):
        assert memo.get(attrs, i, (), lambda i=i: i * i) == i * i
    assert memo.get(attrs, 1, (), lambda: -1) == -1  # forgotten, made again


def test_int8_conv_with_the_same_attributes_and_a_new_bias_requantizes_with_it():
    # The device model runs one instruction's attribute dict with operands read afresh; a
    # requantization plan that folded the first bias in must not serve the second.
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, 4, 5, 5)).astype(np.int8)
    w = rng.integers(-127, 128, (6, 4, 3, 3)).astype(np.int8)
    attrs = {
        "kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "group": 1,
        "round_mode": "half_away_from_zero", "do_relu": False, "input_zero_points": [0],
        "output_zero_point": 0, "multiplier": rng.integers(1 << 30, 1 << 31, 6).tolist(), "rshift": [38] * 6,
    }
    result = ResultSpec((1, 6, 5, 5), np.dtype(np.int8))
    for seed in range(3):
        bias = np.random.default_rng(seed + 1).integers(-(1 << 20), 1 << 20, 6).astype(np.int32)
        (got,) = INT8_KERNELS["conv"]([x, w, bias.copy()], attrs, [result])
        acc = conv_ref(x, w, bias, 0, [1, 1], [1, 1, 1, 1], [1, 1], 1)
        expected = requantize_array_ref(acc, attrs["multiplier"], attrs["rshift"], 0, np.int8, attrs["round_mode"])
        np.testing.assert_array_equal(got, expected)


def test_constants_are_compared_bit_for_bit():
    memo: ConstantMemo[str] = ConstantMemo()
    attrs: dict = {}
    assert memo.get(attrs, None, (np.array([0.0]),), lambda: "plus") == "plus"
    assert memo.get(attrs, None, (np.array([-0.0]),), lambda: "minus") == "minus"  # equal, not the same bits
    nan = np.array([np.nan])
    assert memo.get(attrs, None, (nan,), lambda: "nan") == "nan"
    assert memo.get(attrs, None, (nan.copy(),), lambda: "again") == "nan"  # the same bits: found


def test_a_large_constant_changed_in_one_element_makes_a_new_entry():
    memo: ConstantMemo[int] = ConstantMemo()
    attrs: dict = {}
    table = np.arange(1 << 13, dtype=np.int32)  # 32 KiB: above the sizes compared as bytes
    assert memo.get(attrs, "k", (table,), lambda: 1) == 1
    assert memo.get(attrs, "k", (table.copy(),), lambda: 2) == 1
    changed = table.copy()
    changed[-1] = -1
    assert memo.get(attrs, "k", (changed,), lambda: 3) == 3
