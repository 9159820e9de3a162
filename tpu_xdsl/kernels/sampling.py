"""grid_sample (ONNX GridSample): each output point reads the input at a point of a grid.

The grid holds normalized coordinates in [-1, 1], last axis (x, y, z) = the input's
spatial axes from the last. Per spatial axis a point has taps (1 for nearest, 2 for
linear, 4 for cubic with a = -0.75) and weights; the result sums, over the combinations
of one tap per axis, the weight product times the input gathered at those indices
(one `np.take_along_axis` per combination, over every point and channel at once).
Padding decides what an index outside the input reads: zeros, the border, or the
input reflected at its edges, as ONNX's reference defines them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from tpu_xdsl.kernels import ResultSpec, kernel

CUBIC_A = -0.75


def _reflect(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """x folded into [low, high] by reflection at both ends (ONNX's _gs_reflect)."""
    span = high - low
    if span <= 0:
        return np.full_like(x, low)
    below, above = x < low, x > high
    d = np.where(below, low - x, x - high)
    n = np.floor(d / span)
    r = d - n * span
    even = n % 2 == 0
    folded_below = np.where(even, low + r, high - r)
    folded_above = np.where(even, high - r, low + r)
    return np.where(below, folded_below, np.where(above, folded_above, x))


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    """Weights of taps floor(x) - 1 .. floor(x) + 2 for fraction t (Keys, a = -0.75)."""
    a = CUBIC_A
    return [
        ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
        ((a + 2) * t - (a + 3)) * t * t + 1,
        ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
        ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a,
    ]


def _taps(
    x: np.ndarray, size: int, mode: str, padding: str, align: bool
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """[(index, weight, valid)] of one spatial axis for coordinates x (input pixels)."""
    low, high = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
    if mode == "nearest":
        x = np.rint(x)  # half to even, as PyTorch and ONNX's reference
    # Only points outside [low, high] move (the reference's order: round, then pad).
    # Cubic with border padding clamps only its taps, as PyTorch and onnxruntime do (ONNX's
    # reference also clamps the point, and disagrees with both).
    outside = (x < low) | (x > high)
    if padding == "border" and mode != "cubic":
        x = np.where(outside, np.clip(x, 0, size - 1), x)
    elif padding == "reflection":
        x = np.where(outside, _reflect(x, low, high), x)
    if mode == "nearest":
        starts, weights = x, [np.ones_like(x)]
    elif mode == "linear":
        starts = np.floor(x)
        t = x - starts
        weights = [1 - t, t]
    else:
        starts = np.floor(x)
        weights = _cubic_weights(x - starts)
        starts = starts - 1
    taps = []
    for k, weight in enumerate(weights):
        index = starts + k
        valid = (index >= 0) & (index <= size - 1)
        if padding == "border":
            index = np.clip(index, 0, size - 1)
        elif padding == "reflection":
            index = np.clip(np.trunc(_reflect(index, low, high)), 0, size - 1)
        if padding != "zeros":
            valid = np.ones_like(valid)
        taps.append((np.clip(index, 0, size - 1).astype(np.intp), weight, valid))
    return taps


@kernel("grid_sample")
def grid_sample(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray]:
    x, grid = inputs[0], inputs[1]
    mode = attrs.get("mode", "linear")
    padding = attrs.get("padding_mode", "zeros")
    align = bool(attrs.get("align_corners", 0))
    n, c, *spatial = x.shape
    out_spatial = grid.shape[1:-1]
    points = int(np.prod(out_spatial))
    grid = grid.reshape(n, points, len(spatial)).astype(x.dtype, copy=False)
    per_axis = []
    for axis, size in enumerate(spatial):
        g = grid[..., len(spatial) - 1 - axis]  # the grid's last axis runs x (W), y (H), z
        coord = (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2
        per_axis.append(_taps(coord, size, mode, padding, align))
    flat = x.reshape(n, c, -1)
    strides = [int(np.prod(spatial[a + 1:])) for a in range(len(spatial))]
    out = np.zeros((n, c, points), dtype=x.dtype)
    for combo in itertools.product(*per_axis):
        index = sum((tap[0] * stride for tap, stride in zip(combo, strides)), np.zeros((), np.intp))
        weight = np.prod([tap[1] for tap in combo], axis=0)
        valid = np.logical_and.reduce([tap[2] for tap in combo])
        weight = np.where(valid, weight, 0).astype(x.dtype, copy=False)
        gathered = np.take_along_axis(flat, index[:, None, :], axis=2)
        out += gathered * weight[:, None, :]
    return [out.reshape(n, c, *out_spatial)]
