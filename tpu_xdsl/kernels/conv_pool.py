"""Convolution and pooling kernels.

Loops run over kernel positions ("taps") only: each tap is one strided view of
the padded input holding that tap's input pixel for every output pixel.

- conv: im2col (one strided copy per tap) and one GEMM per image and group
  in a batched matmul; 1x1 stride-1 convs are a GEMM on the input itself;
  2-d stride-1 convs with more output pixels than output channels one GEMM
  per tap on shifted slices of the flattened input (`_shifted_gemm`); a 2-d
  depthwise conv is a batched GEMM per channel with its taps in a banded
  matrix (per kernel column or over rows, `_depthwise_2d`), else (other ranks, or
  sums capped below the taps) it multiplies and adds one view per tap.
  `conv_sum` can cap how many products one float sum takes (exact INT8 sums
  in float32, see kernels.int8).
- deconv: one GEMM per group to [OCg*K, N*in], then col2im: each tap's
  slab is added into the output at a strided view.
- max_pool / avg_pool: elementwise max / sum over the taps of one spatial dim
  at a time (the window is separable; a reduction of a window view for long
  kernels, a plain reduction for global pooling); avg_pool divides by the tap
  counts of `tap_counts`.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tpu_xdsl.kernels import ResultSpec, kernel
from tpu_xdsl.kernels.activation import fused_relu
from tpu_xdsl.kernels.memo import ConstantMemo

# The largest im2col buffer (bytes); bigger convs run in blocks of output rows.
_COLS_LIMIT = 64 << 20
# Stride-1 2-d convs whose im2col columns would take more bytes run as shifted GEMMs.
SHIFTED_GEMM_ABOVE = 8 << 20
# Elements per vector row of a depthwise conv's taps (`_depthwise_2d`).
_DEPTHWISE_BLOCK = 2048
# Elements of a depthwise conv's output computed tap by tap before the next ones.
_DEPTHWISE_CHUNK = 32768
# Depthwise convs whose channels hold at least this many output pixels (of the padded
# row width) run per channel: their rows are long enough, and channels-last copies cost.
_PLANAR_DEPTHWISE_PIXELS = 2048
# Depthwise convs run per kernel column on the input as it is (`_depthwise_2d_column_sums`),
# in blocks of _ROW_BANDED_BLOCK output rows (all rows up to twice as many), except those
# with more rows whose padded rows are longer than this many kernel widths and hold at
# least this many output columns, or whose kernel rows are dilated: those run as row-banded
# GEMMs on copies of the input (`_depthwise_2d_row_banded`, copies of this many bytes).
_BANDED_DEPTHWISE_WIDTH = 10
_ROW_BANDED_DEPTHWISE_WIDTH = 32
_ROW_BANDED_BLOCK = 4
_ROW_BANDED_BYTES = 4 << 20
# Above this many taps along a dim, pooling reduces a window view instead of looping.
_MAX_TAP_LOOP = 16


def spatial_params(
    attrs: dict[str, Any], spatial: int
) -> tuple[list[int], list[int], list[int], list[int]]:
    """A window op's kernel_shape, strides, pads and dilations, with ONNX's defaults
    (stride and dilation 1, no padding) for `spatial` dimensions."""
    kernel_shape = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides") or [1] * spatial)
    pads = list(attrs.get("pads") or [0] * (2 * spatial))
    dilations = list(attrs.get("dilations") or [1] * spatial)
    return kernel_shape, strides, pads, dilations


def pad_spatial(x: np.ndarray, pads: Sequence[int], value: float = 0.0) -> np.ndarray:
    """x padded with `value` on its spatial dims (pads: begins then ends); x itself when no pads."""
    spatial = x.ndim - 2
    if not any(pads):
        return x
    sizes = [d + pads[i] + pads[i + spatial] for i, d in enumerate(x.shape[2:])]
    padded = np.full((*x.shape[:2], *sizes), value, dtype=x.dtype)
    padded[
        (
            slice(None),
            slice(None),
            *(slice(pads[i], pads[i] + d) for i, d in enumerate(x.shape[2:])),
        )
    ] = x
    return padded


def _pool_pads(
    x: np.ndarray,
    pads: Sequence[int],
    out: Sequence[int],
    kernel_shape: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> list[int]:
    """pads with the ends grown so the last window fits (ceil_mode)."""
    spatial = len(kernel_shape)
    pads = list(pads)
    for i, (size, o, k, s, d) in enumerate(
        zip(x.shape[2:], out, kernel_shape, strides, dilations)
    ):
        needed = (o - 1) * s + (k - 1) * d + 1 - (size + pads[i] + pads[i + spatial])
        pads[i + spatial] += max(0, needed)
    return pads


def windows(
    x: np.ndarray,
    kernel_shape: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_spatial: Sequence[int],
) -> np.ndarray:
    """A view [N, C, *out_spatial, *kernel_shape] of the (padded) input's windows."""
    spatial = len(kernel_shape)
    extents = [(k - 1) * d + 1 for k, d in zip(kernel_shape, dilations)]
    view = sliding_window_view(x, extents, axis=tuple(range(2, 2 + spatial)))
    index = (slice(None), slice(None))
    index += tuple(slice(0, o * s, s) for o, s in zip(out_spatial, strides))
    index += tuple(slice(None, None, d) for d in dilations)
    return view[index]


