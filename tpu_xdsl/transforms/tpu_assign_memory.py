"""tpu-assign-memory: a DDR address for every tensor of a TPU module, recorded in the IR.

The layout follows DESIGN.md section 5 (memory assignment) and TPU-MLIR's
address assignment: the coefficient region comes first, from address 0, every
`top.weight` of @main in program order, each 64-byte aligned (a weight entry
several ops name with the same type is placed once). The activation region
follows, aligned to 4096: the results of `top.input` and of every `tpu.*` op
at the top level of @main (a `tpu.group` result too; what lives inside a group
is local memory, not DDR).

Activations reuse memory by liveness in program order: a tensor lives from the
op that defines it (model inputs from the start) to its last user (outputs to
the end; the input of a cast that codegen runs inside the next op's slices,
`backend/fused_casts.py`, to that op; a cast run inside the slices of the op before it
lives from that op). A view (a reshape, or a split or slice whose axes before
the cut have size 1: a contiguous run of its input's bytes, `backend/views.py`) is not
placed on its own: it sits inside the tensor it reads, at its byte offset, and that tensor
lives as long as its views. So do the inputs of a concatenation that only copies along
such an axis, inside its result (`views.operand_offsets`): their ops write them there.
Each other tensor is placed at the lowest 64-byte-aligned offset free for
its whole life (first-fit), in four orders: definition order, largest first,
longest-lived first and largest size x lifetime first. No placement can beat
the largest total size of tensors live at one time, reported as the lower
bound. If the best of the four orders does not reach it, a swap search starts
from that order: it swaps two tensors of the order (on every other step one
that reaches the peak with one placed before it, otherwise two at random, from
a generator with a fixed seed), places them all again and keeps the new order
if the peak is not higher, until the peak is the lower bound or a fixed budget
of swaps and placement work (about 0.35 s at most) is spent. The placement with
the smallest peak is kept (the earlier strategy on a tie): the same module
always gets the same addresses.

Every op with tensor results gets `ddr = [address, ...]`, and the module
`module.state = "TPU_ADDRESSED"`, `module.coeff_bytes`,
`module.activation_bytes`, `module.activation_lower_bound`,
`module.ddr_bytes` and `module.memory_strategy`. Sizes come from the types
only (the weight data is never read). Running the pass on an addressed module
assigns the same addresses again.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    IntegerAttr,
    ModuleOp,
    NoneType,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from tpu_xdsl.backend.fused_casts import epilogue_casts, prologue_casts
from tpu_xdsl.backend.views import operand_offsets, result_offsets
from tpu_xdsl.device.chip import chip_config
from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.kernels.dtypes import numpy_dtype
from tpu_xdsl.transforms.lower_top_to_tpu import LOWERED_STATE, lowered_chip
from tpu_xdsl.transforms.tpu_layer_group import GROUPED_STATE

TENSOR_ALIGN = 64
REGION_ALIGN = 4096
ADDRESSED_STATE = "TPU_ADDRESSED"
_ACCEPTED_STATES = (LOWERED_STATE, GROUPED_STATE, ADDRESSED_STATE)
FIRST_FIT = "first-fit"
LARGEST_FIRST = "largest-first"
LONGEST_FIRST = "longest-lived-first"
AREA_FIRST = "size-x-lifetime-first"
SWAP_SEARCH = "swap-search"
SEARCH_SEED = 0
SEARCH_STEPS = 1000  # swaps the search tries at most
# The search's work at most: each tensor placed again counts 1 + the number of tensors live
# with it (those it is checked against); about 0.35 s whatever the model's size.
SEARCH_WORK = 1_000_000


class MemoryAssignmentError(TpuXdslError):
    """The module cannot be given DDR addresses (wrong stage, or it does not fit the chip)."""


@dataclass(frozen=True)
class Lifetime:
    """A tensor to place: its reserved size (a multiple of 64) and the op indices it lives over."""

    name: str
    size: int
    first: int
    last: int

    def overlaps(self, other: Lifetime) -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class Placement:
    """Where one tensor sits in DDR: absolute address, reserved bytes, op indices of its life."""

    name: str
    address: int
    size: int
    first: int
    last: int


@dataclass(frozen=True)
class MemoryPlan:
    """The DDR layout of a module: coefficient region at 0, activation region after it."""

    chip: str
    coeff_bytes: int
    activation_base: int
    activation_bytes: int
    activation_lower_bound: int
    ddr_bytes: int
    strategy: str
    peaks: dict[str, int]  # activation peak of each strategy tried
    coefficients: list[Placement]
    activations: list[Placement]

    def summary(self) -> str:
        ratio = self.activation_bytes / self.activation_lower_bound if self.activation_lower_bound else 1.0
        return (
            f"activations: {format_bytes(self.activation_bytes)} at peak, lower bound "
            f"{format_bytes(self.activation_lower_bound)} ({ratio:.2f}x), {self.strategy}; "
            f"coefficients {format_bytes(self.coeff_bytes)}"
        )


def align_up(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def format_bytes(n: int) -> str:
    """Bytes in binary units, about three digits: 1.15 MiB, 12.0 GiB, 784 KiB, 640 B."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            value = n / scale
            return f"{value:.{2 if value < 10 else 1 if value < 100 else 0}f} {unit}"
    return f"{n} B"


