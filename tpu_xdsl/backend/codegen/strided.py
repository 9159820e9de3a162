"""Strided views: the one DDR view that reads an array of element indices in order.

Data movement that only reorders elements becomes DMA copies through strided views:
the view of a kernel is found by running it on an array of element indices and
reading off the strides (numpy only).
"""

from __future__ import annotations

import numpy as np


def strided_view(index: np.ndarray) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
    """(offset, shape, strides) of one strided view that reads `index` (an array of element
    indices) in row-major order, or None. The shape refines index.shape: an axis that is not
    one stride (depth2space's rows and block offsets, a row repeated by nearest upsampling)
    is split into factors that each are."""
    found = _affine_strides(index)
    if found is not None:
        return found[0], tuple(index.shape), found[1]
    shape: list[int] = []
    for axis, size in enumerate(index.shape):
        line = index[tuple(slice(None) if a == axis else 0 for a in range(index.ndim))]
        factors = _axis_factors(line - line[0])
        if factors is None:
            return None
        shape += factors
    refined = index.reshape(shape)
    found = _affine_strides(refined)
    return None if found is None else (found[0], tuple(shape), found[1])


def _axis_factors(line: np.ndarray) -> list[int] | None:
    """Sizes (outer to inner, product len(line)) that split `line` (starting at 0) into
    axes along each of which it steps evenly, or None."""
    size = len(line)
    if size <= 1 or np.array_equal(line, np.arange(size) * line[1]):
        return [size]
    for inner in range(2, size):
        if size % inner:
            continue
        grid = line.reshape(size // inner, inner)
        if np.array_equal(grid, grid[:, :1] + grid[:1, :]):
            outer, rest = _axis_factors(grid[:, 0]), _axis_factors(grid[0, :])
            if outer is not None and rest is not None:
                return outer + rest
    return None


def _affine_strides(index: np.ndarray) -> tuple[int, tuple[int, ...]] | None:
    """(offset, strides) with index[o] = offset + sum(o_k * strides_k) for every o, or None."""
    if index.size == 0:
        return 0, tuple(0 for _ in index.shape)
    offset = int(index.reshape(-1)[0])
    strides = []
    expected = np.full(index.shape, offset, dtype=np.int64)
    for axis, size in enumerate(index.shape):
        if size == 1:
            strides.append(0)
            continue
        at = [0] * index.ndim
        at[axis] = 1
        step = int(index[tuple(at)]) - offset
        strides.append(step)
        shape = [1] * index.ndim
        shape[axis] = size
        expected = expected + (np.arange(size, dtype=np.int64) * step).reshape(shape)
    return (offset, tuple(strides)) if np.array_equal(expected, index) else None
