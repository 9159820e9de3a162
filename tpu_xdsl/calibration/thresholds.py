"""Quantization thresholds from a histogram of |x|: KL (TensorRT), MSE, max, percentile 99.99.

Every method reads the same statistics of one tensor: `hist`, the counts of
the nonzero |x| in `bins` equal bins over [0, abs_max] (bin k holds
[k * width, (k + 1) * width), abs_max itself goes to the last bin), and
`zeros`, the number of exact zeros. Zeros are kept out of the histogram
because every threshold represents them exactly: they change no error, but in
the histogram they would sit as a spike in bin 0 that KL's expansion step
spreads over the first quantization level (TPU-MLIR's calibrator drops them
too). The percentile counts them back in.

A threshold T means symmetric 8-bit quantization with scale T / 127 and
levels -127..127; thresholds are never below `MIN_THRESHOLD`, so an
all-zero tensor still gets a usable scale.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

KL_LEVELS = 128  # TensorRT: the reference distribution is quantized to 128 levels
INT8_LEVELS = 127  # symmetric int8: -127..127
MIN_THRESHOLD = 1e-5


def bin_width(abs_max: float, bins: int) -> float:
    return abs_max / bins


def kl_divergences(hist: np.ndarray, levels: int = KL_LEVELS) -> np.ndarray:
    """KL(P || Q) for each candidate i = levels .. bins - 1 (index 0 is i = levels).

    TensorRT's entropy calibration: P = hist[:i] with the counts beyond bin
    i - 1 (the outliers) added to bin i - 1; Q = hist[:i] merged into
    `levels` levels (bin k goes to level k * levels // i) and expanded back,
    each level's count spread evenly over its nonzero bins. Both normalized.

    Computed per level, not per bin, from prefix sums: with N = sum(hist),
    o = the outliers, S_j / n_j the count / nonzero bins of level j,
    KL = [sum_k p_k log p_k - sum_j (S_j + o [j last]) log(S_j / n_j)] / N
         - log N + log(N - o).
    P > 0 where Q = 0 only in bin i - 1, when it is empty and o > 0: such
    candidates get an infinite divergence.
    """
    h = np.asarray(hist, dtype=np.float64)
    bins = h.size
    if bins <= levels:
        return np.zeros(0)
    total = h.sum()
    i, edges = _kl_levels(bins, levels)
    prefix = np.concatenate([[0.0], np.cumsum(h)])  # prefix[k] = sum(h[:k])
    nonzero = np.concatenate([[0.0], np.cumsum(h > 0, dtype=np.float64)])  # whole numbers: exact
    hlogh = np.concatenate([[0.0], np.cumsum(np.where(h > 0, h * np.log(np.where(h > 0, h, 1)), 0.0))])
    outliers = total - prefix[i]
    last = h[i - 1]
    folded = last + outliers
    # sum_k p_k log p_k: bins below i - 1 as they are, bin i - 1 with the outliers.
    plogp = hlogh[i - 1] + np.where(folded > 0, folded * np.log(np.where(folded > 0, folded, 1)), 0.0)
    at_edges = prefix[edges]
    sums = at_edges[:, 1:] - at_edges[:, :-1]
    at_edges = nonzero[edges]
    counts = at_edges[:, 1:] - at_edges[:, :-1]
    # log(S_j / n_j) where S_j > 0 (then n_j > 0), log(1) = 0 elsewhere: those levels add 0.
    filled = sums > 0
    log_q = np.zeros_like(sums)
    np.divide(sums, counts, out=log_q, where=filled)
    np.log(log_q, out=log_q, where=filled)
    last_level = (sums[:, -1] + outliers) * log_q[:, -1]  # the P mass level j's bins hold: S_j, plus o in the last
    np.multiply(sums, log_q, out=log_q)
    log_q[:, -1] = last_level
    plogq = log_q.sum(axis=1)
    with np.errstate(divide="ignore"):
        kl = (plogp - plogq) / total - np.log(total) + np.log(total - outliers)
    kl[(last == 0) & (outliers > 0)] = np.inf
    return np.maximum(kl, 0.0)  # rounding can leave -1e-17 for P == Q


@functools.lru_cache(maxsize=8)
def _kl_levels(bins: int, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """The candidates i = levels .. bins - 1 of `kl_divergences` and, per candidate, the
    first bin of each level j = 0 .. levels: ceil(j i / levels) (level j covers bins
    [edge j, edge j + 1)). The same for every tensor of a run: made once."""
    i = np.arange(levels, bins)
    j = np.arange(levels + 1)
    edges = (j[None, :] * i[:, None] + levels - 1) // levels  # (candidates, levels + 1)
    i.flags.writeable = False
    edges.flags.writeable = False
    return i, edges


# KL clips the rare outliers of a smooth distribution: a good threshold saturates a
# fraction of a percent of the values. One that saturates more than this found a
# degenerate minimum instead (see kl_threshold).
KL_MAX_CLIPPED = 0.01


def kl_threshold(hist: np.ndarray, abs_max: float, zeros: int = 0) -> float:
    """(i + 0.5) * width for the candidate i with the smallest divergence; abs_max if
    the histogram has no more bins than levels or no candidate is finite.

    On a tensor of few distinct values (pixels k/16 of scikit-learn's digits, a
    one-hot, a mask) the histogram is a comb: a candidate just past the first
    tooth folds every other tooth into its last bin, P and Q are then the same
    single spike and the divergence is 0, so KL would clip almost everything.
    When the chosen threshold saturates more than KL_MAX_CLIPPED of the nonzero
    values, the MSE threshold (which measures that clipping) is taken instead.
    """
    divergences = kl_divergences(hist)
    if divergences.size == 0 or not np.isfinite(divergences).any():
        return abs_max
    best = int(np.argmin(divergences)) + KL_LEVELS
    h = np.asarray(hist, dtype=np.float64)
    if h[best + 1 :].sum() > KL_MAX_CLIPPED * h.sum():
        return mse_threshold(hist, abs_max, zeros)
    return (best + 0.5) * bin_width(abs_max, len(hist))


def _rounding_integral(x: np.ndarray, step: np.ndarray) -> np.ndarray:
    """F(x) = integral from 0 to x of (t - step * round(t / step))^2 dt, in closed form:
    each whole step contributes step^3 / 12, the partial one u^3 / 3."""
    n = np.round(x / step)
    u = x - n * step
    return n * step**3 / 12 + u**3 / 3


def mse_errors(hist: np.ndarray, abs_max: float, indices: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Squared error summed over the histogram for candidate thresholds
    T = (j + 1) * width (all j = 0 .. bins - 1, or the given `indices`) of int8
    symmetric quantization: step s = T / 127, values up to T rounded to the grid,
    values above clipped to T, the values of a bin spread uniformly over it.
    Per bin [a, b): rounding error (F(b) - F(a)) / width (`_rounding_integral`),
    clipping error (c - T)^2 + width^2 / 12 with c the bin center (from suffix
    sums). Returns (candidates, errors)."""
    h = np.asarray(hist, dtype=np.float64)
    bins = h.size
    width = bin_width(abs_max, bins)
    j_all = np.arange(bins) if indices is None else np.asarray(indices)
    candidates = (j_all + 1) * width
    centers = (np.arange(bins) + 0.5) * width

    def suffix(a: np.ndarray) -> np.ndarray:  # sum of a[j + 1:] for each j
        return np.concatenate([np.cumsum(a[::-1])[::-1][1:], [0.0]])

    s0, s1, s2 = (suffix(a)[j_all] for a in (h, h * centers, h * centers**2))
    clipping = s2 - 2 * candidates * s1 + candidates**2 * s0 + s0 * width**2 / 12
    rounding = np.empty(j_all.size)
    edges = np.arange(bins + 1) * width
    for start in range(0, j_all.size, 64):
        j = j_all[start : start + 64]
        top = int(j.max()) + 1  # bins 0 .. top - 1 can be inside
        step = ((j + 1) * width / INT8_LEVELS)[:, None]
        per_bin = np.diff(_rounding_integral(edges[None, : top + 1], step), axis=1) / width
        per_bin[np.arange(top)[None, :] > j[:, None]] = 0.0
        rounding[start : start + 64] = per_bin @ h[:top]
    return candidates, rounding + clipping


def mse_threshold(hist: np.ndarray, abs_max: float, zeros: int = 0, stride: int = 8) -> float:
    """The candidate with the least `mse_errors`: every `stride`-th bin edge first, then
    every edge within `stride` of the best of those."""
    bins = len(hist)
    coarse = np.unique(np.append(np.arange(stride - 1, bins, stride), bins - 1))
    _, errors = mse_errors(hist, abs_max, coarse)
    best = int(coarse[np.argmin(errors)])
    fine = np.arange(max(0, best - stride), min(bins, best + stride + 1))
    candidates, errors = mse_errors(hist, abs_max, fine)
    return float(candidates[int(np.argmin(errors))])


def max_threshold(hist: np.ndarray, abs_max: float, zeros: int = 0) -> float:
    return float(abs_max)


def percentile_threshold(hist: np.ndarray, abs_max: float, zeros: int = 0, percent: float = 99.99) -> float:
    """The `percent`-th percentile of |x| (zeros included), interpolated linearly within its bin."""
    h = np.asarray(hist, dtype=np.float64)
    total = zeros + h.sum()
    target = total * percent / 100
    if total == 0 or target <= zeros:
        return 0.0
    cumulative = zeros + np.cumsum(h)
    k = int(np.searchsorted(cumulative, target))
    k = min(k, h.size - 1)
    before = cumulative[k - 1] if k > 0 else zeros
    fraction = (target - before) / h[k] if h[k] > 0 else 1.0
    return float((k + min(max(fraction, 0.0), 1.0)) * bin_width(abs_max, h.size))


Method = Callable[[np.ndarray, float, int], float]

METHODS: dict[str, Method] = {
    "kl": kl_threshold,
    "mse": mse_threshold,
    "max": max_threshold,
    "percentile9999": percentile_threshold,
}


def threshold(method: str, hist: np.ndarray, abs_max: float, zeros: int = 0) -> float:
    """The threshold `method` picks for one tensor, at least MIN_THRESHOLD."""
    if abs_max <= 0 or not np.any(hist):
        return MIN_THRESHOLD
    return max(float(METHODS[method](hist, abs_max, zeros)), MIN_THRESHOLD)
