"""tpu-layer-group: runs of consecutive TPU ops become `tpu.group`s that work out of local
memory (DESIGN.md section 5, TPU-MLIR's layer group pass).

A group's inputs and weights enter its region through `tpu.load`, the tensors
used after the group leave through `tpu.store` and `tpu.yield`; everything else
stays in local memory. The group is cut along N, then H of its last op's
output (`n_slices` x `h_slices` steps); backward slice inference through every
op's window gives each tensor's box per step (`backend.groups`). Weights are
loaded once and stay resident while the steps run (a group right after another
keeps as many as fit clear of the lane memory the other uses, and codegen loads
those while the other computes); every other tensor has two
buffers so that the loads of step i+1 and the stores of step i-1 overlap the
computes of step i (the 3-stage pipeline codegen emits with dependency tokens).

Every op inside carries `ginfo` (#tpu.lg_info): the lane address and size of
its output buffer (buffer b at out_addr + b * out_size), of its scratch buffer
(local copies of the part of an operand it reads), and its output's N and H
slice at every step. A group is legal when each op can join (rank-4, cut along
N and H) and the layout fits local memory; buffers start on bank boundaries
when they fit that way, so an op's inputs and output sit in different banks.

Choosing groups: ops that can join form runs; within a run, the cost of a
group of ops i..j is its cycles estimated by `backend.group_plan` (the device's
timing of the instructions codegen emits, both engines replayed in order),
cached per interval. `opt=2` solves TPU-MLIR's interval recurrence
cost[i][j] = min(group(i..j), min_k cost[i][k] + cost[k+1][j]) exactly, in its
prefix form (the optimal partition of i..j ends in some group k+1..j, so
cost[i][j] = min_k cost[i][k] + group(k+1..j)), which needs O(n * L) group
costs instead of O(n^3) splits; `opt=1` is greedy: an op joins the current
group when that costs no more cycles than starting a new one. Groups are at
most MAX_GROUP_OPS ops long. A group of one op stays a plain op (codegen
slices it alone).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr, i1, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from tpu_xdsl.backend import groups
from tpu_xdsl.backend.group_plan import GroupPlan, GroupPlanner
from tpu_xdsl.device.chip import chip_config
from tpu_xdsl.dialects import op_class
from tpu_xdsl.dialects.module import is_none, main_func, tensor_names
from tpu_xdsl.dialects.tpu import LgInfoAttr
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.transforms.lower_top_to_tpu import LOWERED_STATE, lowered_chip
from tpu_xdsl.weights import is_weight

GROUPED_STATE = "TPU_GROUPED"
MAX_GROUP_OPS = 32
_SKIPPED = ("top.input", "top.weight", "top.none", "func.return")


class LayerGroupError(TpuXdslError):
    """The module cannot be grouped (wrong stage, no chip, bad option)."""


@dataclass
class GroupReport:
    """What the pass chose: the plans of the groups (two ops or more), the ops left
    alone, and the estimated cycles with the groups and op by op."""

    chip: str
    opt: int
    plans: list[GroupPlan] = field(default_factory=list)
    ops: int = 0
    grouped_cycles: int = 0
    single_cycles: int = 0

    def summary(self) -> str:
        grouped = sum(len(p.ops) for p in self.plans)
        steps = sum(len(p.steps) for p in self.plans)
        return (
            f"tpu-layer-group ({self.chip}, opt {self.opt}): {len(self.plans)} groups hold {grouped} of {self.ops} ops "
            f"({steps} steps); estimated cycles of the ops that can join: {self.grouped_cycles} grouped, "
            f"{self.single_cycles} op by op"
        )


def _planner(chip) -> GroupPlanner:
    return GroupPlanner(chip, is_weight)


def _stored(ops: Sequence[Operation]) -> list[SSAValue]:
    """Results of `ops` used by an op that is not one of them (or returned)."""
    inside = set(ops)
    return [r for op in ops for r in op.results if any(u.operation not in inside for u in r.uses)]


class _Costs:
    """Group plans of the intervals of one run of ops, computed once each."""

    def __init__(self, planner: GroupPlanner, run: Sequence[Operation]):
        self.planner = planner
        self.run = run
        self.cache: dict[tuple[int, int], GroupPlan | None] = {}

    def plan(self, i: int, j: int) -> GroupPlan | None:
        if (i, j) not in self.cache:
            ops = self.run[i : j + 1]
            self.cache[i, j] = self.planner.plan(ops, _stored(ops))
        return self.cache[i, j]


def _runs(planner: GroupPlanner, ops: Sequence[Operation]) -> list[list[Operation]]:
    """Maximal runs of consecutive ops that can each run as a group of one."""
    runs: list[list[Operation]] = [[]]
    for op in ops:
        if planner.joinable(op) and planner.plan([op], _stored([op])) is not None:
            runs[-1].append(op)
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def choose_dp(costs: _Costs, n: int) -> list[tuple[int, int]]:
    """The partition of ops 0..n-1 into groups with the fewest estimated cycles (ties:
    fewer groups)."""
    best: list[tuple[int, int]] = [(0, 0)] + [(-1, 0)] * n  # (cycles, groups) of ops 0..j-1
    cut = [0] * (n + 1)
    for j in range(n):
        choice = None
        for i in range(j, max(-1, j - MAX_GROUP_OPS), -1):
            plan = costs.plan(i, j)
            if plan is None:
                if i < j:
                    break  # longer groups ending at j only grow: they will not fit either
                raise AssertionError("every op of a run fits as a group of one")
            total = (best[i][0] + plan.cycles, best[i][1] + 1)
            if choice is None or total < choice[0]:
                choice = (total, i)
        assert choice is not None
        best[j + 1], cut[j + 1] = choice
    spans = []
    j = n
    while j > 0:
        spans.append((cut[j], j - 1))
        j = cut[j]
    return spans[::-1]


def choose_greedy(costs: _Costs, n: int) -> list[tuple[int, int]]:
    """Groups grown op by op: the next op joins when the grown group costs no more than
    the group as it is plus the op alone."""
    spans = []
    start = 0
    for j in range(1, n + 1):
        if j == n:
            spans.append((start, n - 1))
            break
        current = costs.plan(start, j - 1)
        grown = costs.plan(start, j) if j - start < MAX_GROUP_OPS else None
        alone = costs.plan(j, j)
        assert current is not None and alone is not None
        if grown is None or grown.cycles > current.cycles + alone.cycles:
            spans.append((start, j - 1))
            start = j
    return spans


def layer_group(module: ModuleOp, opt: int = 2) -> GroupReport:
    """Group the ops of a lowered TPU module (state TPU_LOWERED) for its chip."""
    if opt not in (1, 2):
        raise LayerGroupError(f"opt={opt}: use 1 (greedy) or 2 (dynamic programming)")
    chip = chip_config(
        lowered_chip(module, (LOWERED_STATE,), "tpu-layer-group takes a lowered TPU module", LayerGroupError)
    )
    planner = _planner(chip)
    ops = [op for op in main_func(module).body.block.ops if op.name not in _SKIPPED]
    report = GroupReport(chip.name, opt, ops=len(ops))
    for run in _runs(planner, ops):
        costs = _Costs(planner, run)
        spans = (choose_dp if opt == 2 else choose_greedy)(costs, len(run))
        for i, j in spans:
            plan = costs.plan(i, j)
            assert plan is not None
            report.grouped_cycles += plan.cycles
            if j > i:
                report.plans.append(plan)
        for k in range(len(run)):
            single = costs.plan(k, k)
            assert single is not None
            report.single_cycles += single.cycles
    _prefetch_weights(planner, ops, report.plans)
    origin: dict[SSAValue, SSAValue] = {}  # a group's result -> the value it stands for in later plans
    for plan in report.plans:
        _build_group(plan, origin)
    module.attributes["module.state"] = StringAttr(GROUPED_STATE)
    return report


def _prefetch_weights(planner: GroupPlanner, ops: Sequence[Operation], plans: Sequence[GroupPlan]) -> None:
    """A group that directly follows another keeps its weights clear of the lane memory
    the other uses, as many as fit there: codegen loads those while the other runs."""
    index = {op: i for i, op in enumerate(ops)}
    for before, plan in itertools.pairwise(plans):
        if index[before.ops[-1]] + 1 != index[plan.ops[0]] or not plan.constants:
            continue
        layout = planner.relayout(plan, groups.areas(before.layout))
        if layout is not None:
            plan.layout = layout


# -- the IR of a group ----------------------------------------------------------------------


def _ints(values: Sequence[int]) -> ArrayAttr:
    return ArrayAttr([IntegerAttr(int(v), i64) for v in values])


def _lg_info(out_addr: int, out_size: int, boxes, buffer_addr: int = 0, buffer_size: int = 0):
    """#tpu.lg_info for a tensor held at `out_addr` whose N and H boxes over the steps are `boxes`."""
    return LgInfoAttr(
        IntegerAttr(out_addr, i64), IntegerAttr(out_size, i64), IntegerAttr(buffer_addr, i64),
        IntegerAttr(buffer_size, i64), IntegerAttr(1, i1),
        _ints([b[0][0] for b in boxes]), _ints([b[0][1] for b in boxes]),
        _ints([b[2][0] if len(b) > 2 else 0 for b in boxes]), _ints([b[2][1] if len(b) > 2 else 1 for b in boxes]),
    )