def taps(
    kernel_shape: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_spatial: Sequence[int],
) -> Iterator[tuple[slice, ...]]:
    """Per kernel position (row-major), the spatial slices of the padded input that
    hold that tap's input for every output pixel."""
    for offsets in itertools.product(*(range(k) for k in kernel_shape)):
        yield tuple(
            slice(i * d, i * d + (o - 1) * s + 1, s)
            for i, d, o, s in zip(offsets, dilations, out_spatial, strides)
        )


def tap_counts(
    sizes: Sequence[int],
    out_spatial: Sequence[int],
    kernel_shape: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    include_pad: bool,
) -> np.ndarray:
    """The divisor of average pooling per output pixel: the window's taps inside the
    input, or inside input + explicit pads with `include_pad` (never the ceil_mode
    overhang), as ONNX's reference and onnxruntime count."""
    spatial = len(kernel_shape)
    counts = np.ones(tuple(out_spatial), dtype=np.float32)
    for i, (size, o, k, s, d) in enumerate(
        zip(sizes, out_spatial, kernel_shape, strides, dilations)
    ):
        position = np.arange(o)[:, None] * s - pads[i] + np.arange(k)[None, :] * d
        low, high = (-pads[i], size + pads[i + spatial]) if include_pad else (0, size)
        count = ((position >= low) & (position < high)).sum(axis=1)
        counts *= count.reshape([o if j == i else 1 for j in range(spatial)])
    return counts


# -- convolution ------------------------------------------------------------------------


