"""A `tpu.group`, emitted as a 3-stage pipeline over its steps.

The group is planned again from its ops and its cut (`layer_groups.GroupPlanner`;
the plan is deterministic) and its lane addresses are read back from the ops'
ginfo and checked. Weights stay resident: member 0's are loaded first, then the
inputs of step 0, then the others' in member order, so each member waits only for
its own weights. Per step: the loads of the next step (once the compute two steps
back freed their buffer), each member's local copies and compute, the stores.
When the op after the group is a group whose weights lie clear of this one's lane
memory, their loads go in while this one runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.backend import slicing
from tpu_xdsl.backend.codegen.constants import Constant, emit_constants
from tpu_xdsl.backend.codegen.state import (
    CodegenError,
    CodegenState,
    DdrTensor,
    int_attr,
    op_macs,
    starts_sizes,
)
from tpu_xdsl.backend.lanes import local_tensor
from tpu_xdsl.backend.layer_groups import (
    GroupPlan,
    GroupPlanner,
    Layout,
    Member,
    Step,
    ginfo_layout,
)
from tpu_xdsl.backend.layer_groups.cost import resident_keys
from tpu_xdsl.backend.layer_groups.layout import compact_weights, layout_problem, weights_clear_of
from tpu_xdsl.backend.slicing import Box
from tpu_xdsl.device.isa import Compute, DmaLoad, DmaStore, LocalTensor
from tpu_xdsl.device.model_file import GroupDesc
from tpu_xdsl.dialects.module import tensor_names
from tpu_xdsl.weights import is_weight


@dataclass
class PreparedGroup:
    """A tpu.group ready to emit: its plan, lane layout, DDR places and stored values by
    key, the weights it keeps with packed planes (`compact_weights`), and the weights a
    group before it loaded ahead (key -> local tensor, load)."""

    plan: GroupPlan
    layout: Layout
    ddr: dict[str, DdrTensor]
    written: dict[str, SSAValue]
    compact: set[str] = field(default_factory=set)
    prefetched: dict[str, tuple[LocalTensor, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class WeightLoads:
    """How a group loads its weights: in coefficient images where they pay (`constants`);
    the weights of members 1, 2, ... together or member by member; those of the next
    group, loaded ahead, together or member by member. Which is fastest depends on the
    model: codegen tries each (`driver.POLICIES`)."""

    images: bool = True
    members_together: bool = False
    ahead_together: bool = True


class GroupCodegen:
    """Emits the tpu.groups of a module into `state`, each prepared once."""

    def __init__(self, state: CodegenState, loads: WeightLoads | None = None):
        self.state = state
        self.policy = loads or WeightLoads()
        self.prepared: dict[Operation, PreparedGroup] = {}

    def prepare(self, group: Operation) -> PreparedGroup:
        """A tpu.group's plan (its steps planned again from its ops and its cut, n_slices x
        h_slices), the lane addresses of its ginfo, and where its tensors are in DDR."""
        if group not in self.prepared:
            self.prepared[group] = _prepare(self.state, group)
        return self.prepared[group]

    def emit(self, group: Operation) -> None:
        """A tpu.group, emitted as a 3-stage pipeline; when the op after it is a group whose
        weights lie clear of this one's lane memory, their loads go in while this one runs."""
        prepared = self.prepare(group)
        after = group.next_op
        while after is not None and after.name in ("top.weight", "top.none"):
            after = after.next_op
        following, ahead = None, []
        if after is not None and after.name == "tpu.group":
            following = self.prepare(after)
            ahead = weights_clear_of(following.layout, prepared.layout)
        _GroupEmitter(self.state, prepared, self.policy).run(following, ahead)


