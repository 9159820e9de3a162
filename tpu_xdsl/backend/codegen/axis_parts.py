"""A float softmax (or log-softmax) cut along its own axis, for one whose rows are longer
than a lane holds (PP-OCRv5's recognizer: 18,385 classes, 36.8 KB of bf16 a row, on
cv183x's 32 KiB lanes).

Slices of the other axes hold one row per lane or more; each row is then read in parts of
its axis, three times: the largest element of each part (`reduce` max), combined with
`max`; the sum of exp(x - max) of each part, combined with `add`; and per part
exp(x - max) / sum (a log-softmax: x - max - log(sum)), stored in the result type.
Every step is a kernel the device already has, in float32 (the storage type's values
widened exactly, as the whole softmax computes them). Only the sum is formed in another
order (part by part), so a few outputs may round their last bit differently from the
interpreter's whole-row softmax, within the device check's float tolerance, as
`channel_parts` does for a float conv cut along its input channels.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from tpu_xdsl.backend import slicing
from tpu_xdsl.backend.codegen.channel_parts import FLOATS, PARTIAL, _Chain
from tpu_xdsl.backend.codegen.state import CodegenState, starts_sizes
from tpu_xdsl.backend.lanes import lane_bytes, local_tensor
from tpu_xdsl.backend.slicing import Box, OpShape, SlicePlan
from tpu_xdsl.device.isa import Compute, DmaLoad, DmaStore, LocalTensor


def applies(shape: OpShape, dtypes: list[str | None]) -> bool:
    """A float softmax or log-softmax with an axis longer than one element."""
    x = shape.operands[0]
    return (
        shape.kind in ("softmax", "log_softmax")
        and x is not None
        and x[_axis(shape)] > 1
        and all(d is None or d in FLOATS for d in dtypes)
    )


def _axis(shape: OpShape) -> int:
    return int(shape.attrs.get("axis", -1)) % len(shape.results[0])


def _with(box: Box, axis: int, span: tuple[int, int]) -> Box:
    cut = list(box)
    cut[axis] = span
    return tuple(cut)


def _sizes(chip, shape: OpShape, box: Box, part: tuple[int, int], dtype: str, result_dtype: str) -> list[int]:
    """Bytes per lane (`lane_bytes`: execution-unit aligned) of the buffers of one slice: the
    input part, two float32 parts, the result part, then four float32 statistics of a row."""

    def size(kind: str, b: Box) -> int:
        return lane_bytes(kind, b, False, chip.npu_num, chip.eu_bytes)

    axis = _axis(shape)
    piece, stat = _with(box, axis, part), _with(box, axis, (0, 1))
    return [size(dtype, piece), size(PARTIAL, piece), size(PARTIAL, piece), size(result_dtype, piece)] + [
        size(PARTIAL, stat)
    ] * 4


def choose(chip, shape: OpShape, dtype: str, result_dtype: str) -> tuple[list[SlicePlan], int] | None:
    """Slices of the other axes and a number of parts (at least 2) of the axis whose
    buffers fit a lane, or None: the parts double until they fit, the slices halve
    along the other axes while that makes them smaller."""
    out = shape.results[0]
    axis = _axis(shape)
    axes = [a for a in slicing.splittable_axes(shape) if a != axis]

    def plans_of(counts: list[int]) -> list[SlicePlan]:
        pieces = [slicing.split_axis(d, n) for d, n in zip(out, counts)]
        return [slicing.plan(shape, tuple(box)) for box in itertools.product(*pieces)]

    def need(plans: list[SlicePlan], parts: int) -> int:
        first = slicing.split_axis(out[axis], parts)[0]
        return max(sum(_sizes(chip, shape, p.outputs[0], first, dtype, result_dtype)) for p in plans)

    counts = [1] * len(out)
    plans = plans_of(counts)
    for axis_cut in axes:  # fewest rows a slice: a lane holds one of them at most
        while counts[axis_cut] < out[axis_cut]:
            trial = list(counts)
            trial[axis_cut] = min(out[axis_cut], counts[axis_cut] * 2)
            trial_plans = plans_of(trial)
            if need(trial_plans, 2) >= need(plans, 2) or len(trial_plans) > 1 << 12:
                break
            counts, plans = trial, trial_plans
    parts = 2
    while parts <= out[axis]:
        if need(plans, parts) <= chip.lmem_bytes:
            return plans, parts
        parts *= 2
    return None


def emit(state: CodegenState, op, shape: OpShape, operands, dtypes, result_dtype: str, layer: str) -> bool:
    """Emit the softmax cut along its axis into `state`'s program; False when no cut fits."""
    dtype = dtypes[0]
    assert dtype is not None
    chosen = choose(state.chip, shape, dtype, result_dtype)
    if chosen is None:
        return False
    plans, parts = chosen
    chain = _Chain(state, layer)
    source, target = state.places[operands[0]], state.places[op.results[0]]
    for plan in plans:
        _Rows(state, chain, shape, plan.outputs[0], parts, dtype, result_dtype, source, target).run()
    assert chain.last is not None, "every slice stores its parts"
    state.written_by[op.results[0]] = chain.last
    return True


