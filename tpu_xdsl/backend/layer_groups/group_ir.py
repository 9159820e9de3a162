"""The IR of a layer group: a `tpu.group` built from a plan, and its layout read back.

The group's inputs and weights enter its region through `tpu.load`, the tensors used
after the group leave through `tpu.store` and `tpu.yield`. Every op inside carries
`ginfo` (#tpu.lg_info): the lane address and size of its output buffer (buffer b at
out_addr + b * out_size), of its scratch buffer (local copies of the part of an
operand it reads), and its output's N and H slice at every step. Codegen reads the
lane addresses back (`ginfo_layout`) and checks them against its own plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, StringAttr, i1, i64
from xdsl.ir import Block, Operation, Region, SSAValue

from tpu_xdsl.backend.layer_groups.layout import Layout
from tpu_xdsl.backend.layer_groups.plan import GroupPlan
from tpu_xdsl.dialects import op_class
from tpu_xdsl.dialects.module import is_none, tensor_names
from tpu_xdsl.dialects.tpu import LgInfoAttr


def _ints(values: Sequence[int]) -> ArrayAttr:
    return ArrayAttr([IntegerAttr(int(v), i64) for v in values])


def lg_info(out_addr: int, out_size: int, boxes, buffer_addr: int = 0, buffer_size: int = 0) -> LgInfoAttr:
    """#tpu.lg_info for a tensor held at `out_addr` whose N and H boxes over the steps are `boxes`."""
    return LgInfoAttr(
        IntegerAttr(out_addr, i64), IntegerAttr(out_size, i64), IntegerAttr(buffer_addr, i64),
        IntegerAttr(buffer_size, i64), IntegerAttr(1, i1),
        _ints([b[0][0] for b in boxes]), _ints([b[0][1] for b in boxes]),
        _ints([b[2][0] if len(b) > 2 else 0 for b in boxes]), _ints([b[2][1] if len(b) > 2 else 1 for b in boxes]),
    )


def _streamed_info(plan: GroupPlan, k: str, buffer_addr: int = 0, buffer_size: int = 0) -> LgInfoAttr:
    """The ginfo of streamed tensor `k`: its buffers and its box at every step."""
    layout = plan.layout
    return lg_info(layout.streamed[k], layout.sizes[k], [s.boxes[k] for s in plan.steps], buffer_addr, buffer_size)


def build_groups(plans: Sequence[GroupPlan]) -> None:
    """Move each plan's ops into a tpu.group (in order: a later plan may read an earlier
    group's results)."""
    origin: dict[SSAValue, SSAValue] = {}  # a group's result -> the value it stands for in later plans
    for plan in plans:
        build_group(plan, origin)


def build_group(plan: GroupPlan, origin: dict[SSAValue, SSAValue]) -> None:
    """Move the plan's ops into a tpu.group placed where its last op was; record in
    `origin` which value each result of the group replaces."""
    stored = [plan.values[k] for k in plan.stored]
    group = _group_op(plan, stored)
    inside = set(plan.ops)
    for value, result in zip(stored, group.results, strict=True):
        value.replace_uses_with_if(result, lambda use: use.operation not in inside)
        origin[result] = value
    body = group.regions[0].block
    keys = {v: k for k, v in plan.values.items()}
    produced = {r for op in plan.ops for r in op.results}
    loaded: dict[SSAValue, SSAValue] = {}
    for m, op in enumerate(plan.ops):
        op.detach()
        for index, operand in enumerate(op.operands):
            if operand in produced or is_none(operand):
                continue
            if operand not in loaded:
                loaded[operand] = _load(plan, operand, keys[origin.get(operand, operand)], body)
            op.operands[index] = loaded[operand]
        (result,) = op.results
        op.attributes["ginfo"] = _streamed_info(plan, keys[result], plan.layout.buffer.get(m, 0),
                                                plan.layout.buffer_sizes.get(m, 0))
        body.add_op(op)
    _add_stores(plan, stored, keys, body)


def _group_op(plan: GroupPlan, stored: Sequence[SSAValue]) -> Operation:
    """An empty tpu.group for `plan` returning `stored`, inserted before its last op."""
    names = [(tensor_names(v.owner) or ["?"])[v.owner.results.index(v)] if isinstance(v.owner, Operation) else "?"
             for v in stored]
    group = op_class("tpu.group").build(
        result_types=[[v.type for v in stored]],
        regions=[Region(Block())],
        attributes={
            "n_slices": IntegerAttr(plan.n_slices, i64),
            "h_slices": IntegerAttr(plan.h_slices, i64),
            "group_type": StringAttr("NH"),
            "names": ArrayAttr([StringAttr(n) for n in names]),
        },
    )
    block = plan.ops[-1].parent_block()
    assert block is not None
    block.insert_op_before(group, plan.ops[-1])
    return group


def _load(plan: GroupPlan, operand: SSAValue, k: str, body: Block) -> SSAValue:
    """A tpu.load of `operand` (tensor `k` of the plan) added to `body`; its result."""
    layout = plan.layout
    if k in plan.constants:
        info = lg_info(layout.resident[k], layout.resident_sizes[k], [tuple((0, d) for d in (1, 1, 1, 1))])
    else:
        info = _streamed_info(plan, k)
    load = op_class("tpu.load").build(operands=[operand], result_types=[operand.type], attributes={"ginfo": info})
    body.add_op(load)
    return load.results[0]


def _add_stores(plan: GroupPlan, stored: Sequence[SSAValue], keys: dict[SSAValue, str], body: Block) -> None:
    """A tpu.store of each stored value, then the tpu.yield of the stores."""
    yielded = []
    for value in stored:
        store = op_class("tpu.store").build(
            operands=[value], result_types=[value.type], attributes={"ginfo": _streamed_info(plan, keys[value])},
        )
        body.add_op(store)
        yielded.append(store.results[0])
    body.add_op(op_class("tpu.yield").build(operands=[yielded]))


def ginfo_layout(plan: GroupPlan, body: Sequence[Operation], keys: dict[SSAValue, str]) -> Layout:
    """The plan's layout with the lane addresses the group's ops carry in their ginfo."""
    layout = replace(
        plan.layout, resident=dict(plan.layout.resident), streamed=dict(plan.layout.streamed),
        sizes=dict(plan.layout.sizes), buffer=dict(plan.layout.buffer), buffer_sizes=dict(plan.layout.buffer_sizes),
    )
    for op in body:
        info = op.attributes.get("ginfo")
        if info is None or op.name == "tpu.store":
            continue
        out_addr, out_size, buffer_addr, buffer_size = (p.value.data for p in info.parameters[:4])  # type: ignore[attr-defined]
        if op.name == "tpu.load":
            k = keys[op.operands[0]]
        else:
            k = keys[op.results[0]]
            m = plan.ops.index(op)
            if m in layout.buffer:
                layout.buffer[m], layout.buffer_sizes[m] = buffer_addr, buffer_size
        if k in plan.constants:
            layout.resident[k], layout.resident_sizes[k] = out_addr, out_size
        else:
            layout.streamed[k], layout.sizes[k] = out_addr, out_size
    return layout