# -- placement of activations (no IR) -------------------------------------------------------------


def first_fit(tensors: Sequence[Lifetime], order: Sequence[int]) -> list[int]:
    """Offsets for `tensors`, placed in `order`, each at the lowest offset that no tensor placed
    before it and live at the same time occupies. Sizes are multiples of 64, so every gap is
    aligned."""
    offsets = [-1] * len(tensors)
    _place(tensors, order, _neighbours(tensors), offsets)
    return offsets


def _neighbours(tensors: Sequence[Lifetime]) -> list[list[int]]:
    """For each tensor, the tensors live at the same time as it."""
    by_first = sorted(range(len(tensors)), key=lambda i: tensors[i].first)
    neighbours: list[list[int]] = [[] for _ in tensors]
    for k, i in enumerate(by_first):
        for j in by_first[k + 1 :]:
            if tensors[j].first > tensors[i].last:
                break
            neighbours[i].append(j)
            neighbours[j].append(i)
    return neighbours


def _place(tensors: Sequence[Lifetime], order: Sequence[int], neighbours: list[list[int]], offsets: list[int]) -> None:
    """First-fit the tensors of `order` into `offsets`, around those already placed (offset >= 0)."""
    for i in order:
        size = tensors[i].size
        busy = sorted((offsets[j], tensors[j].size) for j in neighbours[i] if offsets[j] >= 0)
        offset = 0
        for start, taken in busy:
            if start >= offset + size:
                break
            offset = max(offset, start + taken)
        offsets[i] = offset


def peak(tensors: Sequence[Lifetime], offsets: Sequence[int]) -> int:
    return max((o + t.size for t, o in zip(tensors, offsets)), default=0)


def live_lower_bound(tensors: Sequence[Lifetime]) -> int:
    """The largest total size of tensors live at one op: no placement can use less."""
    events: dict[int, int] = {}
    for t in tensors:
        events[t.first] = events.get(t.first, 0) + t.size
        events[t.last + 1] = events.get(t.last + 1, 0) - t.size
    live = best = 0
    for index in sorted(events):
        live += events[index]
        best = max(best, live)
    return best


