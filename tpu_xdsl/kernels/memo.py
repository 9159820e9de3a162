"""Per-op constant work of a kernel, made once and found again on every later run.

A kernel's constant work (requantization factors, banded tap matrices) depends on the
op's attributes and on small constant operands (a bias, a filter). Every run of an op
passes the same attribute dict (the execution plan's, or the device instruction's), so
an entry is found by that dict's identity; the entry keeps the dict alive, so its id is
not reused. The constant arrays are compared by value: the device model reads them out
of local memory, a fresh array on every run (an equality test on a few kilobytes, far
cheaper than the work it saves). An entry keeps copies of them, so a later write to
local memory cannot make it answer for other constants.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import numpy as np

T = TypeVar("T")


# Constants up to this size are compared byte by byte (bit-identical values, NaN included).
_BYTES_COMPARED = 1 << 14


def _same(kept: np.ndarray | None, given: np.ndarray | None) -> bool:
    if kept is given:
        return True
    if kept is None or given is None:
        return False
    if kept.dtype != given.dtype or kept.shape != given.shape:
        return False
    if kept.nbytes <= _BYTES_COMPARED:  # the bytes themselves: a tenth of np.array_equal's time
        return kept.tobytes() == given.tobytes()
    return bool(np.array_equal(kept, given))


class ConstantMemo(Generic[T]):
    """`make()`'s value for an op's attribute dict (None: the key and the arrays alone tell
    the entry), a key and the constant arrays it was made from, kept for up to `kept`
    entries (all forgotten when full)."""

    def __init__(self, kept: int = 4096):
        self._entries: dict[tuple[int, Hashable], tuple[object, tuple[np.ndarray | None, ...], T]] = {}
        self._kept = kept

    def get(
        self, attrs: object, key: Hashable, arrays: tuple[np.ndarray | None, ...], make: Callable[[], T]
    ) -> T:
        entry = self._entries.get((id(attrs), key))
        if (
            entry is not None and entry[0] is attrs and len(entry[1]) == len(arrays)
            and all(map(_same, entry[1], arrays))
        ):
            return entry[2]
        value = make()
        if len(self._entries) >= self._kept:
            self._entries.clear()
        self._entries[id(attrs), key] = (attrs, tuple(None if a is None else a.copy() for a in arrays), value)
        return value