class _Rows:
    """One slice of rows, its axis read in parts three times (max, sum, quotient)."""

    def __init__(self, state: CodegenState, chain: _Chain, shape: OpShape, box: Box, parts: int, dtype: str,
                 result_dtype: str, source, target):
        self.chain, self.box, self.dtype, self.result_dtype = chain, box, dtype, result_dtype
        self.source, self.target = source, target
        self.axis = _axis(shape)
        self.parts = slicing.split_axis(shape.results[0][self.axis], parts)
        sizes = _sizes(state.chip, shape, box, self.parts[0], dtype, result_dtype)
        self.bases = [sum(sizes[:i]) for i in range(len(sizes))]
        stat = _with(box, self.axis, (0, 1))
        # Two buffers each for the running max and sum (a combine writes the other one),
        # as statistics 4-7.
        self.stats = [local_tensor(self.bases[4 + i], PARTIAL, stat) for i in range(4)]
        self.reduce = {"axes": [self.axis], "keepdims": True}
        self.log = shape.kind == "log_softmax"

    def _local(self, index: int, dtype: str, part: tuple[int, int]) -> LocalTensor:
        return local_tensor(self.bases[index], dtype, _with(self.box, self.axis, part))

    def _load(self, part: tuple[int, int]) -> LocalTensor:
        box = _with(self.box, self.axis, part)
        x = self._local(0, self.dtype, part)
        self.chain(DmaLoad, self.source.view().box(*starts_sizes(box)), x)
        return x

    def _shifted_exp(self, x: LocalTensor, peak: LocalTensor, part: tuple[int, int]) -> LocalTensor:
        shifted, e = self._local(1, PARTIAL, part), self._local(2, PARTIAL, part)
        self.chain(Compute, "sub", (x, peak), (shifted,), {})
        self.chain(Compute, "exp", (shifted,), (e,), {})
        return e

    def run(self) -> None:
        m0, m1, s0, s1 = self.stats
        # A part's reduction goes to a buffer the running value is not in: for the max,
        # s0 (not yet used); for the sum, whichever max buffer is not the row's max.
        peak = self._fold_with(m0, m1, s0, lambda part: self._load(part), "max", "max")
        spare = m1 if peak is m0 else m0
        total = self._fold_with(s0, s1, spare, lambda part: self._shifted_exp(self._load(part), peak, part),
                                "add", "sum")
        log_total = s1 if total is s0 else s0
        if self.log:
            self.chain(Compute, "log", (total,), (log_total,), {})
        for part in self.parts:
            out = self._local(3, self.result_dtype, part)
            if self.log:  # x - max - log(sum)
                shifted = self._local(1, PARTIAL, part)
                self.chain(Compute, "sub", (self._load(part), peak), (shifted,), {})
                self.chain(Compute, "sub", (shifted, log_total), (out,), {})
            else:
                e = self._shifted_exp(self._load(part), peak, part)
                self.chain(Compute, "div", (e, total), (out,), {})
            box = _with(self.box, self.axis, part)
            self.chain(DmaStore, out, self.target.view().box(*starts_sizes(box)))

    def _fold_with(self, first: LocalTensor, spare: LocalTensor, piece: LocalTensor,
                   step: Callable[[tuple[int, int]], LocalTensor], combine: str, mode: str) -> LocalTensor:
        """The statistic of the whole row: each part's `mode` reduction of step(part) into
        `piece`, combined with `combine` into the running value (which alternates between
        `first` and `spare`)."""
        running, other = first, spare
        for index, part in enumerate(self.parts):
            source = step(part)
            if index == 0:
                self.chain(Compute, "reduce", (source,), (running,), {"mode": mode, **self.reduce})
                continue
            self.chain(Compute, "reduce", (source,), (piece,), {"mode": mode, **self.reduce})
            self.chain(Compute, combine, (running, piece), (other,), {})
            running, other = other, running
        return running
