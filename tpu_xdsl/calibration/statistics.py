"""Streaming per-tensor statistics, collected by listeners on the TOP interpreter.

Two passes over the samples, as TensorRT does: pass 1 keeps each named
tensor's min and max (hence abs-max), and for tensors of rank 2 and 4 the min
and max of every channel (axis 1), for per-channel activation scales; pass 2
keeps a histogram of |x| over the fixed range [0, abs-max]. A ranged histogram cannot grow its range without
losing resolution, so fixing the range first keeps the bins exact. Memory
holds one running min/max and one histogram per tensor, whatever the number of
samples; partial statistics (per sample, or per worker) merge by min/max/sum.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues
from xdsl.ir import Operation

from tpu_xdsl.interp.runner import tensor_names

SKIPPED_OPS = ("top.weight", "top.none")
# Ranks whose axis 1 is a channel axis (per-channel ranges are kept for these).
CHANNEL_RANKS = (2, 4)


def named_tensors(op: Operation, results: PythonValues) -> Iterator[tuple[str, np.ndarray]]:
    """The activations an op produces, by tensor name (weights and absent results left out)."""
    if op.name in SKIPPED_OPS:
        return
    for name, value in zip(tensor_names(op), results):
        if value is None:
            continue
        value = np.asarray(value)
        if value.size:
            yield name, value


def as_float(value: np.ndarray) -> np.ndarray:
    """Integer and bool tensors get their statistics as floats."""
    return value if value.dtype.kind == "f" else value.astype(np.float64)


def _finite(value: np.ndarray) -> np.ndarray:
    return value[np.isfinite(value)]


@dataclass
class TensorRanges:
    """Running min and max per tensor name, in the order tensors are first produced.

    `nonfinite` names the tensors that held inf or NaN: those values are left
    out of every statistic. `integral` names the integer and bool tensors.
    `channel_low`/`channel_high` hold per-channel ranges (axis 1) of the finite
    float tensors of rank 2 and 4.
    """

    low: dict[str, float] = field(default_factory=dict)
    high: dict[str, float] = field(default_factory=dict)
    channel_low: dict[str, np.ndarray] = field(default_factory=dict)
    channel_high: dict[str, np.ndarray] = field(default_factory=dict)
    varying: set[str] = field(default_factory=set)  # channel counts differed between samples
    nonfinite: set[str] = field(default_factory=set)
    integral: set[str] = field(default_factory=set)
    samples: int = 0

    def add(self, name: str, value: np.ndarray) -> None:
        if value.dtype.kind != "f":
            self.integral.add(name)
            value = as_float(value)
        lo, hi = value.min(), value.max()
        if not (np.isfinite(lo) and np.isfinite(hi)):
            self.nonfinite.add(name)
            value = _finite(value)
            if not value.size:
                return
            lo, hi = value.min(), value.max()
        lo, hi = float(lo), float(hi)
        if name in self.low:
            lo, hi = min(lo, self.low[name]), max(hi, self.high[name])
        self.low[name], self.high[name] = lo, hi
        if value.ndim in CHANNEL_RANKS and not {name} & (self.nonfinite | self.integral | self.varying):
            self._add_channels(name, value)

    def _add_channels(self, name: str, value: np.ndarray) -> None:
        axes = tuple(a for a in range(value.ndim) if a != 1)
        lo, hi = value.min(axis=axes).astype(np.float64), value.max(axis=axes).astype(np.float64)
        if name in self.channel_low:
            if self.channel_low[name].shape != lo.shape:  # channels vary: no per-channel ranges
                del self.channel_low[name], self.channel_high[name]
                self.varying.add(name)
                return
            np.minimum(self.channel_low[name], lo, out=self.channel_low[name])
            np.maximum(self.channel_high[name], hi, out=self.channel_high[name])
        else:
            self.channel_low[name], self.channel_high[name] = lo, hi

    def merge(self, other: TensorRanges) -> None:
        for name in other.low:
            if name in self.low:
                self.low[name] = min(self.low[name], other.low[name])
                self.high[name] = max(self.high[name], other.high[name])
            else:
                self.low[name], self.high[name] = other.low[name], other.high[name]
        for name, lo in other.channel_low.items():
            hi = other.channel_high[name]
            if name not in self.channel_low:
                self.channel_low[name], self.channel_high[name] = lo.copy(), hi.copy()
            elif self.channel_low[name].shape == lo.shape and name not in self.varying:
                np.minimum(self.channel_low[name], lo, out=self.channel_low[name])
                np.maximum(self.channel_high[name], hi, out=self.channel_high[name])
        for name, lo in list(self.channel_low.items()):
            if name in other.channel_low and other.channel_low[name].shape != lo.shape:
                self.varying.add(name)
        self.varying |= other.varying
        for name in self.nonfinite | other.nonfinite | self.varying:
            self.channel_low.pop(name, None)
            self.channel_high.pop(name, None)
        self.nonfinite |= other.nonfinite
        self.integral |= other.integral
        self.samples += other.samples

    def names(self) -> list[str]:
        return list(self.low)

    def abs_max(self, name: str) -> float:
        return max(abs(self.low[name]), abs(self.high[name]))


@dataclass
class TensorHistograms:
    """Per tensor name: counts of the nonzero |x| in `bins` bins over [0, abs-max], and of zeros.

    Bin k holds [k w, (k + 1) w) with w = abs-max / bins; abs-max itself (and
    anything beyond it that float rounding between runs may produce) goes to
    the last bin.
    """

    bins: int
    abs_max: dict[str, float]
    nonfinite: set[str] = field(default_factory=set)
    counts: dict[str, np.ndarray] = field(default_factory=dict)
    zeros: dict[str, int] = field(default_factory=dict)
    samples: int = 0

    @staticmethod
    def for_ranges(ranges: TensorRanges, bins: int) -> TensorHistograms:
        return TensorHistograms(
            bins, {n: ranges.abs_max(n) for n in ranges.names()}, set(ranges.nonfinite)
        )

    def empty_copy(self) -> TensorHistograms:
        """Same ranges, no counts: what a worker fills for one sample."""
        return TensorHistograms(self.bins, self.abs_max, self.nonfinite)

    def add(self, name: str, value: np.ndarray) -> None:
        top = self.abs_max.get(name)
        if top is None:
            return
        value = as_float(value)
        if name in self.nonfinite:
            value = _finite(value)
        magnitude = np.abs(value)
        zeros = magnitude.size - np.count_nonzero(magnitude)
        if top > 0:
            index = (magnitude * (self.bins / top)).astype(np.intp)
            np.minimum(index, self.bins - 1, out=index)
            counts = np.bincount(index.ravel(), minlength=self.bins)
            counts[0] -= zeros
        else:
            counts = np.zeros(self.bins, dtype=np.int64)
        if name in self.counts:
            self.counts[name] += counts
            self.zeros[name] += zeros
        else:
            self.counts[name] = counts.astype(np.int64)
            self.zeros[name] = int(zeros)

    def merge(self, other: TensorHistograms) -> None:
        for name, counts in other.counts.items():
            if name in self.counts:
                self.counts[name] += counts
                self.zeros[name] += other.zeros[name]
            else:
                self.counts[name] = counts.copy()
                self.zeros[name] = other.zeros[name]
        self.samples += other.samples


class RangeCollector(Interpreter.Listener):
    """Pass 1: adds every named activation to a `TensorRanges`."""

    def __init__(self, ranges: TensorRanges):
        self.ranges = ranges

    def did_interpret_op(self, op: Operation, results: PythonValues) -> None:
        for name, value in named_tensors(op, results):
            self.ranges.add(name, value)


class HistogramCollector(Interpreter.Listener):
    """Pass 2: adds every named activation to a `TensorHistograms` with fixed ranges."""

    def __init__(self, histograms: TensorHistograms):
        self.histograms = histograms

    def did_interpret_op(self, op: Operation, results: PythonValues) -> None:
        for name, value in named_tensors(op, results):
            self.histograms.add(name, value)