def place_activations(tensors: Sequence[Lifetime]) -> tuple[list[int], str, dict[str, int]]:
    """Offsets of the best of first-fit placements in four orders (definition order,
    largest first, longest-lived first, largest size x lifetime first) and of the swap search
    from the best of them (the earliest on a tie), its name, and the peak of each."""
    in_definition_order = sorted(range(len(tensors)), key=lambda i: (tensors[i].first, i))
    largest_first = sorted(in_definition_order, key=lambda i: -tensors[i].size)  # stable: ties by definition
    # Two more orders that often pack tighter: the longest-lived first (they pin the
    # bottom of the region), and the largest size x lifetime first.
    longest_first = sorted(largest_first, key=lambda i: -(tensors[i].last - tensors[i].first))
    area_first = sorted(in_definition_order, key=lambda i: -tensors[i].size * (tensors[i].last - tensors[i].first + 1))
    orders = {
        FIRST_FIT: in_definition_order,
        LARGEST_FIRST: largest_first,
        LONGEST_FIRST: longest_first,
        AREA_FIRST: area_first,
    }
    candidates = {name: first_fit(tensors, order) for name, order in orders.items()}
    peaks = {name: peak(tensors, offsets) for name, offsets in candidates.items()}
    start = min(candidates, key=lambda name: peaks[name])
    candidates[SWAP_SEARCH] = swap_search(tensors, orders[start])
    peaks[SWAP_SEARCH] = peak(tensors, candidates[SWAP_SEARCH])
    best = min(candidates, key=lambda name: peaks[name])
    return candidates[best], best, peaks


def swap_search(tensors: Sequence[Lifetime], order: Sequence[int]) -> list[int]:
    """Offsets of the first-fit placement of the best order found by swapping two tensors of
    `order` at a time, a swap kept when the peak is not higher. It stops at the lower bound,
    after SEARCH_STEPS swaps or SEARCH_WORK work. Deterministic: the swaps come from a fixed seed."""
    neighbours = _neighbours(tensors)
    order = list(order)
    offsets = [-1] * len(tensors)
    _place(tensors, order, neighbours, offsets)
    best, bound = peak(tensors, offsets), live_lower_bound(tensors)
    rng = np.random.default_rng(SEARCH_SEED)
    work = 0
    for step in range(SEARCH_STEPS):
        if best == bound or work > SEARCH_WORK:
            break
        a, b = _pick_swap(tensors, order, offsets, best, step, rng)
        if a == b:
            continue
        candidate = order.copy()
        candidate[a], candidate[b] = candidate[b], candidate[a]
        placed = offsets.copy()  # the tensors before position a keep their offsets
        for i in candidate[a:]:
            placed[i] = -1
        _place(tensors, candidate[a:], neighbours, placed)
        work += sum(len(neighbours[i]) + 1 for i in candidate[a:])
        height = peak(tensors, placed)
        if height <= best:
            order, offsets, best = candidate, placed, height
    return offsets


def _pick_swap(
    tensors: Sequence[Lifetime], order: list[int], offsets: list[int], top: int, step: int, rng: np.random.Generator
) -> tuple[int, int]:
    """Two positions of `order` to swap, the smaller first: on even steps a tensor that reaches
    the peak `top` and one placed before it, on odd steps two at random."""
    if step % 2 == 0:
        highest = [k for k, i in enumerate(order) if offsets[i] + tensors[i].size == top]
        b = highest[int(rng.integers(len(highest)))]
        return (int(rng.integers(b)), b) if b > 0 else (0, 0)
    a, b = sorted(int(k) for k in rng.integers(len(order), size=2))
    return a, b


# -- the module's tensors -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tensor:
    value: SSAValue
    life: Lifetime


def _tensor_bytes(value: SSAValue, op: Operation) -> int:
    t = value.type
    if not isinstance(t, TensorType):
        raise MemoryAssignmentError(
            f"'{op.name}' {_label(op)} has a result of type {t}, not a tensor: it can have no DDR address"
        )
    return numpy_dtype(t.element_type).itemsize * math.prod(t.get_shape())


def _label(op: Operation) -> str:
    names = tensor_names(op)
    return f"'{names[0]}'" if names else "(unnamed)"


def _top_level(op: Operation, block_ops: dict[Operation, int]) -> int:
    """The index in @main of the top-level op holding `op` (a user inside a tpu.group)."""
    while op not in block_ops:
        parent = op.parent_op()
        assert parent is not None, "a use outside @main"
        op = parent
    return block_ops[op]


@dataclass(frozen=True)
class _View:
    """An activation placed inside another (`root`), `offset` bytes in; its own life."""

    root: SSAValue
    offset: int
    life: Lifetime


