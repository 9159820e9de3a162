"""Shape and data-movement kernels: reshape, cast, permute, concat, split, slice,
squeeze/unsqueeze, flatten, pad, interp (Resize), upsample, gather,
gather_elements, scatter_nd, tile, expand and depth2space.

Kernels never write into their inputs. Ops that only reinterpret the layout
(reshape, squeeze, slice, ...) may return views; ops that move data (permute,
expand, tile, ...) return fresh contiguous arrays, as the chip's ops would.
Interp resizes one axis at a time (the ONNX modes are separable): per axis a
vectorized table of source indices and weights, then one `np.take` per tap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tpu_xdsl.kernels import ResultSpec, kernel
from tpu_xdsl.kernels.activation import fused_relu


@kernel("reshape")
def reshape(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    return [np.reshape(inputs[0], results[0].shape)]


@kernel("flatten")
def flatten(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """2-D: the dims before `axis` and the dims from `axis` on (the result type has both)."""
    return [np.reshape(inputs[0], results[0].shape)]


@kernel("squeeze", "unsqueeze")
def squeeze(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """Removing or inserting size-1 dims is a reshape to the result type."""
    return [np.reshape(inputs[0], results[0].shape)]


@kernel("cast")
def cast(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """Convert to the result's element type: float -> int truncates toward zero,
    nonzero -> true (ONNX leaves NaN and out-of-range values undefined)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return [np.asarray(inputs[0]).astype(results[0].dtype)]


