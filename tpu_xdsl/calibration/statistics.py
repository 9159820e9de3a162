"""Streaming per-tensor statistics, collected by listeners on the TOP interpreter.

Two passes over the samples, as TensorRT does: pass 1 keeps each named
tensor's min and max (hence abs-max), and for tensors of rank 2 to 5 the min
and max of every channel along the tensor's channel axis (`ChannelAxes`), for
per-channel activation scales; pass 2 keeps a histogram of |x| over the fixed
range [0, abs-max]. A ranged histogram cannot grow its range without
losing resolution, so fixing the range first keeps the bins exact. Memory
holds one running min/max and one histogram per tensor, whatever the number of
samples; partial statistics (per sample, or per worker) merge by min/max/sum.

The channel axis of a tensor (the rule, in `ChannelAxes.of`): axis 1 for
[N, C, ...] tensors, the last axis for features-last tensors. A tensor is
features-last when a matmul with constant weights (MatMul, Gemm, a
transformer's projections) or a layer norm over the last axis makes it, or when
it follows one through an op that keeps its last axis as it is: an
elementwise op (add, activations, ...) with a features-last operand of the
result's shape, a reshape that keeps the last dimension, a permute that keeps
it last. A permute that moves axis 1 last ([N, C, L] -> [N, L, C]) makes a
features-last tensor too; one that moves the last axis to 1 makes a
[N, C, ...] one. Of rank 2, the two coincide ([N, C]: axis 1 is last).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.interpreter import Interpreter, PythonValues
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.dialects.attr_values import to_py
from tpu_xdsl.dialects.module import tensor_names
from tpu_xdsl.kernels import op_kinds

SKIPPED_OPS = ("top.weight", "top.none")
# Ranks that have a channel axis (per-channel ranges are kept for these).
CHANNEL_RANKS = (2, 3, 4, 5)
# Ops that keep the element order of each row of the last axis when the last dimension stays.
_RESHAPES = frozenset(f"top.{kind}" for kind in op_kinds.RESHAPES)
# Ops whose result mixes the channels of its input: their result's axis comes from the op alone.
_MIXING = ("top.conv", "top.deconv", "top.matmul", "top.layer_norm")


def _shape(value: SSAValue) -> tuple[int, ...] | None:
    t = value.type
    return tuple(t.get_shape()) if isinstance(t, TensorType) else None


def _is_constant(value: SSAValue) -> bool:
    owner = value.owner
    return isinstance(owner, Operation) and owner.name in SKIPPED_OPS


class ChannelAxes:
    """The channel axis of every tensor of a module, decided op by op in program order
    (the rule is in the module docstring): 1, or the last axis of a features-last tensor.

    A decision depends on the module alone, and a TOP module runs every op on every
    sample, so one `ChannelAxes` serves all the samples of a module: each result's axis
    is decided on the first sample and looked up after."""

    def __init__(self) -> None:
        self._axes: dict[SSAValue, int] = {}

    def of(self, op: Operation, index: int) -> int:
        """The channel axis of `op`'s result `index` (remembered for its readers)."""
        result = op.results[index]
        axis = self._axes.get(result)
        if axis is None:
            axis = self._axes[result] = self._decide(op, index)
        return axis

    def _operand_axis(self, value: SSAValue) -> int:
        return self._axes.get(value, 1)  # a function argument, or an op in a region not run

    def _decide(self, op: Operation, index: int) -> int:
        out = _shape(op.results[index])
        if out is None or len(out) <= 2:
            return 1
        last = len(out) - 1
        if op.name == "top.matmul":
            return last if _is_constant(op.operands[1]) else 1
        if op.name == "top.layer_norm":
            axis = op.attributes.get("axis")
            return last if axis is None or int(to_py(axis)) % len(out) == last else 1
        if op.name in _MIXING or not op.operands:
            return 1
        source = op.operands[0]
        shape = _shape(source)
        if shape is None or len(shape) < 2:
            return 1
        axis = self._operand_axis(source)
        if op.name == "top.permute":
            order = [int(a) % len(shape) for a in to_py(op.attributes["order"])]
            moved = order.index(axis) if axis in order else 1
            return moved if moved in (1, last) else 1
        if op.name in _RESHAPES:
            return last if axis == len(shape) - 1 and out[-1] == shape[-1] else 1
        # Elementwise: follow a features-last tensor operand of the result's shape.
        for value in op.operands:
            if not _is_constant(value) and _shape(value) == out and self._operand_axis(value) == last:
                return last
        return 1


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
    `channel_low`/`channel_high` hold per-channel ranges of the finite float
    tensors of rank 2 to 5, along the axis `channel_axis` names (1 when absent).
    """

    low: dict[str, float] = field(default_factory=dict)
    high: dict[str, float] = field(default_factory=dict)
    channel_low: dict[str, np.ndarray] = field(default_factory=dict)
    channel_high: dict[str, np.ndarray] = field(default_factory=dict)
    channel_axis: dict[str, int] = field(default_factory=dict)
    varying: set[str] = field(default_factory=set)  # channel counts differed between samples
    nonfinite: set[str] = field(default_factory=set)
    integral: set[str] = field(default_factory=set)
    samples: int = 0

    def add(self, name: str, value: np.ndarray, axis: int = 1) -> None:
        if value.dtype.kind != "f":
            self.integral.add(name)
            value = as_float(value)
        lo, hi = float(value.min()), float(value.max())
        if not (math.isfinite(lo) and math.isfinite(hi)):
            self.nonfinite.add(name)
            value = _finite(value)
            if not value.size:
                return
            lo, hi = float(value.min()), float(value.max())
        if name in self.low:
            lo, hi = min(lo, self.low[name]), max(hi, self.high[name])
        self.low[name], self.high[name] = lo, hi
        if (value.ndim in CHANNEL_RANKS and name not in self.nonfinite and name not in self.integral
                and name not in self.varying):
            self._add_channels(name, value, axis % value.ndim)

    def _add_channels(self, name: str, value: np.ndarray, axis: int) -> None:
        axes = tuple(a for a in range(value.ndim) if a != axis)
        lo, hi = value.min(axis=axes).astype(np.float64), value.max(axis=axes).astype(np.float64)
        if name in self.channel_low:
            # channels (or their axis) vary: no per-channel ranges
            if self.channel_low[name].shape != lo.shape or self.channel_axis.get(name, 1) != axis:
                del self.channel_low[name], self.channel_high[name]
                self.varying.add(name)
                return
            np.minimum(self.channel_low[name], lo, out=self.channel_low[name])
            np.maximum(self.channel_high[name], hi, out=self.channel_high[name])
        else:
            self.channel_low[name], self.channel_high[name] = lo, hi
            if axis != 1:
                self.channel_axis[name] = axis

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
                if name in other.channel_axis:
                    self.channel_axis[name] = other.channel_axis[name]
            elif self.channel_low[name].shape == lo.shape and name not in self.varying:
                np.minimum(self.channel_low[name], lo, out=self.channel_low[name])
                np.maximum(self.channel_high[name], hi, out=self.channel_high[name])
        for name, lo in list(self.channel_low.items()):
            if name in other.channel_low and (
                other.channel_low[name].shape != lo.shape
                or other.channel_axis.get(name, 1) != self.channel_axis.get(name, 1)
            ):
                self.varying.add(name)
        self.varying |= other.varying
        for name in self.nonfinite | other.nonfinite | self.varying:
            self.channel_low.pop(name, None)
            self.channel_high.pop(name, None)
            self.channel_axis.pop(name, None)
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

    def add(self, name: str, value: np.ndarray, axis: int = 1) -> None:
        top = self.abs_max.get(name)
        if top is None:
            return
        value = as_float(value)
        if name in self.nonfinite:
            value = _finite(value)
        magnitude = np.absolute(value, out=np.empty_like(value))  # an array even of a 0-d value
        zeros = int(np.count_nonzero(magnitude == 0))  # faster than counting the nonzero floats
        if top > 0:
            np.multiply(magnitude, self.bins / top, out=magnitude)  # a new array: scaled in place
            index = magnitude.astype(np.intp)
            np.minimum(index, self.bins - 1, out=index)
            counts = np.bincount(index.ravel(), minlength=self.bins)
            counts[0] -= zeros
        else:
            counts = np.zeros(self.bins, dtype=np.int64)
        if name in self.counts:
            self.counts[name] += counts
            self.zeros[name] += int(zeros)
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


class NamedResults:
    """Per op of a module, its named results as (result index, tensor name, channel axis),
    worked out on the op's first run and looked up on every later sample: names and
    axes depend on the module alone, and a TOP module runs every op on every sample."""

    def __init__(self) -> None:
        self.axes = ChannelAxes()
        self._named: dict[Operation, list[tuple[int, str, int]]] = {}

    def of(self, op: Operation, count: int) -> list[tuple[int, str, int]]:
        """The named ones among the first `count` results of `op` (a weight has none); the
        channel axes of all of them are decided, for their readers."""
        found = self._named.get(op)
        if found is None:
            found = []
            if op.name not in SKIPPED_OPS:
                names = tensor_names(op)
                for index in range(min(count, len(op.results))):
                    axis = self.axes.of(op, index)
                    if index < len(names):
                        found.append((index, names[index], axis))
            self._named[op] = found
        return found


class RangeCollector(Interpreter.Listener):
    """Pass 1: adds every named activation to a `TensorRanges`, per channel along its
    channel axis (`named`: the module's, kept from sample to sample)."""

    def __init__(self, ranges: TensorRanges, named: NamedResults | None = None):
        self.ranges = ranges
        self.named = named if named is not None else NamedResults()

    def did_interpret_op(self, op: Operation, results: PythonValues) -> None:
        for index, name, axis in self.named.of(op, len(results)):
            value = results[index]
            if value is None:
                continue
            value = np.asarray(value)
            if value.size:
                self.ranges.add(name, value, axis)


class HistogramCollector(Interpreter.Listener):
    """Pass 2: adds every named activation to a `TensorHistograms` with fixed ranges."""

    def __init__(self, histograms: TensorHistograms, named: NamedResults | None = None):
        self.histograms = histograms
        self.named = named if named is not None else NamedResults()

    def did_interpret_op(self, op: Operation, results: PythonValues) -> None:
        for index, name, _ in self.named.of(op, len(results)):
            value = results[index]
            if value is None:
                continue
            value = np.asarray(value)
            if value.size:
                self.histograms.add(name, value)
