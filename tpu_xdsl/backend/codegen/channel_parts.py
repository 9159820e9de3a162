"""A float convolution cut along its input channels, for one too large for local memory
even in the smallest output slices (one output channel, the window's rows).

Each output box is the sum over parts of the input channels: the conv of a part of the
input with the same part of the filter (the bias in the first part only) goes into an
f32 partial, added into an f32 accumulator; the last addition stores the storage type
and applies the conv's fused ReLU. TPU-MLIR cuts a convolution's input channels the same
way when its filter does not fit. The sum of f32 partials may round the last bit of a
few outputs differently from the interpreter's whole sum (the device check's float
tolerance covers it); integer convolutions requantize inside the kernel, so INT8 ones
are not cut this way.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from tpu_xdsl.backend import slicing
from tpu_xdsl.backend.codegen.state import CodegenState
from tpu_xdsl.backend.lanes import lane_bytes, local_tensor
from tpu_xdsl.backend.slicing import Box, OpShape, SlicePlan
from tpu_xdsl.device.isa import Compute, DmaLoad, DmaStore, LocalTensor

FLOATS = ("float32", "float16", "bfloat16")
PARTIAL = "float32"


def applies(shape: OpShape, dtypes: list[str | None]) -> bool:
    """A float conv of one group (2-D or 3-D) with more than one input channel."""
    x = shape.operands[0]
    return (
        shape.kind == "conv"
        and int(shape.attrs.get("group", 1)) == 1
        and x is not None
        and len(x) in (4, 5)
        and x[1] > 1
        and all(d is None or d in FLOATS for d in dtypes)
    )


def part_boxes(plan: SlicePlan, part: tuple[int, int]) -> list[Box | None]:
    """The operand boxes of `plan` restricted to input channels `part` (input axis 1, filter
    axis 1); the bias (read by the first part only) stays."""
    x_box, w_box, *rest = plan.operands
    assert x_box is not None and w_box is not None
    return [(x_box[0], part, *x_box[2:]), (w_box[0], part, *w_box[2:]), *rest]


def _part_bytes(chip, dtype: str, box: Box | None, constant: bool) -> int:
    """Bytes per lane of an operand's part; an absent operand (no box) takes none."""
    if box is None:
        return 0
    return lane_bytes(dtype, box, constant, chip.npu_num, chip.eu_bytes)


def _footprint(chip, shape: OpShape, plans: list[SlicePlan], parts: int, dtypes, result_dtype: str) -> int:
    """Bytes per lane: the largest input and filter part, bias, partial, accumulator and
    result boxes (one buffer each: the parts run one after another)."""
    ic = shape.operands[0][1]  # type: ignore[index]
    first = slicing.split_axis(ic, parts)[0]
    total = 0
    for i, constant in enumerate(shape.constants[:3]):
        if shape.operands[i] is None:
            continue
        total += max(_part_bytes(chip, dtypes[i], part_boxes(p, first)[i], constant) for p in plans)
    out = max(lane_bytes(PARTIAL, p.outputs[0], False, chip.npu_num, chip.eu_bytes) for p in plans)
    result = max(lane_bytes(result_dtype, p.outputs[0], False, chip.npu_num, chip.eu_bytes) for p in plans)
    return total + 2 * out + result


def choose(chip, shape: OpShape, dtypes, result_dtype: str) -> tuple[list[SlicePlan], int] | None:
    """Output slices and a number (at least 2) of input-channel parts whose working set
    fits a lane, or None: each step halves the cut that shrinks it most, the input
    channels when no single cut helps yet."""
    out = shape.results[0]
    ic = shape.operands[0][1]  # type: ignore[index]
    axes = slicing.splittable_axes(shape)

    def plans_of(c: list[int]) -> list[SlicePlan]:
        pieces = [slicing.split_axis(d, n) for d, n in zip(out, c)]
        return [slicing.plan(shape, tuple(box)) for box in itertools.product(*pieces)]

    counts, parts = [1] * len(out), 2
    plans = plans_of(counts)
    while len(plans) * parts <= 1 << 16:
        need = _footprint(chip, shape, plans, parts, dtypes, result_dtype)
        if need <= chip.lmem_bytes:
            return plans, parts
        trials = []
        if parts < ic:
            more = min(ic, parts * 2)
            trials.append((_footprint(chip, shape, plans, more, dtypes, result_dtype), counts, more, plans))
        for axis in axes:
            if counts[axis] < out[axis]:
                trial = list(counts)
                trial[axis] = min(out[axis], counts[axis] * 2)
                trial_plans = plans_of(trial)
                size = _footprint(chip, shape, trial_plans, parts, dtypes, result_dtype)
                trials.append((size, trial, parts, trial_plans))
        if not trials:
            return None
        best = min(trials, key=lambda t: t[0])
        _, counts, parts, plans = best if best[0] < need else trials[0]
    return None


