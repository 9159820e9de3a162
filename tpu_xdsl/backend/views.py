"""Ops whose results are bytes their input already holds: views, not copies.

DDR holds every tensor row-major and contiguous. A reshape (flatten, squeeze, unsqueeze)
of such a tensor is the same bytes read with another shape; a split or slice whose axes
before the cut all have size 1 (a split along the channels of a batch-1 tensor, a slice
of the outermost axis) is a contiguous run of them. Copying them costs a DMA transfer
each: YOLOv8's C2f blocks split every stage's features in two, and its head reshapes
and splits its outputs, 30k of nudenet's 317k cycles on bm1684x.

TPU-MLIR gives such ops no code (its address assignment places "inplace" ops inside
their input). Here tpu-assign-memory places each view inside the tensor it reads, whose
life then covers the view's (`transforms/tpu_assign_memory.py`), and codegen emits
nothing for an op whose results it finds there (`codegen/driver.py`). Both ask
`result_offsets`, which reads only types and attributes, so a module addressed before
views existed (its results elsewhere) still gets its copies. A concatenation that only
copies along such an axis is the other way round (`operand_offsets`): its inputs are
placed inside its result, and their ops write them there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.backend.op_shapes import kernel_attrs, value_shape
from tpu_xdsl.kernels import ResultSpec, load_all
from tpu_xdsl.kernels.dtypes import numpy_dtype

# The same elements in the same order, whatever the shapes.
_RESHAPES = {"reshape", "flatten", "squeeze", "unsqueeze"}
# Ops that only pick elements: a view when the elements they pick are one contiguous run
# in order (found by running the kernel on an array of element indices).
_PICKS = {"slice", "permute", "expand", "depth2space", "upsample"}


def result_offsets(op: Operation) -> list[int] | None:
    """The byte offset inside its first operand of each result of `op` when each result
    is a contiguous run of the operand's bytes, in order and in the same element type;
    None when one is not (or `op` is not a TPU op)."""
    if not op.name.startswith("tpu.") or not op.operands or not op.results:
        return None
    kind = op.name.removeprefix("tpu.")
    if kind not in _RESHAPES and kind not in _PICKS and kind != "split":
        return None
    source = op.operands[0]
    itemsize = _itemsize([source, *op.results])
    if itemsize is None:
        return None
    if kind == "split":
        return _parts(source, op.results, int(kernel_attrs(op).get("axis", 0)), itemsize)
    if len(op.results) != 1:
        return None
    shape, target = value_shape(source), value_shape(op.results[0])
    if kind in _RESHAPES:
        return [0] if math.prod(target) == math.prod(shape) else None
    start = _contiguous_pick(op, kind, shape, target)
    return None if start is None else [start * itemsize]


def operand_offsets(op: Operation) -> list[int] | None:
    """For a concatenation that only copies (no rescaling) along an axis with only size-1
    axes before it, the byte offset inside its result of each operand, which can then be
    written there in the first place (TPU-MLIR's in-place concat); None otherwise."""
    if op.name != "tpu.concat" or not op.operands or len(op.results) != 1:
        return None
    attrs = kernel_attrs(op)
    itemsize = _itemsize([op.results[0], *op.operands])
    if attrs.get("multiplier") or itemsize is None:
        return None
    return _parts(op.results[0], op.operands, int(attrs.get("axis", 0)), itemsize)


def _itemsize(values: Sequence[SSAValue]) -> int | None:
    """The element size of tensors that all hold one element type, else None."""
    types = [v.type for v in values]
    if not all(isinstance(t, TensorType) for t in types):
        return None
    dtypes = {numpy_dtype(t.element_type) for t in types}  # type: ignore[attr-defined]
    return dtypes.pop().itemsize if len(dtypes) == 1 else None


def _parts(whole: SSAValue, parts: Sequence[SSAValue], axis: int, itemsize: int) -> list[int] | None:
    """Where `parts`, which make up `whole` along `axis` in order, start in its bytes: when
    every axis before `axis` has size 1, each is one contiguous run; else None."""
    shape = value_shape(whole)
    if not shape:
        return None
    axis %= len(shape)
    if math.prod(shape[:axis]) != 1:
        return None
    inner = math.prod(shape[axis + 1 :]) * itemsize
    offsets, start = [], 0
    for part in parts:
        offsets.append(start * inner)
        start += value_shape(part)[axis]
    return offsets if start == shape[axis] else None


def _contiguous_pick(op: Operation, kind: str, shape: tuple[int, ...], target: tuple[int, ...]) -> int | None:
    """The first element index when the kernel picks elements start, start + 1, ... in
    order, else None."""
    size = math.prod(shape)
    index = np.arange(size, dtype=np.int64).reshape(shape)
    (picked,) = load_all()[kind]([index], kernel_attrs(op), [ResultSpec(target, np.dtype(np.int64))])
    flat = np.asarray(picked).reshape(-1)
    if flat.size == 0:
        return None
    start = int(flat[0])
    return start if np.array_equal(flat, np.arange(start, start + flat.size, dtype=np.int64)) else None