def _collect(module: ModuleOp) -> tuple[list[_Tensor], list[_Tensor], dict[SSAValue, _View]]:
    """The weights and the activations of @main, in program order, with their lives, and
    the views: each activation that is a contiguous part of another (`backend/views.py`),
    with that tensor and its byte offset in it. The activations placed are those that are
    not views; each lives as long as its views do."""
    ops = list(main_func(module).body.block.ops)
    index = {op: i for i, op in enumerate(ops)}
    # A cast codegen runs inside the slices of the op after it reads its input while that
    # op writes: the input lives until that op.
    read_later = {cast.operands[0]: index[user] for user, cast in prologue_casts(ops).items()}
    # A cast codegen runs inside the slices of the op before it is written while that op
    # reads its input: its result lives from that op.
    written_earlier = {cast.results[0]: index[op] for op, cast in epilogue_casts(ops).items()}
    weights: list[_Tensor] = []
    activations: list[_Tensor] = []
    for i, op in enumerate(ops):
        if op.name in ("top.none", "func.return"):
            continue
        if op.name not in ("top.input", "top.weight") and not op.name.startswith("tpu."):
            raise MemoryAssignmentError(
                f"'{op.name}' {_label(op)} is not a TPU op: tpu-assign-memory takes the module "
                "lower-top-to-tpu writes"
            )
        names = tensor_names(op)
        for r, value in enumerate(op.results):
            if isinstance(value.type, NoneType):
                continue  # an output the model does not use (of an LSTM/GRU): nothing to place
            # func.return is the last op: the model's outputs live to the end.
            last = max((_top_level(use.operation, index) for use in value.uses), default=i)
            last = max(last, read_later.get(value, last))
            name = names[r] if r < len(names) else f"{op.name}#{i}.{r}"
            first = 0 if op.name == "top.input" else written_earlier.get(value, i)
            life = Lifetime(name, align_up(_tensor_bytes(value, op), TENSOR_ALIGN), first, last)
            (weights if op.name == "top.weight" else activations).append(_Tensor(value, life))
    lives = {a.value: a.life for a in activations}
    views = {value: _View(root, offset, lives[value])
             for value, (root, offset) in _views(ops, set(lives)).items()}
    for view in views.values():
        life = lives[view.root]
        lives[view.root] = dataclasses.replace(
            life, first=min(life.first, view.life.first), last=max(life.last, view.life.last))
    roots = [_Tensor(a.value, lives[a.value]) for a in activations if a.value not in views]
    return weights, roots, views


def _views(ops: Sequence[Operation], activations: set[SSAValue]) -> dict[SSAValue, tuple[SSAValue, int]]:
    """Each activation placed inside another, with that one (the root: followed through
    views of views) and its byte offset in it: the results of views
    (`views.result_offsets`), and the operands of a concatenation written in place
    (`views.operand_offsets`) when each is an activation of its own (an op's result, not
    yet inside another tensor, none twice)."""
    views: dict[SSAValue, tuple[SSAValue, int]] = {}
    members: dict[SSAValue, list[SSAValue]] = {}  # root -> the values placed inside it
    computed = {v for v in activations if not (isinstance(v.owner, Operation) and v.owner.name == "top.input")}
    for op in ops:
        # Not of a model input: a view is a tensor the program writes, complete when the
        # tensor it is part of is (the device's dumps name the instruction).
        if not op.operands:
            continue
        source = op.operands[0]
        offsets = result_offsets(op) if source in computed else None
        if offsets is not None:
            root, base = views.get(source, (source, 0))
            for result, offset in zip(op.results, offsets, strict=True):
                views[result] = (root, base + offset)
                members.setdefault(root, []).append(result)
            continue
        parts = operand_offsets(op)
        if parts is None or op.results[0] not in computed or len(set(op.operands)) != len(op.operands):
            continue
        if any(v not in computed or v in views for v in op.operands):
            continue
        out = op.results[0]
        for value, offset in zip(op.operands, parts, strict=True):
            for member in [value, *members.pop(value, [])]:
                views[member] = (out, offset + (views[member][1] if member is not value else 0))
                members.setdefault(out, []).append(member)
    return views


