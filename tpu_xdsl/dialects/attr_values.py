"""Plain Python values of op attributes (ints, floats, bools, strings, lists)."""

from __future__ import annotations

import functools
from typing import Any, cast

from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, Operation


def to_py(attr: Attribute) -> Any:
    """The Python value of a builtin attribute; other attributes are returned as they are."""
    match attr:
        case IntegerAttr():
            value = attr.value.data
            if isinstance(attr.type, IntegerType) and attr.type.width.data == 1:
                return bool(value)
            return value
        case FloatAttr():
            return attr.value.data
        case StringAttr():
            return attr.data
        case ArrayAttr():
            return [to_py(a) for a in attr.data]
        case DenseArrayBase():
            return _dense_values(attr)
        case DictionaryAttr():
            return {k: to_py(v) for k, v in attr.data.items()}
        case UnitAttr():
            return True
        case _:
            return attr


def _dense_values(attr: DenseArrayBase) -> list[int] | list[float]:
    """The values of a dense array, ints or floats by its element type. The casts name
    the element type the check found: xDSL's `get_values` overloads take one element
    type, not the union a bare `DenseArrayBase` carries."""
    if isinstance(attr.elt_type, IntegerType):
        return list(cast(DenseArrayBase[IntegerType], attr).get_values())
    return list(cast(DenseArrayBase[AnyFloat], attr).get_values())


def op_attrs(op: Operation) -> dict[str, Any]:
    """All attributes and properties of `op` as Python values."""
    values = {name: to_py(a) for name, a in op.attributes.items()}
    values.update({name: to_py(a) for name, a in op.properties.items()})
    return values


@functools.lru_cache(maxsize=1 << 16)
def _i64(value: int) -> IntegerAttr:
    """An i64 attribute, built once per value: attributes are immutable, and building and
    verifying one costs ~0.1 ms, which INT8 lowering paid for every per-channel multiplier
    and shift (ppocr_det: 21,000 of them, 5 of its 6.6 s)."""
    return IntegerAttr(value, 64)


def from_py(value: Any) -> Attribute:
    """The builtin attribute for a Python value (bool -> i1, int -> i64, float -> f64)."""
    match value:
        case bool():
            return BoolAttr.from_bool(value)
        case int():
            return _i64(value)
        case float():
            return FloatAttr(value, 64)
        case str():
            return StringAttr(value)
        case list() | tuple():
            return ArrayAttr([from_py(v) for v in value])
        case dict():
            return DictionaryAttr({k: from_py(v) for k, v in value.items()})
        case Attribute():
            return value
        case _:
            import numpy as np

            if isinstance(value, np.integer):
                return _i64(int(value))
            if isinstance(value, np.floating):
                return FloatAttr(float(value), 64)
            raise TypeError(f"no attribute for {value!r}")
