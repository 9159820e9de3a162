"""Building a TOSA function: ops appended to one block, constants from numpy arrays, and
values that know their layout.

A `Val` is a tensor of the source model in one of two layouts: logical (the source's own
axis order, NCHW for images) or channels-last (`NHWC`, the physical order TOSA's
convolutions and pools want, for rank-4 values). Converters ask for the layout they need;
`Builder.logical` and `Builder.channels_last` insert a transpose only when the value is in
the other one, and remember what they made, so a value transposed back to the layout it came
from is the value it came from: the export of a conv chain holds no transpose pairs.
Constants stay numpy arrays until an op uses them, so their transposes, reshapes and
broadcasts cost nothing in the output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    Signedness,
    TensorType,
    f32,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, SSAValue

from tpu_xdsl.dialects.tosa import op_class
from tpu_xdsl.dialects.tosa_attrs import ShapeType

NHWC = (0, 2, 3, 1)  # channels-last = logical.transpose(NHWC) for a rank-4 NCHW value
NCHW = (0, 3, 1, 2)  # its inverse

_ELEMENTS: dict[str, tuple[Any, Any]] = {
    "float32": (Float32Type, np.float32),
    "float16": (Float16Type, np.float16),
    "bfloat16": (BFloat16Type, ml_dtypes.bfloat16),
    "int8": (lambda: IntegerType(8), np.int8),
    "uint8": (lambda: IntegerType(8, Signedness.UNSIGNED), np.uint8),  # TPU weights (lookup tables)
    "int16": (lambda: IntegerType(16), np.int16),
    "int32": (lambda: IntegerType(32), np.int32),
    "int64": (lambda: IntegerType(64), np.int64),
    "bool": (lambda: IntegerType(1), np.bool_),
}


def element_type(dtype: np.dtype | type) -> Attribute:
    """The MLIR element type of a numpy dtype."""
    name = np.dtype(dtype).name
    if name not in _ELEMENTS:
        raise ValueError(f"no TOSA element type for numpy {name}")
    return _ELEMENTS[name][0]()


def numpy_dtype(element: Attribute) -> np.dtype:
    for make, dtype in _ELEMENTS.values():
        if make() == element:
            return np.dtype(dtype)
    raise ValueError(f"no numpy dtype for {element}")


def tensor_type(shape: Sequence[int], element: Attribute) -> TensorType:
    return TensorType(element, list(shape))


def dense(array: np.ndarray) -> DenseIntOrFPElementsAttr:
    """The exact bytes of `array` as a dense attribute (printed in hex when large)."""
    array = np.ascontiguousarray(array)
    kind = tensor_type(array.shape, element_type(array.dtype))
    if array.dtype == np.bool_:  # i1 elements are stored one per byte
        array = array.astype(np.uint8)
    return DenseIntOrFPElementsAttr(kind, BytesAttr(array.tobytes()))  # pyright: ignore[reportCallIssue, reportArgumentType]


@dataclass(frozen=True)
class Val:
    """A source tensor as TOSA sees it: an SSA value (or a constant not yet materialized) in
    logical or channels-last layout. `shape` is always the logical shape."""

    shape: tuple[int, ...]
    element: Attribute
    value: SSAValue | None = None
    channels_last: bool = False
    const: np.ndarray | None = None  # the logical array of a constant

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def physical_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[p] for p in NHWC) if self.channels_last else self.shape


class Builder:
    """Appends TOSA ops to `block`."""

    def __init__(self, block: Block):
        self.block = block
        self._transposed: dict[tuple[SSAValue, tuple[int, ...]], SSAValue] = {}
        self._source_of: dict[SSAValue, tuple[SSAValue, tuple[int, ...]]] = {}
        self._consts: dict[tuple[bytes, str, tuple[int, ...]], SSAValue] = {}

    # -- ops ----------------------------------------------------------------------------

    def op(self, name: str, operands: Sequence[SSAValue], result: Attribute, **properties: Attribute) -> SSAValue:
        cls = op_class(name)
        created = cls.create(operands=list(operands), result_types=[result], properties=dict(properties))
        self.block.add_op(created)
        return created.results[0]

    def const(self, array: np.ndarray) -> SSAValue:
        """A `tosa.const` of `array`; equal constants are made once."""
        array = np.ascontiguousarray(array)
        key = (array.tobytes(), array.dtype.str, array.shape)
        if key not in self._consts:
            attr = dense(array)
            self._consts[key] = self.op("const", [], attr.type, values=attr)
        return self._consts[key]

    def zero_point(self, element: Attribute) -> SSAValue:
        return self.const(np.zeros(1, numpy_dtype(element)))

    def shape(self, values: Sequence[int]) -> SSAValue:
        attr = DenseIntOrFPElementsAttr(
            tensor_type([len(values)], IndexType()),  # pyright: ignore[reportArgumentType]
            BytesAttr(np.asarray(values, np.int64).tobytes()),  # pyright: ignore[reportCallIssue]
        )
        return self.op("const_shape", [], ShapeType(len(values)), values=attr)

    def transpose(self, value: SSAValue, perm: Sequence[int]) -> SSAValue:
        """`value` transposed by `perm`; the transpose of a transpose by its inverse is the
        original value, and each (value, perm) is made once."""
        perm = tuple(perm)
        if perm == tuple(range(len(perm))):
            return value
        source = self._source_of.get(value)
        if source is not None and tuple(source[1][p] for p in perm) == tuple(range(len(perm))):
            return source[0]
        key = (value, perm)
        if key not in self._transposed:
            kind = value.type
            assert isinstance(kind, TensorType)
            shape = [kind.get_shape()[p] for p in perm]
            out = self.op("transpose", [value], tensor_type(shape, kind.element_type), perms=array_i32(perm))
            self._transposed[key] = out
            self._source_of[out] = (value, perm)
        return self._transposed[key]

    def reshape(self, value: SSAValue, shape: Sequence[int]) -> SSAValue:
        kind = value.type
        assert isinstance(kind, TensorType)
        if tuple(kind.get_shape()) == tuple(shape):
            return value
        return self.op("reshape", [value, self.shape(shape)], tensor_type(shape, kind.element_type))

    # -- layouts --------------------------------------------------------------------------

    def materialize(self, val: Val, channels_last: bool = False) -> SSAValue:
        """`val` as an SSA value in the asked layout (channels-last only for rank 4)."""
        channels_last = channels_last and val.rank == 4
        if val.const is not None:
            array = val.const.transpose(NHWC) if channels_last else val.const
            return self.const(array.astype(numpy_dtype(val.element), copy=False))
        assert val.value is not None
        if val.channels_last == channels_last:
            return val.value
        return self.transpose(val.value, NHWC if channels_last else NCHW)

    def logical(self, val: Val) -> SSAValue:
        return self.materialize(val, channels_last=False)

    def channels_last(self, val: Val) -> SSAValue:
        return self.materialize(val, channels_last=True)


def array_i64(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def array_i32(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i32, [int(v) for v in values])


def int32(value: int) -> IntegerAttr:
    return IntegerAttr(int(value), i32)


def boolean(value: bool) -> IntegerAttr:
    return IntegerAttr(int(value), IntegerType(1))


def float32(value: float) -> Attribute:
    from xdsl.dialects.builtin import FloatAttr

    return FloatAttr(float(value), f32)