@kernel("permute")
def permute(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    return [np.ascontiguousarray(np.transpose(inputs[0], attrs["order"]))]


@kernel("concat")
def concat(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """Variadic operands arrive flattened: every input is a part."""
    parts = [np.asarray(x) for x in inputs]
    return [fused_relu(np.concatenate(parts, axis=attrs["axis"]), attrs)]


@kernel("split")
def split(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    x = inputs[0]
    axis = attrs["axis"]
    offsets = np.cumsum(attrs["split"])[:-1]
    return list(np.split(x, offsets, axis=axis))


def slice_bounds(dim: int, start: int, end: int, step: int) -> slice:
    """ONNX Slice along one dim as a Python slice: negative start/end count from
    the end, then clamp to [0, dim] (step > 0) or [-1, dim - 1] (step < 0), where
    an end of -1 means "past index 0"."""
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
    start = min(max(start, 0), dim - 1)
    end = min(max(end, -1), dim - 1)
    return slice(start, None if end < 0 else end, step)


@kernel("slice")
def slice_(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    x = inputs[0]
    index = [slice(None)] * x.ndim
    for axis, start, end, step in zip(
        attrs["axes"], attrs["starts"], attrs["ends"], attrs["steps"], strict=True
    ):
        axis = axis + x.ndim if axis < 0 else axis
        index[axis] = slice_bounds(x.shape[axis], start, end, step)
    return [x[tuple(index)]]


@kernel("pad")
def pad(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """np.pad per mode; negative pads crop that side first (as onnxruntime)."""
    x = inputs[0]
    pads = list(attrs["pads"])
    rank = x.ndim
    begins, ends = pads[:rank], pads[rank:]
    if min(pads, default=0) < 0:
        crop = tuple(
            slice(-min(b, 0), x.shape[i] + min(e, 0))
            for i, (b, e) in enumerate(zip(begins, ends))
        )
        x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begins, ends)]
    if not any(b or e for b, e in widths):
        return [x.copy()]
    mode = attrs.get("mode", "constant")
    if mode == "constant":
        return [
            np.pad(x, widths, mode="constant", constant_values=attrs.get("value", 0.0))
        ]
    return [np.pad(x, widths, mode=mode)]


# -- interp ----------------------------------------------------------------------------


def _source_coordinates(mode: str, out: int, size: int, scale: float) -> np.ndarray:
    """Where each output position samples the input axis (ONNX coordinate_transformation_mode).

    As in ONNX's reference (whose values the conformance cases hold), the
    resized length in align_corners and pytorch_half_pixel is `scale * size`,
    fractional when the scale does not divide evenly (onnxruntime uses the
    integer output size there). A pytorch_half_pixel output of length 1 samples
    0, as the ONNX spec and onnxruntime say (the reference uses -0.5; only
    cubic tells them apart).
    """
    y = np.arange(out, dtype=np.float64)
    length = scale * size
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "asymmetric":
        return y / scale
    if mode == "pytorch_half_pixel":
        return (y + 0.5) / scale - 0.5 if length > 1 else np.zeros(out)
    if mode == "align_corners":
        return y * (size - 1) / (length - 1) if length != 1 else np.zeros(out)
    raise ValueError(f"interp: coordinate_mode '{mode}' is not supported")


def _nearest_index(x: np.ndarray, mode: str) -> np.ndarray:
    if mode == "round_prefer_floor":
        return np.ceil(x - 0.5)
    if mode == "round_prefer_ceil":
        return np.floor(x + 0.5)
    if mode == "floor":
        return np.floor(x)
    if mode == "ceil":
        return np.ceil(x)
    raise ValueError(f"interp: nearest_mode '{mode}' is not supported")


def _cubic_weights(t: np.ndarray, a: float = -0.75) -> np.ndarray:
    """Keys' cubic convolution weights of the taps at offsets -1, 0, 1, 2 from floor(x)."""

    def near(d: np.ndarray) -> np.ndarray:  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d: np.ndarray) -> np.ndarray:  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=-1)


def _resize_axis(
    x: np.ndarray, axis: int, out: int, scale: float, attrs: dict[str, Any]
) -> np.ndarray:
    size = x.shape[axis]
    coords = _source_coordinates(attrs["coordinate_mode"], out, size, scale)
    mode = attrs["mode"]
    if mode == "nearest":
        index = _nearest_index(coords, attrs.get("nearest_mode", "round_prefer_floor"))
        return np.take(x, np.clip(index, 0, size - 1).astype(np.intp), axis=axis)
    base = np.floor(coords)
    t = coords - base
    bshape = [1] * x.ndim
    bshape[axis] = out
    if mode == "linear":  # lo + t * (hi - lo), in place
        lo = np.take(x, np.clip(base, 0, size - 1).astype(np.intp), axis=axis)
        hi = np.take(x, np.clip(base + 1, 0, size - 1).astype(np.intp), axis=axis)
        hi -= lo
        hi *= t.astype(x.dtype).reshape(bshape)
        hi += lo
        return hi
    if mode != "cubic":
        raise ValueError(f"interp: mode '{mode}' is not supported")
    offsets, weights = (-1, 0, 1, 2), _cubic_weights(t).astype(x.dtype)
    acc = None
    for k, offset in enumerate(offsets):
        index = np.clip(base + offset, 0, size - 1).astype(np.intp)
        term = np.take(x, index, axis=axis)
        term *= weights[:, k].reshape(bshape)
        acc = term if acc is None else np.add(acc, term, out=acc)
    assert acc is not None, "cubic has four taps"
    return acc


@kernel("interp")
def interp(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """ONNX Resize (nearest, linear, cubic with a = -0.75) to the result type's size.

    `scales` (when given) drive the coordinate mapping as in ONNX, where
    floor(size * scale) may differ from the exact ratio of the sizes. `source_rows`
    (a nearest resize's rows of a slice, `backend.slicing`) gives the input row of each
    output row instead.
    """
    x = inputs[0]
    out_shape = results[0].shape
    scales = attrs.get("scales")
    rows = attrs.get("source_rows")
    if rows is not None:
        x = np.take(x, np.asarray(rows, dtype=np.intp), axis=2)
    axes = [
        a
        for a, (size, out) in enumerate(zip(x.shape, out_shape, strict=True))
        if (out != size or (scales and not math.isclose(scales[a], 1.0))) and not (rows is not None and a == 2)
    ]
    # Shrinking axes first (less data after), then the last axis (its gathers
    # are strided, the costly kind) while the data is still small.
    axes.sort(key=lambda a: (out_shape[a] >= x.shape[a], a != x.ndim - 1, a))
    y = x
    for axis in axes:
        scale = float(scales[axis]) if scales else out_shape[axis] / x.shape[axis]
        y = _resize_axis(y, axis, out_shape[axis], scale, attrs)
    return [y if y is not x else x.copy()]


@kernel("upsample")
def upsample(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """Nearest upsampling of NCHW by integer factors: each pixel repeated (the rows, or
    the input rows `source_rows` names, for a slice)."""
    rows = attrs.get("source_rows")
    if rows is not None:
        y = np.take(inputs[0], np.asarray(rows, dtype=np.intp), axis=2)
    else:
        y = np.repeat(inputs[0], attrs["scale_h"], axis=2)
    return [np.repeat(y, attrs["scale_w"], axis=3)]


# -- indexing ----------------------------------------------------------------------------


def _checked_indices(indices: np.ndarray, size: int, what: str) -> np.ndarray:
    """Indices in [-size, size) made non-negative; out-of-range ones are an error, as in onnxruntime."""
    indices = np.asarray(indices).astype(np.intp, copy=False)
    if indices.size and (indices.min() < -size or indices.max() >= size):
        raise IndexError(f"{what}: an index is outside [-{size}, {size - 1}]")
    return np.where(indices < 0, indices + size, indices)


@kernel("gather")
def gather(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """out = take(input, indices, axis); negative indices count from the end."""
    x, indices = inputs
    axis = attrs.get("axis", 0)
    indices = _checked_indices(indices, x.shape[axis], "gather")
    return [np.take(x, indices, axis=axis)]


@kernel("gather_elements")
def gather_elements(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    x, indices = inputs
    axis = attrs.get("axis", 0)
    indices = _checked_indices(indices, x.shape[axis], "gather_elements")
    if indices.shape != x.shape:
        # take_along_axis broadcasts; ONNX lets indices be smaller than the input off the axis.
        x = x[
            tuple(
                slice(0, d) if i != axis % x.ndim else slice(None)
                for i, d in enumerate(indices.shape)
            )
        ]
    return [np.take_along_axis(x, indices, axis=axis)]


_SCATTER_REDUCE = {
    "add": np.add,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
}


@kernel("scatter_nd")
def scatter_nd(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """A copy of the input with slices at `indices` (last dim: k leading coordinates)
    replaced by, or reduced with, `updates`."""
    x, indices, updates = inputs
    out = np.array(x, copy=True)
    k = indices.shape[-1]
    if k == 0:
        raise ValueError("scatter_nd: indices with an empty last dim are not supported")
    index = np.asarray(indices).reshape(-1, k)
    index = np.stack(
        [_checked_indices(index[:, i], x.shape[i], "scatter_nd") for i in range(k)]
    )
    values = np.asarray(updates).reshape(index.shape[1], *x.shape[k:])
    reduction = attrs.get("reduction", "none")
    if reduction == "none":
        out[tuple(index)] = values
    else:
        _SCATTER_REDUCE[reduction].at(out, tuple(index), values)
    return [out]


@kernel("tile")
def tile(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    return [np.tile(inputs[0], attrs["repeats"])]


@kernel("expand")
def expand(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """Broadcast to the result type's shape (a fresh array, not a broadcast view)."""
    return [np.array(np.broadcast_to(inputs[0], results[0].shape))]


@kernel("fold_taps")
def fold_taps(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """The windows of a kernel's taps as channels: output channel (i * kw + j) * C + c at
    (r, q) is input channel c at (i + r * sh, j + q * sw) of the zero-padded input."""
    from tpu_xdsl.kernels.conv_pool import pad_spatial, taps

    x = pad_spatial(inputs[0], attrs.get("pads") or [0, 0, 0, 0])
    windows = taps(attrs["kernel_shape"], attrs["strides"], [1, 1], results[0].shape[2:])
    return [np.concatenate([x[(slice(None), slice(None), *window)] for window in windows], axis=1)]


@kernel("depth2space")
def depth2space(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """DepthToSpace (DCR: depth-column-row, CRD: column-row-depth), or its inverse SpaceToDepth."""
    x = inputs[0]
    b = attrs["block_size"]
    crd = attrs.get("mode", "DCR") == "CRD"
    n, c, h, w = x.shape
    if attrs.get("inverse", False):
        t = x.reshape(n, c, h // b, b, w // b, b)
        t = t.transpose(0, 1, 3, 5, 2, 4) if crd else t.transpose(0, 3, 5, 1, 2, 4)
        return [t.reshape(n, c * b * b, h // b, w // b)]
    if crd:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return [t.reshape(n, c // (b * b), h * b, w * b)]
