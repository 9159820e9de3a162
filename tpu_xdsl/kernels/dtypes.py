"""Element types of the IR as numpy dtypes, and back."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    Signedness,
)
from xdsl.ir import Attribute


def numpy_dtype(element_type: Attribute) -> np.dtype:
    """The numpy dtype that holds values of an IR element type."""
    match element_type:
        case Float32Type():
            return np.dtype(np.float32)
        case Float16Type():
            return np.dtype(np.float16)
        case BFloat16Type():
            return np.dtype(ml_dtypes.bfloat16)
        case Float64Type():
            return np.dtype(np.float64)
        case IndexType():
            return np.dtype(np.int64)
        case IntegerType():
            width = element_type.width.data
            if width == 1:
                return np.dtype(np.bool_)
            unsigned = element_type.signedness.data == Signedness.UNSIGNED
            return np.dtype(f"{'u' if unsigned else ''}int{width}")
        case _:
            raise TypeError(f"no numpy dtype for element type {element_type}")


def element_type(dtype: np.dtype | type) -> Attribute:
    """The IR element type for a numpy dtype (signless integers for signed ints)."""
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return Float32Type()
    if dtype == np.float16:
        return Float16Type()
    if dtype == np.dtype(ml_dtypes.bfloat16):
        return BFloat16Type()
    if dtype == np.float64:
        return Float64Type()
    if dtype == np.bool_:
        return IntegerType(1)
    if dtype.kind == "i":
        return IntegerType(dtype.itemsize * 8)
    if dtype.kind == "u":
        return IntegerType(dtype.itemsize * 8, Signedness.UNSIGNED)
    raise TypeError(f"no IR element type for dtype {dtype}")