def _plan(module: ModuleOp) -> tuple[MemoryPlan, dict[SSAValue, int]]:
    chip = chip_config(
        lowered_chip(module, _ACCEPTED_STATES, "tpu-assign-memory takes a TPU module", MemoryAssignmentError)
    )
    weights, activations, views = _collect(module)

    address_of: dict[SSAValue, int] = {}
    coefficients: list[Placement] = []
    by_entry: dict[tuple[str, object], int] = {}
    coeff_end = 0
    for w in weights:
        key = (w.life.name, w.value.type)
        if key not in by_entry:
            by_entry[key] = coeff_end
            life = w.life
            coefficients.append(Placement(life.name, coeff_end, life.size, life.first, life.last))
            coeff_end += w.life.size
        address_of[w.value] = by_entry[key]

    lives = [a.life for a in activations]
    offsets, strategy, peaks = place_activations(lives)
    base = align_up(coeff_end, REGION_ALIGN)
    placements = []
    for a, offset in zip(activations, offsets):
        address_of[a.value] = base + offset
        placements.append(Placement(a.life.name, base + offset, a.life.size, a.life.first, a.life.last))
    for value, view in views.items():
        address_of[value] = address_of[view.root] + view.offset
        life = view.life
        placements.append(Placement(life.name, address_of[value], life.size, life.first, life.last))
    activation_bytes = peaks[strategy]
    plan = MemoryPlan(
        chip=chip.name,
        coeff_bytes=coeff_end,
        activation_base=base,
        activation_bytes=activation_bytes,
        activation_lower_bound=live_lower_bound(lives),
        ddr_bytes=base + activation_bytes,
        strategy=strategy,
        peaks=peaks,
        coefficients=coefficients,
        activations=placements,
    )
    if plan.ddr_bytes > chip.ddr_bytes:
        mode = module.attributes.get("module.mode")
        narrower = "" if isinstance(mode, StringAttr) and mode.data == "INT8" else "quantize to INT8 or "
        raise MemoryAssignmentError(
            f"the model needs {format_bytes(plan.ddr_bytes)} of DDR "
            f"(weights {format_bytes(plan.coeff_bytes)}, activations {format_bytes(plan.activation_bytes)}); "
            f"{chip.name} has {format_bytes(chip.ddr_bytes)}: {narrower}deploy to a chip with more DDR"
        )
    return plan, address_of


def plan_memory(module: ModuleOp) -> MemoryPlan:
    """The DDR layout of a TPU module, computed from its types; the IR is left as it is."""
    return _plan(module)[0]


def assign_memory(module: ModuleOp) -> MemoryPlan:
    """Lay out the module's DDR and record it: `ddr` on every op with tensor results, the
    figures as module attributes, state TPU_ADDRESSED."""
    plan, address_of = _plan(module)
    for op in main_func(module).body.block.ops:
        addresses = [address_of[r] for r in op.results if r in address_of]
        if addresses:
            op.attributes["ddr"] = ArrayAttr([IntegerAttr(a, i64) for a in addresses])
    module.attributes["module.state"] = StringAttr(ADDRESSED_STATE)
    for key, value in (
        ("module.coeff_bytes", plan.coeff_bytes),
        ("module.activation_bytes", plan.activation_bytes),
        ("module.activation_lower_bound", plan.activation_lower_bound),
        ("module.ddr_bytes", plan.ddr_bytes),
    ):
        module.attributes[key] = IntegerAttr(value, i64)
    module.attributes["module.memory_strategy"] = StringAttr(plan.strategy)
    return plan


@dataclass(frozen=True)
class TpuAssignMemory(ModulePass):
    """Give every tensor of a TPU module a DDR address (weights first, activations by liveness)."""

    name = "tpu-assign-memory"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        plan = assign_memory(op)
        print(plan.summary(), file=sys.stderr)