class _Chain:
    """Instructions one after another (the parts share their buffers)."""

    def __init__(self, state: CodegenState, layer: str):
        self.program = state.program
        self.layer = layer
        self.last: int | None = None

    def __call__(self, cls, *args, **kwargs) -> int:
        deps = [] if self.last is None else [self.last]
        self.last = self.program.emit(cls, *args, deps=deps, layer=self.layer, **kwargs)
        return self.last


def emit(state: CodegenState, op, shape: OpShape, operands, dtypes, result_dtype: str, layer: str, macs: int) -> bool:
    """Emit the cut convolution into `state`'s program; False when no cut fits."""
    chosen = choose(state.chip, shape, dtypes, result_dtype)
    if chosen is None:
        return False
    plans, parts = chosen
    chain = _Chain(state, layer)
    for plan in plans:
        _emit_slice(state, chain, op, shape, operands, dtypes, result_dtype, plan, parts, macs)
    return True


def _bases(chip, shape: OpShape, dtypes, boxes_of: list[list[Box | None]]) -> tuple[list[int], int]:
    """Lane addresses of the input, filter and bias parts (the largest part of each), and
    the first address after them."""
    cursor = 0
    bases = []
    for i in range(3):
        size = (max(_part_bytes(chip, dtypes[i], b[i], shape.constants[i]) for b in boxes_of)
                if shape.operands[i] is not None else 0)
        bases.append(cursor)
        cursor += -(-size // chip.eu_bytes) * chip.eu_bytes
    return bases, cursor


def _emit_slice(state: CodegenState, chain: _Chain, op, shape: OpShape, operands, dtypes, result_dtype: str,
                plan: SlicePlan, parts: int, macs: int) -> None:
    """One output slice: per input-channel part its loads and conv, added into the
    accumulator; the last addition writes the result, which is stored."""
    chip = state.chip
    ic = shape.operands[0][1]  # type: ignore[index]
    boxes_of = [part_boxes(plan, part) for part in slicing.split_axis(ic, parts)]
    bases, cursor = _bases(chip, shape, dtypes, boxes_of)
    out_box = plan.outputs[0]
    step = -(-lane_bytes(PARTIAL, out_box, False, chip.npu_num, chip.eu_bytes) // chip.eu_bytes) * chip.eu_bytes
    partial = local_tensor(cursor, PARTIAL, out_box)
    accumulator = local_tensor(cursor + step, PARTIAL, out_box)
    result = local_tensor(cursor + 2 * step, result_dtype, out_box)
    share = math.prod(slicing.sizes(out_box)) / max(1, math.prod(shape.results[0]))
    conv_attrs: dict[str, Any] = {k: v for k, v in plan.attrs.items() if k not in ("do_relu", "relu_limit")}
    attrs_relu = {k: v for k, v in shape.attrs.items() if k in ("do_relu", "relu_limit")}
    for index, boxes in enumerate(boxes_of):
        inputs = [_load_part(state, chain, operands, dtypes, shape, bases, boxes, index, i) for i in range(3)]
        target = accumulator if index == 0 else partial
        chain(Compute, "conv", tuple(inputs), (target,), conv_attrs, macs=round(macs * share / parts))
        if index > 0:
            final = index == len(boxes_of) - 1
            chain(Compute, "add", (accumulator, partial), (result if final else accumulator,),
                  attrs_relu if final else {})
    dst = state.places[op.results[0]].view().box(*(tuple(x) for x in zip(*out_box)))
    state.written_by[op.results[0]] = chain(DmaStore, result, dst)


def _load_part(state: CodegenState, chain: _Chain, operands, dtypes, shape: OpShape, bases: list[int],
               boxes: list[Box | None], index: int, i: int) -> LocalTensor | None:
    """Operand i's box of part `index` loaded into its buffer (the bias in part 0 only)."""
    box = boxes[i]
    if operands[i] is None or box is None or (i == 2 and index > 0):
        return None
    local = local_tensor(bases[i], dtypes[i], box, shape.constants[i])
    src = state.places[operands[i]].view().box(tuple(s for s, _ in box), tuple(n for _, n in box))
    chain(DmaLoad, src, local)
    return local