def _prepare(state: CodegenState, group: Operation) -> PreparedGroup:
    body = list(group.regions[0].block.ops)
    loaded: dict[SSAValue, SSAValue] = {op.results[0]: op.operands[0] for op in body if op.name == "tpu.load"}
    stores = [op for op in body if op.name == "tpu.store"]
    ops = [op for op in body if op.name not in ("tpu.load", "tpu.store", "tpu.yield")]

    def source(value: SSAValue) -> SSAValue:
        """What a group value stands for: a tpu.load's result is the tensor it loads."""
        return loaded.get(value, value)

    planner = GroupPlanner(state.chip, lambda v: is_weight(source(v)), source)
    counts = (int_attr(group, "n_slices"), int_attr(group, "h_slices"))
    name = (tensor_names(group) or ["group"])[0]
    plan = planner.plan(ops, [store.operands[0] for store in stores], counts)
    if plan is None:
        raise CodegenError(
            f"tpu.group '{name}' cannot run on {state.chip.name} in {counts[0]}x{counts[1]} steps "
            "(an op cannot join a group, or the steps do not fit local memory): run tpu-layer-group again"
        )
    keys = {v: k for k, v in plan.values.items()}
    ddr = {k: state.places[v] for k, v in plan.values.items() if v in state.places}
    written = {}
    for store, result in zip(stores, group.results, strict=True):
        k = keys[store.operands[0]]
        ddr[k], written[k] = state.places[result], result
    layout = ginfo_layout(plan, body, keys)
    problem = layout_problem(layout, plan.layout, state.chip.lmem_bytes)
    if problem:
        raise CodegenError(f"tpu.group '{name}': {problem}; run tpu-layer-group again")
    return PreparedGroup(plan, layout, ddr, written, compact_weights(plan.members))


def _batches(by_member: list[list[str]], together: bool) -> list[list[str]]:
    """Members' weight keys as the batches they load in: all in one, or member by member."""
    return [[k for keys in by_member for k in keys]] if together else by_member


def _constant(k: str, prepared: PreparedGroup) -> Constant:
    """Weight `k` of a group: its DDR place and its resident local tensor (planes packed
    for a convolution's filter and bias, `compact_weights`)."""
    place = prepared.ddr[k]
    dst = local_tensor(prepared.layout.resident[k], place.dtype, slicing.whole(place.shape), constant=True,
                       eu_align=k not in prepared.compact)
    return Constant(k, place.view(), dst)


def _layer(plan: GroupPlan) -> str:
    return (tensor_names(plan.ops[-1]) or ["group"])[0]


