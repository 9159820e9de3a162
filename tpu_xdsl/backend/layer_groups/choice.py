"""Choosing layer groups: which runs of consecutive ops become groups.

Ops that can join form runs; within a run, the cost of a group of ops i..j is its
cycles estimated by `plan.GroupPlanner` (the device's timing of the instructions
codegen emits, both engines replayed in order), cached per interval. `opt=2`
solves TPU-MLIR's interval recurrence cost[i][j] = min(group(i..j),
min_k cost[i][k] + cost[k+1][j]) exactly, in its prefix form (the optimal
partition of i..j ends in some group k+1..j, so cost[i][j] = min_k cost[i][k] +
group(k+1..j)), which needs O(n * L) group costs instead of O(n^3) splits; `opt=1`
is greedy: an op joins the current group when that costs no more cycles than
starting a new one. Groups are at most MAX_GROUP_OPS ops long. A group of one op
stays a plain op (codegen slices it alone).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from tpu_xdsl.backend.fused_casts import epilogue_casts
from tpu_xdsl.backend.layer_groups.layout import areas
from tpu_xdsl.backend.layer_groups.plan import GroupPlan, GroupPlanner

MAX_GROUP_OPS = 32


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


def stored_values(ops: Sequence[Operation]) -> list[SSAValue]:
    """Results of `ops` used by an op that is not one of them (or returned)."""
    inside = set(ops)
    return [r for op in ops for r in op.results if any(u.operation not in inside for u in r.uses)]


class GroupCosts:
    """Group plans of the intervals of one run of ops, computed once each."""

    def __init__(self, planner: GroupPlanner, run: Sequence[Operation]):
        self.planner = planner
        self.run = run
        self.cache: dict[tuple[int, int], GroupPlan | None] = {}

    def plan(self, i: int, j: int) -> GroupPlan | None:
        if (i, j) not in self.cache:
            ops = self.run[i : j + 1]
            self.cache[i, j] = self.planner.plan(ops, stored_values(ops))
        return self.cache[i, j]


def runs(planner: GroupPlanner, ops: Sequence[Operation]) -> list[list[Operation]]:
    """Maximal runs of consecutive ops that can each run as a group of one. A cast that
    runs inside the slices of the op before it (`fused_casts.epilogue_casts`; an op that
    no group takes) is in none: a group would load that op's float result to cast it."""
    joins = {op: planner.joinable(op) and planner.plan([op], stored_values([op])) is not None for op in ops}
    fused = {cast for op, cast in epilogue_casts(ops).items() if not joins[op]}
    found: list[list[Operation]] = [[]]
    for op in ops:
        if joins[op] and op not in fused:
            found[-1].append(op)
        elif found[-1]:
            found.append([])
    return [r for r in found if r]


def choose_dp(costs: GroupCosts, n: int) -> list[tuple[int, int]]:
    """The partition of ops 0..n-1 into groups with the fewest estimated cycles (ties:
    fewer groups)."""
    best: list[tuple[int, int]] = [(0, 0)] + [(-1, 0)] * n  # (cycles, groups) of ops 0..j-1
    cut = [0] * (n + 1)
    for j in range(n):
        best[j + 1], cut[j + 1] = _best_last_group(costs, best, j)
    spans = []
    j = n
    while j > 0:
        spans.append((cut[j], j - 1))
        j = cut[j]
    return spans[::-1]


def _best_last_group(costs: GroupCosts, best: list[tuple[int, int]], j: int) -> tuple[tuple[int, int], int]:
    """The (cycles, groups) of the best partition of ops 0..j and where its last group starts."""
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
    return choice


def choose_greedy(costs: GroupCosts, n: int) -> list[tuple[int, int]]:
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


def choose_groups(planner: GroupPlanner, ops: Sequence[Operation], opt: int) -> GroupReport:
    """The groups of `ops` (a function's ops in program order), chosen by dynamic
    programming (opt=2) or greedily (opt=1), their weights placed for prefetching."""
    report = GroupReport(planner.chip.name, opt, ops=len(ops))
    for run in runs(planner, ops):
        _choose_in_run(GroupCosts(planner, run), len(run), opt, report)
    prefetch_weights(planner, ops, report.plans)
    return report


def _choose_in_run(costs: GroupCosts, n: int, opt: int, report: GroupReport) -> None:
    """Add the groups chosen in one run of `n` ops, and its cycles both ways, to `report`."""
    spans = (choose_dp if opt == 2 else choose_greedy)(costs, n)
    for i, j in spans:
        plan = costs.plan(i, j)
        assert plan is not None
        report.grouped_cycles += plan.cycles
        if j > i:
            report.plans.append(plan)
    for k in range(n):
        single = costs.plan(k, k)
        assert single is not None
        report.single_cycles += single.cycles


def prefetch_weights(planner: GroupPlanner, ops: Sequence[Operation], plans: Sequence[GroupPlan]) -> None:
    """A group that directly follows another keeps its weights clear of the lane memory
    the other uses, as many as fit there: codegen loads those while the other runs."""
    index = {op: i for i, op in enumerate(ops)}
    for before, plan in itertools.pairwise(plans):
        if index[before.ops[-1]] + 1 != index[plan.ops[0]] or not plan.constants:
            continue
        layout = planner.relayout(plan, areas(before.layout))
        if layout is not None:
            plan.layout = layout
