"""Convolution and pooling kernels: im2col views plus one batched BLAS GEMM."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tpu_xdsl.interp.kernels import ResultSpec, kernel
from tpu_xdsl.interp.kernels.activation import fused_relu


def _spatial_params(attrs: dict[str, Any], spatial: int) -> tuple[list[int], list[int], list[int], list[int]]:
    kernel_shape = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides") or [1] * spatial)
    pads = list(attrs.get("pads") or [0] * (2 * spatial))
    dilations = list(attrs.get("dilations") or [1] * spatial)
    return kernel_shape, strides, pads, dilations


def pad_spatial(x: np.ndarray, pads: Sequence[int], value: float = 0.0) -> np.ndarray:
    spatial = x.ndim - 2
    if not any(pads):
        return x
    widths = [(0, 0), (0, 0)] + [(pads[i], pads[i + spatial]) for i in range(spatial)]
    return np.pad(x, widths, constant_values=value)


def windows(x: np.ndarray, kernel_shape: Sequence[int], strides: Sequence[int], dilations: Sequence[int], out_spatial: Sequence[int]) -> np.ndarray:
    """A view [N, C, *out_spatial, *kernel_shape] of the (padded) input's windows."""
    spatial = len(kernel_shape)
    extents = [(k - 1) * d + 1 for k, d in zip(kernel_shape, dilations)]
    view = sliding_window_view(x, extents, axis=tuple(range(2, 2 + spatial)))
    index = (slice(None), slice(None))
    index += tuple(slice(0, o * s, s) for o, s in zip(out_spatial, strides))
    index += tuple(slice(None, None, d) for d in dilations)
    return view[index]


@kernel("conv")
def conv(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    x, w, b = inputs
    spatial = x.ndim - 2
    kernel_shape, strides, pads, dilations = _spatial_params(attrs, spatial)
    group = int(attrs.get("group", 1))
    out_shape = results[0].shape
    n, c = x.shape[:2]
    oc = w.shape[0]
    cols = windows(pad_spatial(x, pads), kernel_shape, strides, dilations, out_shape[2:])
    # [N, G, Cg, *out, *k] -> [G, N*prod(out), Cg*prod(k)]
    k_size = int(np.prod(kernel_shape))
    out_size = int(np.prod(out_shape[2:]))
    cg = c // group
    cols = cols.reshape(n, group, cg, *out_shape[2:], *kernel_shape)
    spatial_axes = list(range(3, 3 + spatial))
    kernel_axes = list(range(3 + spatial, 3 + 2 * spatial))
    cols = cols.transpose(1, 0, *spatial_axes, 2, *kernel_axes).reshape(group, n * out_size, cg * k_size)
    weights = w.reshape(group, oc // group, cg * k_size).transpose(0, 2, 1)
    y = np.matmul(cols, weights)  # [G, N*out, OCg]
    y = y.reshape(group, n, *out_shape[2:], oc // group)
    # [G, N, *out, OCg] -> [N, G, OCg, *out] -> [N, OC, *out]
    y = y.transpose(1, 0, 2 + spatial, *range(2, 2 + spatial)).reshape(out_shape)
    if b is not None:
        y = y + b.reshape(1, -1, *([1] * spatial))
    return [fused_relu(y.astype(x.dtype, copy=False), attrs)]