def _build_group(plan: GroupPlan, origin: dict[SSAValue, SSAValue]) -> None:
    """Move the plan's ops into a tpu.group placed where its last op was; record in
    `origin` which value each result of the group replaces."""
    ops = plan.ops
    layout = plan.layout
    keys = {v: k for k, v in plan.values.items()}
    stored_values = [plan.values[k] for k in plan.stored]
    names = [(tensor_names(v.owner) or ["?"])[v.owner.results.index(v)] if isinstance(v.owner, Operation) else "?"
             for v in stored_values]
    group = op_class("tpu.group").build(
        result_types=[[v.type for v in stored_values]],
        regions=[Region(Block())],
        attributes={
            "n_slices": IntegerAttr(plan.n_slices, i64),
            "h_slices": IntegerAttr(plan.h_slices, i64),
            "group_type": StringAttr("NH"),
            "names": ArrayAttr([StringAttr(n) for n in names]),
        },
    )
    block = ops[-1].parent_block()
    assert block is not None
    block.insert_op_before(group, ops[-1])
    inside = set(ops)
    for value, result in zip(stored_values, group.results, strict=True):
        value.replace_uses_with_if(result, lambda use: use.operation not in inside)
        origin[result] = value
    body = group.regions[0].block
    produced = {r for op in ops for r in op.results}
    loaded: dict[SSAValue, SSAValue] = {}
    steps = plan.steps
    for op in ops:
        op.detach()
        for index, operand in enumerate(op.operands):
            if operand in produced or is_none(operand):
                continue
            if operand not in loaded:
                k = keys[origin.get(operand, operand)]
                if k in plan.constants:
                    info = _lg_info(layout.resident[k], layout.resident_sizes[k],
                                    [tuple((0, d) for d in (1, 1, 1, 1))])
                else:
                    info = _lg_info(layout.streamed[k], layout.sizes[k], [s.boxes[k] for s in steps])
                load = op_class("tpu.load").build(operands=[operand], result_types=[operand.type],
                                                  attributes={"ginfo": info})
                body.add_op(load)
                loaded[operand] = load.results[0]
            op.operands[index] = loaded[operand]
        m = ops.index(op)
        (result,) = op.results
        k = keys[result]
        op.attributes["ginfo"] = _lg_info(
            layout.streamed[k], layout.sizes[k], [s.boxes[k] for s in steps],
            layout.buffer.get(m, 0), layout.buffer_sizes.get(m, 0),
        )
        body.add_op(op)
    yielded = []
    for value in stored_values:
        k = keys[value]
        store = op_class("tpu.store").build(
            operands=[value], result_types=[value.type],
            attributes={"ginfo": _lg_info(layout.streamed[k], layout.sizes[k], [s.boxes[k] for s in steps])},
        )
        body.add_op(store)
        yielded.append(store.results[0])
    body.add_op(op_class("tpu.yield").build(operands=[yielded]))


@dataclass(frozen=True)
class TpuLayerGroup(ModulePass):
    """Group runs of TPU ops to work out of local memory (opt=1 greedy, opt=2 dynamic programming)."""

    name = "tpu-layer-group"

    opt: int = 2

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        report = layer_group(op, self.opt)
        print(report.summary(), file=sys.stderr)