class _GroupEmitter:
    """The instructions of one prepared group (group index: the next GroupDesc's)."""

    def __init__(self, state: CodegenState, prepared: PreparedGroup, loads: WeightLoads):
        self.state, self.program, self.prepared, self.policy = state, state.program, prepared, loads
        plan = self.plan = prepared.plan
        self.layout, self.ddr = prepared.layout, prepared.ddr
        self.layer = _layer(plan)
        self.names = tuple((tensor_names(op) or [member.shape.kind])[0]
                           for op, member in zip(plan.ops, plan.members, strict=True))
        self.group = len(state.group_descs)
        state.group_descs.append(GroupDesc(self.layer, self.names, plan.n_slices, plan.h_slices))
        produced = {k for m in plan.members for k in m.results}
        self.inputs = [k for k in plan.steps[0].boxes if k not in produced]
        # Weights stay resident; those the group before loaded ahead are not loaded again.
        self.resident: dict[str, LocalTensor] = {}
        self.resident_load: dict[str, int] = {}
        for k, (early, load) in prepared.prefetched.items():
            self.resident[k], self.resident_load[k] = early, load
        self.loads: dict[int, list[int]] = {}
        self.last_compute: dict[int, int] = {}
        self.stores: dict[int, list[int]] = {}

    def run(self, following: PreparedGroup | None, ahead: Sequence[str]) -> None:
        """Member 0's weights, the loads of step 0, the other members' weights, the next
        group's weights that go ahead, then the steps."""
        before = next((i.id for i in reversed(self.program.instructions) if isinstance(i, Compute)), None)
        by_member = resident_keys(self.plan.members, self.plan.constants)
        self._emit_weights(by_member[0])
        self._emit_loads(0)
        for batch in _batches(by_member[1:], self.policy.members_together):
            self._emit_weights(batch)
        if following is not None:
            self._prefetch(following, ahead, before)
        for s, step in enumerate(self.plan.steps):
            self._emit_step(s, step)

    def _emit_weights(self, keys: Sequence[str]) -> None:
        constants = [_constant(k, self.prepared) for k in keys if k not in self.resident]
        loads = emit_constants(self.state, constants, (), self.layer, self.group, self.policy.images)
        for c in constants:
            self.resident[c.key], self.resident_load[c.key] = c.dst, loads[c.key]

    def _prefetch(self, following: PreparedGroup, ahead: Sequence[str], before: int | None) -> None:
        """The next group's weights that lie in lane memory this group does not touch,
        once whatever ran before this group is done with it."""
        next_plan, next_layer = following.plan, _layer(following.plan)
        by_member = [[k for k in keys if k in ahead] for keys in resident_keys(next_plan.members, next_plan.constants)]
        for batch in _batches(by_member, self.policy.ahead_together):
            constants = [_constant(k, following) for k in batch]
            loads = emit_constants(self.state, constants, () if before is None else (before,), next_layer,
                                   self.group + 1, self.policy.images)
            for c in constants:
                following.prefetched[c.key] = (c.dst, loads[c.key])

    def _local(self, k: str, box: Box, b: int) -> LocalTensor:
        return local_tensor(self.layout.streamed[k] + b * self.layout.sizes[k], self.plan.dtypes[k], box)

    def _emit_loads(self, s: int) -> None:
        buffers, step = self.layout.buffers, self.plan.steps[s]
        b = s % buffers
        deps = [self.last_compute[s - buffers]] if s - buffers in self.last_compute else []
        self.loads[s] = [
            self.program.emit(DmaLoad, self.ddr[k].view().box(*starts_sizes(step.boxes[k])),
                              self._local(k, step.boxes[k], b), deps=deps, layer=self.layer, group=self.group)
            for k in self.inputs
        ]

    def _emit_step(self, s: int, step: Step) -> None:
        buffers = self.layout.buffers
        if buffers == 1 and s > 0:
            self._emit_loads(s)
        if buffers == 2 and s + 1 < len(self.plan.steps):
            self._emit_loads(s + 1)
        produced_by: dict[str, int] = {}
        for index, member in enumerate(self.plan.members):
            (result,) = member.results
            produced_by[result] = self._emit_member(s, step, index, member)
        self.last_compute[s] = max(produced_by.values())
        self._emit_stores(s, step, produced_by)

    def _emit_member(self, s: int, step: Step, index: int, member: Member) -> int:
        """Member `index`'s local copies and compute in step `s`; the compute's id."""
        plan, b = self.plan, s % self.layout.buffers
        deps = [*self.loads[s], *self.stores.get(s - self.layout.buffers, []),
                *(self.resident_load[k] for k in member.operands if k is not None and k in plan.constants)]
        operands = tuple(self._operand(step, index, i, k, b, deps) for i, k in enumerate(member.operands))
        (result,) = member.results
        out = self._local(result, step.boxes[result], b)
        share = int(np.prod(slicing.sizes(step.boxes[result]))) / max(1, int(np.prod(member.shape.results[0])))
        return self.program.emit(
            Compute, member.shape.kind, operands, (out,), step.plans[index].attrs, deps=deps,
            layer=self.names[index], macs=round(op_macs(member.shape.kind, plan.ops[index]) * share), group=self.group,
        )

    def _operand(self, step: Step, index: int, i: int, k: str | None, b: int, deps: list[int]) -> LocalTensor | None:
        """The local tensor member `index` reads as operand i (a local copy emitted first
        when it reads less than the box held)."""
        if k is None:
            return None
        if k in self.plan.constants:
            return self.resident[k]
        if (index, i) not in step.copies:
            return self._local(k, step.boxes[k], b)
        held, read = step.boxes[k], step.copies[index, i]
        dims = slicing.sizes(read)
        layout = self.layout
        addr = layout.buffer[index] + b * layout.buffer_sizes[index] + layout.copy_offsets[index, i]
        part = local_tensor(addr, self.plan.dtypes[k], read)
        starts = [r[0] - h[0] for r, h in zip(read, held, strict=True)]
        attrs = {"axes": [0, 1, 2, 3], "starts": starts,
                 "ends": [a + d for a, d in zip(starts, dims, strict=True)], "steps": [1, 1, 1, 1]}
        self.program.emit(Compute, "slice", (self._local(k, held, b),), (part,), attrs, deps=deps, layer=self.layer,
                          group=self.group)
        return part

    def _emit_stores(self, s: int, step: Step, produced_by: dict[str, int]) -> None:
        b = s % self.layout.buffers
        self.stores[s] = []
        for k in self.plan.stored:
            dst = self.ddr[k].view().box(*starts_sizes(step.boxes[k]))
            self.stores[s].append(self.program.emit(DmaStore, self._local(k, step.boxes[k], b), dst,
                                                    deps=[produced_by[k]], layer=self.layer, group=self.group))
            self.state.written_by[self.prepared.written[k]] = self.stores[s][-1]