@kernel("conv")
def conv(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    x, w, b = inputs
    spatial = x.ndim - 2
    kernel_shape, strides, pads, dilations = spatial_params(attrs, spatial)
    group = int(attrs.get("group", 1))
    y = np.ascontiguousarray(
        conv_sum(x, w, group, kernel_shape, strides, pads, dilations, results[0].shape)
    )
    if b is not None:
        y += b.reshape(1, -1, *([1] * spatial)).astype(y.dtype, copy=False)
    return [fused_relu(y.astype(x.dtype, copy=False), attrs)]


def conv_sum(
    x: np.ndarray,
    w: np.ndarray,
    group: int,
    kernel_shape: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    out_shape: Sequence[int],
    max_terms: int | None = None,
) -> np.ndarray:
    """The convolution of x with w (no bias), [N, OC, *out]; may be a strided view.

    Computed in x.dtype. With `max_terms`, no sum of more products than that is
    taken in x.dtype: longer sums add partial sums of at most `max_terms`
    products each in float64 (the INT8 kernels sum exact integers this way,
    float32 GEMMs below 2^24 and float64 above)."""
    n, c = x.shape[:2]
    oc = w.shape[0]
    if (
        group == 1
        and all(k == 1 for k in kernel_shape)
        and all(s == 1 for s in strides)
        and not any(pads)
    ):
        x3, w2 = x.reshape(n, c, -1), w.reshape(oc, c).astype(x.dtype, copy=False)
        y = None
        for k in term_chunks(c, max_terms):
            y = add_partial(y, np.matmul(w2[:, k], x3[:, k]))
        assert y is not None
        return y.reshape(out_shape)
    return _im2col(
        pad_spatial(x, pads), w, group, kernel_shape, strides, dilations, out_shape, max_terms
    )


def term_chunks(length: int, max_terms: int | None) -> list[slice]:
    """[0, length) in equal slices of at most max_terms (one slice without a limit)."""
    if max_terms is None or length <= max_terms:
        return [slice(0, length)]
    count = -(-length // max_terms)
    step = -(-length // count)
    return [slice(i, min(length, i + step)) for i in range(0, length, step)]


def add_partial(total: np.ndarray | None, part: np.ndarray) -> np.ndarray:
    """total + part, where a second partial sum makes the total float64."""
    if total is None:
        return part
    if total.dtype != np.float64:
        total = total.astype(np.float64)
    total += part
    return total


def _im2col(
    xp: np.ndarray,
    w: np.ndarray,
    group: int,
    kernel_shape: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_shape: Sequence[int],
    max_terms: int | None = None,
) -> np.ndarray:
    """cols [N, G, Cg*K, out] from one copy per tap, then W [G, OCg, Cg*K] @ cols
    (N*G GEMMs in one batched matmul) gives [N, G, OCg, out] = [N, OC, *out].

    cols holds K copies of the input: above _COLS_LIMIT bytes, output rows
    (the first spatial dim) are computed in blocks that keep it under the limit."""
    n, c = xp.shape[:2]
    oc = w.shape[0]
    out = tuple(out_shape[2:])
    k_size = int(math.prod(kernel_shape))
    cg, ocg = c // group, oc // group
    if cg == 1 and ocg == 1 and len(kernel_shape) == 2:
        return _depthwise_2d(xp, w, kernel_shape, strides, dilations, out_shape, max_terms)
    if cg == 1 and ocg == 1:
        return _depthwise(xp, w, kernel_shape, strides, dilations, out_shape, max_terms)
    # im2col copies the input once per tap but then runs one long GEMM: it wins
    # while its columns stay in cache; shifted GEMMs need no copy.
    shifted = group == 1 and len(kernel_shape) == 2 and all(s == 1 for s in strides)
    cols_bytes = n * c * k_size * int(math.prod(out)) * xp.itemsize
    if shifted and cols_bytes > SHIFTED_GEMM_ABOVE:
        return _shifted_gemm(xp, w, dilations, out_shape, max_terms)
    row_bytes = n * c * k_size * int(math.prod(out[1:])) * xp.itemsize
    block = max(1, _COLS_LIMIT // row_bytes)
    if block < out[0]:
        y = None
        s, extent = strides[0], (kernel_shape[0] - 1) * dilations[0] + 1
        for r0 in range(0, out[0], block):
            r1 = min(out[0], r0 + block)
            rows = xp[:, :, r0 * s : (r1 - 1) * s + extent]
            shape = (*out_shape[:2], r1 - r0, *out[1:])
            part = _im2col(rows, w, group, kernel_shape, strides, dilations, shape, max_terms)
            if y is None:
                y = np.empty(out_shape, dtype=part.dtype)
            y[:, :, r0:r1] = part
        assert y is not None
        return y
    xg = xp.reshape(n, group, cg, *xp.shape[2:])
    cols = np.empty((n, group, cg, k_size, *out), dtype=xp.dtype)
    for t, window in enumerate(taps(kernel_shape, strides, dilations, out)):
        cols[:, :, :, t] = xg[(slice(None),) * 3 + window]
    wg = w.reshape(group, ocg, cg * k_size).astype(xp.dtype, copy=False)
    cols = cols.reshape(n, group, cg * k_size, -1)
    y = None
    for k in term_chunks(cg * k_size, max_terms):
        y = add_partial(y, np.matmul(wg[:, :, k], cols[:, :, k]))
    assert y is not None
    return y.reshape(out_shape)


def _shifted_gemm(
    xp: np.ndarray,
    w: np.ndarray,
    dilations: Sequence[int],
    out_shape: Sequence[int],
    max_terms: int | None = None,
) -> np.ndarray:
    """A stride-1 2-d conv as one GEMM per tap on shifted slices of the flattened
    padded input, with no im2col copy.

    With the padded rows laid end to end, the input of tap (i, j) for output
    pixel (r, c) sits at r*Wp + c + (i*dh*Wp + j*dw): one contiguous slice per
    tap. Outputs are computed on rows of the padded width Wp; the result is the
    view that crops the extra columns. With `max_terms`, the tap GEMMs (split
    by input channels when one tap has more terms) are summed in x.dtype in
    groups of at most that many products, and the groups in float64.
    """
    n, c, hp, wp = xp.shape
    oc, _, kh, kw = w.shape
    oh, ow = out_shape[2:]
    flat = xp.reshape(n, c, hp * wp)
    length = (oh - 1) * wp + ow
    tap_weights = np.empty((kh, kw, oc, c), dtype=xp.dtype)
    tap_weights[...] = w.transpose(2, 3, 0, 1)
    channel_chunks = term_chunks(c, max_terms)
    units = [(i, j, k) for k in channel_chunks for i in range(kh) for j in range(kw)]
    per_sum = len(units)
    if max_terms is not None:
        per_sum = max(1, max_terms // c) if len(channel_chunks) == 1 else 1
    part = np.empty((n, oc, oh * wp), dtype=xp.dtype)
    term = np.empty((n, oc, length), dtype=xp.dtype)
    total = None if per_sum >= len(units) else np.empty((n, oc, oh * wp))
    for g in range(0, len(units), per_sum):
        for u, (i, j, k) in enumerate(units[g : g + per_sum]):
            offset = i * dilations[0] * wp + j * dilations[1]
            rhs = flat[:, k, offset : offset + length]
            if u == 0:  # the first GEMM of a group writes its sum
                np.matmul(tap_weights[i, j, :, k], rhs, out=part[:, :, :length])
            else:
                np.matmul(tap_weights[i, j, :, k], rhs, out=term)
                part[:, :, :length] += term
        if total is not None and g == 0:
            total[:, :, :length] = part[:, :, :length]
        elif total is not None:
            total[:, :, :length] += part[:, :, :length]
    y = part if total is None else total
    return y.reshape(n, oc, oh, wp)[:, :, :, :ow]


def _depthwise(
    xp: np.ndarray,
    w: np.ndarray,
    kernel_shape: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_shape: Sequence[int],
    max_terms: int | None = None,
) -> np.ndarray:
    """One filter per channel: sum over taps of the tap's input view times that
    tap's per-channel weight. Two passes over the output per tap, no copies of
    the input (im2col with one input channel per GEMM wastes most of the time).
    With `max_terms`, taps are summed in x.dtype in groups of at most that many
    and the groups in float64."""
    c = xp.shape[1]
    spatial = len(kernel_shape)
    weights = w.reshape(c, -1).astype(xp.dtype, copy=False)
    windows_ = list(taps(kernel_shape, strides, dilations, out_shape[2:]))
    y = None
    term = np.empty(out_shape, dtype=xp.dtype)
    for group in term_chunks(len(windows_), max_terms):
        part = np.zeros(out_shape, dtype=xp.dtype)
        for t in range(group.start, group.stop):
            tap_weight = weights[:, t].reshape(1, c, *([1] * spatial))
            np.multiply(xp[(slice(None), slice(None), *windows_[t])], tap_weight, out=term)
            part += term
        y = add_partial(y, part)
    assert y is not None
    return y


def _depthwise_2d(
    xp: np.ndarray,
    w: np.ndarray,
    kernel_shape: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_shape: Sequence[int],
    max_terms: int | None = None,
) -> np.ndarray:
    """A 2-d depthwise conv as batched GEMMs with banded tap matrices: per kernel column
    on the input as it is (`_depthwise_2d_column_sums`), or, for many rows of wide (or
    row-dilated) outputs, on copies of the input at each kernel column's offset
    (`_depthwise_2d_row_banded`). Where the INT8 kernels cap a float32 sum below the
    kh * kw products of an output (`max_terms`), tap by tap, on each channel's flattened
    rows where a channel has many output pixels, on channels-last rows where it has few
    (the same sums either way)."""
    oh, ow = out_shape[2:]
    (kh, kw), wp = kernel_shape, xp.shape[3]
    if max_terms is None or max_terms >= kh * kw:
        narrow = wp <= _BANDED_DEPTHWISE_WIDTH * kw
        few_rows = oh <= 2 * _ROW_BANDED_BLOCK
        if few_rows or (dilations[0] == 1 and (narrow or ow < _ROW_BANDED_DEPTHWISE_WIDTH)):
            return _depthwise_2d_column_sums(xp, w, kernel_shape, strides, dilations, out_shape)
        return _depthwise_2d_row_banded(xp, w, kernel_shape, strides, dilations, out_shape)
    pixels = oh * -(-wp // strides[1])
    run = _depthwise_2d_planar if pixels >= _PLANAR_DEPTHWISE_PIXELS else _depthwise_2d_channels_last
    return run(xp, w, kernel_shape, strides, dilations, out_shape, max_terms)


# Banded tap matrices of the depthwise convs, by the filter's shape and bytes (the
# interpreters pass the same filter on every run, the device model an equal copy).
_BANDS: ConstantMemo[np.ndarray] = ConstantMemo(kept=1024)


def _depthwise_2d_row_banded(
    xp: np.ndarray,
    w: np.ndarray,
    kernel_shape: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_shape: Sequence[int],
) -> np.ndarray:
    """A 2-d depthwise conv on wide rows as batched GEMMs over channels and blocks of R
    output rows: the block's output [R, OW] is a banded [R, Hb * kw] matrix of the
    channel's taps (`_row_banded_taps`) times the Hb input rows the block reads, each
    taken at the kw column offsets of the taps, [Hb * kw, OW] (one strided copy of the
    input per kernel column). The band costs Hb / kh times the MACs (Hb = (R - 1) * sh
    + (kh - 1) * dh + 1), where `_depthwise_2d_planar` pays 2 * kh * kw numpy passes over
    the output. Channels go in chunks whose copies stay near `_ROW_BANDED_BYTES`. Sums of
    integers stay exact (at most kh * kw nonzero products per output, the bound
    `max_terms` was checked against)."""
    n, c = xp.shape[:2]
    (kh, kw), (sh, sw), (dh, dw) = kernel_shape, strides, dilations
    oh, ow = out_shape[2:]
    x, rows, blocks, height = _row_blocks(xp, oh, kh, sh, dh)
    item, width = x.itemsize, x.shape[3]
    view = np.lib.stride_tricks.as_strided(
        x, (n, c, blocks, height, kw, ow),
        (x.strides[0], x.strides[1], rows * sh * width * item, width * item, dw * item, sw * item),
        writeable=False,
    )
    band = _row_banded_taps(w, kh, kw, sh, dh, rows, x.dtype)
    y = np.empty((n, c, blocks, rows, ow), dtype=x.dtype)
    per_channel = n * blocks * height * kw * ow * item
    step = max(1, _ROW_BANDED_BYTES // per_channel)
    for c0 in range(0, c, step):
        c1 = min(c, c0 + step)
        stacked = np.ascontiguousarray(view[:, c0:c1]).reshape(n, c1 - c0, blocks, height * kw, ow)
        np.matmul(band[c0:c1], stacked, out=y[:, c0:c1])
    return y.reshape(n, c, blocks * rows, ow)[:, :, :oh]


def _depthwise_2d_column_sums(
    xp: np.ndarray,
    w: np.ndarray,
    kernel_shape: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_shape: Sequence[int],
) -> np.ndarray:
    """A 2-d depthwise conv as one batched GEMM over channels and blocks of R output rows
    on the input as it is, then kw - 1 adds: for each kernel column j, Z_j = a banded
    [R, Hb] matrix of the channel's column-j taps (`_column_banded_taps`) times the Hb
    padded input rows the block reads, at every column of the padded width; output column
    o is the sum over j of Z_j's column o * sw + j * dw. Unlike `_depthwise_2d_row_banded`
    it copies nothing of the input and its band stays small ([C, kw * R, Hb]); the price is
    kw partial outputs of the padded width. Sums of integers stay exact (at most kh
    nonzero products per GEMM sum, kh * kw per output, the bound `max_terms` was checked
    against)."""
    n, c, _, wp = xp.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel_shape, strides, dilations
    oh, ow = out_shape[2:]
    x, rows, blocks, height = _row_blocks(xp, oh, kh, sh, dh)
    item = x.itemsize
    view = np.lib.stride_tricks.as_strided(
        x, (n, c, blocks, height, wp), (x.strides[0], x.strides[1], rows * sh * wp * item, wp * item, item),
        writeable=False,
    )
    band = _column_banded_taps(w, kh, kw, sh, dh, rows, x.dtype)
    z = np.matmul(band, view).reshape(n, c, blocks, kw, rows, wp)
    span = (ow - 1) * sw + 1
    y = z[:, :, :, 0, :, :span:sw].copy()
    for j in range(1, kw):
        y += z[:, :, :, j, :, j * dw : j * dw + span : sw]
    return y.reshape(n, c, blocks * rows, ow)[:, :, :oh]


def _row_blocks(xp: np.ndarray, oh: int, kh: int, sh: int, dh: int) -> tuple[np.ndarray, int, int, int]:
    """The blocks of R output rows the banded depthwise convs compute (all rows up to twice
    `_ROW_BANDED_BLOCK`): (the padded input, contiguous and with the rows the last block
    reads past its end, R, the number of blocks, the Hb input rows a block reads)."""
    hp = xp.shape[2]
    rows = oh if oh <= 2 * _ROW_BANDED_BLOCK else _ROW_BANDED_BLOCK
    blocks = -(-oh // rows)
    height = (rows - 1) * sh + (kh - 1) * dh + 1
    needed = (blocks - 1) * rows * sh + height
    x = np.ascontiguousarray(xp) if needed <= hp else pad_spatial(xp, [0, 0, needed - hp, 0])
    return x, rows, blocks, height


def _tap_band(w: np.ndarray, kh: int, kw: int, sh: int, dh: int, rows: int, dtype: np.dtype) -> np.ndarray:
    """[C, R, Hb, kw]: entry (r, r * sh + i * dh, j) of channel c is w[c, 0, i, j], the taps
    output row r of a block reads from the block's Hb input rows."""
    c = w.shape[0]
    height = (rows - 1) * sh + (kh - 1) * dh + 1
    band = np.zeros((c, rows, height, kw), dtype=dtype)
    r = np.arange(rows)
    taps_ = w.reshape(c, kh, kw).astype(dtype)
    for i in range(kh):
        band[:, r, r * sh + i * dh, :] = taps_[:, i, None, :]
    return band


def _column_banded_taps(w: np.ndarray, kh: int, kw: int, sh: int, dh: int, rows: int, dtype: np.dtype) -> np.ndarray:
    """[C, 1, kw * R, Hb]: `_tap_band` with kernel columns first (entry (j * R + r, r * sh +
    i * dh) of channel c is w[c, 0, i, j])."""

    def make() -> np.ndarray:
        band = _tap_band(w, kh, kw, sh, dh, rows, dtype)
        c, _, height, _ = band.shape
        return np.ascontiguousarray(band.transpose(0, 3, 1, 2)).reshape(c, 1, kw * rows, height)

    return _memo_band(w, dtype, ("column sums", kh, kw, sh, dh, rows), make)


def _row_banded_taps(w: np.ndarray, kh: int, kw: int, sh: int, dh: int, rows: int, dtype: np.dtype) -> np.ndarray:
    """[C, 1, R, Hb * kw]: `_tap_band` with each row's taps side by side (entry (r, (r * sh +
    i * dh) * kw + j) of channel c is w[c, 0, i, j])."""

    def make() -> np.ndarray:
        band = _tap_band(w, kh, kw, sh, dh, rows, dtype)
        c, _, height, _ = band.shape
        return band.reshape(c, 1, rows, height * kw)

    return _memo_band(w, dtype, ("rows", kh, kw, sh, dh, rows), make)


def _memo_band(w: np.ndarray, dtype: np.dtype, layout: tuple[Any, ...], make: Callable[[], np.ndarray]) -> np.ndarray:
    """`make()`'s band matrix of filter `w`, made once per filter (shape and bytes), layout
    and dtype."""
    key = (layout, w.shape, w.dtype.str, hash(w.tobytes()), np.dtype(dtype).str)
    return _BANDS.get(None, key, (w,), make)


def _depthwise_2d_planar(
    xp: np.ndarray,
    w: np.ndarray,
    kernel_shape: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_shape: Sequence[int],
    max_terms: int | None = None,
) -> np.ndarray:
    """`_depthwise` for 2-d convs on flattened rows of each channel, as `_shifted_gemm` does: the
    padded input is split into its stride phases (phase (a, b) holds rows a, a + sh,
    ... and columns b, b + sw, ...; one copy, none for stride 1), and each tap reads
    one contiguous slice per channel of its phase: long vector loops instead of
    short strided rows. Outputs have the phases' row width; the result is the view
    that crops the extra columns."""
    n, c, hp, wp = xp.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel_shape, strides, dilations
    oh, ow = out_shape[2:]
    hq, wq = -(-hp // sh), -(-wp // sw)
    phases = {}
    for a, b in itertools.product(range(sh), range(sw)):
        if sh == sw == 1:
            phase = xp
        else:
            phase = np.zeros((n, c, hq, wq), dtype=xp.dtype)
            view = xp[:, :, a::sh, b::sw]
            phase[:, :, : view.shape[2], : view.shape[3]] = view
        phases[a, b] = phase.reshape(n, c, hq * wq)
    weights = w.reshape(c, kh * kw).astype(xp.dtype, copy=False)
    length = (oh - 1) * wq + ow
    part = np.empty((n, c, oh * wq), dtype=xp.dtype)
    term = np.empty((n, c, length), dtype=xp.dtype)
    groups = term_chunks(kh * kw, max_terms)
    total = None if len(groups) == 1 else np.empty((n, c, oh * wq))
    for group in groups:
        for t in range(group.start, group.stop):
            i, j = divmod(t, kw)
            offset = (i * dh // sh) * wq + j * dw // sw
            rows = phases[i * dh % sh, j * dw % sw][:, :, offset : offset + length]
            tap_weight = weights[:, t].reshape(1, c, 1)
            if t == group.start:
                np.multiply(rows, tap_weight, out=part[:, :, :length])
            else:
                np.multiply(rows, tap_weight, out=term)
                part[:, :, :length] += term
        if total is not None and group.start == 0:
            total[:, :, :length] = part[:, :, :length]
        elif total is not None:
            total[:, :, :length] += part[:, :, :length]
    y = part if total is None else total
    return y.reshape(n, c, oh, wq)[:, :, :, :ow]


def _depthwise_2d_channels_last(
    xp: np.ndarray,
    w: np.ndarray,
    kernel_shape: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_shape: Sequence[int],
    max_terms: int | None = None,
) -> np.ndarray:
    """`_depthwise` for 2-d convs on flattened channels-last rows, as `_shifted_gemm`
    does: the padded input is split into its stride phases (phase (a, b) holds rows
    a, a + sh, ... and columns b, b + sw, ...), each stored [N, pixels, C], so that a
    tap reads one contiguous slice of its phase for every output pixel and channel.
    The tap's products are one multiply of that slice by the tap's weights tiled over
    `_DEPTHWISE_BLOCK` elements: long vector loops even where a channel holds only a
    few pixels (numpy pays ~0.1 us per short row). Each output is the same float sum,
    product by product in tap order, as per channel. Outputs have the phases' row
    width; the result is the view that crops the extra columns."""
    n, c, hp, wp = xp.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel_shape, strides, dilations
    oh, ow = out_shape[2:]
    hq, wq = -(-hp // sh), -(-wp // sw)
    length = oh * wq
    # Pixels per vector row: whole rows of C channels, about _DEPTHWISE_BLOCK elements.
    block = min(length, max(1, _DEPTHWISE_BLOCK // c))
    rows = -(-length // block)
    padded_length = rows * block
    last_offset = ((kh - 1) * dh // sh) * wq + (kw - 1) * dw // sw
    pixels = max(hq * wq, last_offset + padded_length)
    phases = {}
    for a, b in itertools.product(range(sh), range(sw)):
        phase = np.zeros((n, pixels, c), dtype=xp.dtype)
        view = xp[:, :, a::sh, b::sw]
        grid = phase[:, : hq * wq].reshape(n, hq, wq, c)
        grid[:, : view.shape[2], : view.shape[3]] = view.transpose(0, 2, 3, 1)
        phases[a, b] = phase.reshape(n, pixels * c)
    width = block * c
    tap_weights = w.reshape(c, kh * kw).astype(xp.dtype, copy=False).T
    weights = np.empty((kh * kw, block, c), dtype=xp.dtype)
    weights[...] = tap_weights[:, None, :]
    weights = weights.reshape(kh * kw, width)
    part = np.empty((n, rows, width), dtype=xp.dtype)
    groups = term_chunks(kh * kw, max_terms)
    total = None if len(groups) == 1 else np.empty((n, rows, width))
    # Rows in chunks of about _DEPTHWISE_CHUNK elements: a chunk's partial sums stay in
    # cache while every tap adds to them.
    chunk = max(1, _DEPTHWISE_CHUNK // width)
    term = np.empty((n, min(chunk, rows), width), dtype=xp.dtype)
    for r0 in range(0, rows, chunk):
        r1 = min(rows, r0 + chunk)
        out, products = part[:, r0:r1], term[:, : r1 - r0]
        for group in groups:
            for t in range(group.start, group.stop):
                i, j = divmod(t, kw)
                offset = ((i * dh // sh) * wq + j * dw // sw + r0 * block) * c
                tap = phases[i * dh % sh, j * dw % sw][:, offset : offset + (r1 - r0) * width]
                tap = tap.reshape(n, r1 - r0, width)
                if t == group.start:
                    np.multiply(tap, weights[t], out=out)
                else:
                    np.multiply(tap, weights[t], out=products)
                    out += products
            if total is not None and group.start == 0:
                total[:, r0:r1] = out
            elif total is not None:
                total[:, r0:r1] += out
    y = part if total is None else total
    y = y.reshape(n, padded_length, c)[:, :length]
    return y.reshape(n, oh, wq, c)[:, :, :ow].transpose(0, 3, 1, 2)


@kernel("deconv")
def deconv(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """Transposed convolution: cols = W^T @ x per group, col2im over the taps, crop the pads."""
    x, w, b = inputs
    spatial = x.ndim - 2
    kernel_shape, strides, pads, dilations = spatial_params(attrs, spatial)
    out_pad = list(attrs.get("output_padding") or [0] * spatial)
    group = int(attrs.get("group", 1))
    out_shape = results[0].shape
    n, c = x.shape[:2]
    sizes = x.shape[2:]
    cg, ocg = c // group, w.shape[1]
    k_size = int(math.prod(kernel_shape))
    xg = x.reshape(n, group, cg, -1)
    xg = (
        xg[0] if n == 1 else xg.transpose(1, 2, 0, 3).reshape(group, cg, -1)
    )  # [G, Cg, N*in]
    wg = w.reshape(group, cg, ocg * k_size).transpose(0, 2, 1)  # [G, OCg*K, Cg]
    cols = np.matmul(wg, xg).reshape(group, ocg, k_size, n, *sizes)
    full = [
        (i - 1) * s + (k - 1) * d + 1 + p
        for i, s, k, d, p in zip(sizes, strides, kernel_shape, dilations, out_pad)
    ]
    y = np.zeros((group, ocg, n, *full), dtype=x.dtype)
    for t, window in enumerate(taps(kernel_shape, strides, dilations, sizes)):
        y[(slice(None),) * 3 + window] += cols[:, :, t]
    crop = tuple(slice(p, p + o) for p, o in zip(pads[:spatial], out_shape[2:]))
    y = (
        y[(slice(None),) * 3 + crop]
        .reshape(group * ocg, n, *out_shape[2:])
        .swapaxes(0, 1)
    )
    y = np.ascontiguousarray(y)
    if b is not None:
        y += b.reshape(1, -1, *([1] * spatial)).astype(y.dtype, copy=False)
    return [fused_relu(y, attrs)]


# -- pooling ----------------------------------------------------------------------------


def _is_global(
    x: np.ndarray, kernel_shape: Sequence[int], pads: Sequence[int], out: Sequence[int]
) -> bool:
    return (
        list(kernel_shape) == list(x.shape[2:])
        and not any(pads)
        and all(o == 1 for o in out)
    )


def _pool_reduce(
    x: np.ndarray,
    attrs: dict[str, Any],
    results: Sequence[ResultSpec],
    pad_value: float,
    combine: np.ufunc,
) -> tuple[np.ndarray, list[int], list[int], list[int], list[int]]:
    """The max or sum of every window (`combine` = np.maximum or np.add), and the
    window attributes (pads without the ceil_mode growth).

    A box window is separable: reduce along one spatial dim at a time, over that
    dim's taps (3 + 3 passes for a 3x3 window instead of 9)."""
    spatial = x.ndim - 2
    kernel_shape, strides, pads, dilations = spatial_params(attrs, spatial)
    out = results[0].shape[2:]
    if _is_global(x, kernel_shape, pads, out):
        return (
            combine.reduce(x, axis=tuple(range(2, 2 + spatial)), keepdims=True),
            kernel_shape,
            strides,
            pads,
            dilations,
        )
    y = pad_spatial(
        x, _pool_pads(x, pads, out, kernel_shape, strides, dilations), pad_value
    )
    for i, (k, s, d, o) in enumerate(zip(kernel_shape, strides, dilations, out)):
        axis = 2 + i
        if k > _MAX_TAP_LOOP:
            view = sliding_window_view(y, (k - 1) * d + 1, axis=axis)
            view = view[(slice(None),) * axis + (slice(0, o * s, s),)][..., ::d]
            y = combine.reduce(view, axis=-1)
            continue
        before = (slice(None),) * axis
        reduced = None
        for j in range(k):
            tap = y[before + (slice(j * d, j * d + (o - 1) * s + 1, s),)]
            if reduced is None:
                reduced = tap.copy()
            else:
                combine(reduced, tap, out=reduced)
        assert reduced is not None, "a pooling window has at least one tap"
        y = reduced
    return y, kernel_shape, strides, pads, dilations


@kernel("max_pool")
def max_pool(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """Max over each window; padding is -inf so it never wins."""
    x = inputs[0]
    y, *_ = _pool_reduce(x, attrs, results, -np.inf, np.maximum)
    return [fused_relu(y, attrs)]


@functools.lru_cache(maxsize=1024)
def _divisors(*args: Any) -> np.ndarray:
    """`tap_counts`, worked out once per pooling geometry (read-only)."""
    counts = tap_counts(*args)
    counts.flags.writeable = False
    return counts


@kernel("avg_pool")
def avg_pool(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    """Window sum over the tap count (see `tap_counts`: count_include_pad counts the
    explicit pads, never the ceil_mode overhang)."""
    x = inputs[0]
    total, kernel_shape, strides, pads, dilations = _pool_reduce(
        x, attrs, results, 0.0, np.add
    )
    out = results[0].shape[2:]
    include_pad = bool(attrs.get("count_include_pad", False))
    counts = _divisors(
        tuple(x.shape[2:]), tuple(out), tuple(kernel_shape), tuple(strides), tuple(pads), tuple(dilations),
        include_pad,
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(total, counts.astype(total.dtype, copy=False), out=total)
    return [fused_relu(total, attrs)]
