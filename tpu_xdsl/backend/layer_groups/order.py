"""A program order that keeps chains together, so that runs of consecutive ops can hold them.

Groups are runs of consecutive ops whose results all lead to the group's last op
(`steps.plan_step`). Exporters often interleave independent branches: YOLOv8's head
computes the first conv of its box branch, then the first conv of its class branch,
then each one's activation, and so on. No two consecutive ops there belong to one
chain, so every op runs alone and each intermediate tensor goes through DDR.

`chain_order` reorders such ops topologically: after an op, the first of its users
that is ready (every producer placed) comes next; otherwise the earliest ready op in
the original order. A program without interleaved branches keeps its order. The pass
keeps the order whose groups the cost model estimates cheaper (`tpu-layer-group`).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from xdsl.ir import Block, Operation


def chain_order(ops: Sequence[Operation]) -> list[Operation]:
    """`ops` (a block's ops in program order) in an order that follows each chain."""
    position = {op: i for i, op in enumerate(ops)}
    waiting = {op: len({v.owner for v in op.operands if v.owner in position}) for op in ops}
    first = position.__getitem__
    users = {op: sorted({u.operation for r in op.results for u in r.uses if u.operation in position}, key=first)
             for op in ops}
    ready = [(position[op], op) for op in ops if waiting[op] == 0]
    heapq.heapify(ready)
    placed: set[Operation] = set()
    order: list[Operation] = []
    last: Operation | None = None
    while len(order) < len(ops):
        follow = None if last is None else next((u for u in users[last] if not waiting[u] and u not in placed), None)
        if follow is None:
            while follow is None or follow in placed:
                follow = heapq.heappop(ready)[1]
        placed.add(follow)
        order.append(follow)
        last = follow
        for user in users[follow]:
            waiting[user] -= 1
            if not waiting[user]:
                heapq.heappush(ready, (position[user], user))
    return order


def place_in_order(block: Block, ops: Sequence[Operation]) -> None:
    """Move `ops` (computations of `block`, in a topological order) to the end of `block`,
    before its terminator, in that order. The ops that stay (inputs, weights) define
    their values before any of their users, so the block stays valid."""
    terminator = block.last_op
    assert terminator is not None
    for op in ops:
        op.detach()
        block.insert_op_before(op, terminator)
