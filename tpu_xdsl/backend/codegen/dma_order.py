"""The DMA queue in the order that keeps the compute engine fed.

Codegen emits a program in the order it walks the module: a group's first loads, the
next group's weights ahead, then its steps' loads, computes and stores. The DMA engine
runs its queue in that order, so the stores the next group waits for can sit behind
weight loads that could have waited, and a step's loads behind the next group's
weights.

`order_dma` keeps the compute queue as emitted and list-schedules the DMA queue on the
chip's timing model. Whenever the DMA engine is free it takes, of the transfers whose
predecessors are placed, the one that the earliest compute instruction waits for
(directly or through DDR), of equally urgent ones the head of the longest chain to the
end. While that one waits for the compute engine, a transfer that can start runs first
if the same compute instruction waits for it or if it ends in time; a second schedule
runs any transfer that can start, and the faster of the two is kept.

Dependencies come from what each instruction reads and writes: byte ranges of local
memory (a lane address range, taken in every lane) and of DDR. Two instructions that
touch a common byte, one of them writing it, keep their program order, so the program
computes what it computed as emitted. Transfers that write DDR keep their order among
themselves too (the last of a tensor's stores says when the tensor is complete). The
new program carries, per instruction, the one dependency on the other engine's queue
that implies the others; it replaces the emitted one only when the timing model says
it is faster.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from tpu_xdsl.device import timing
from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.device.isa import Compute, DdrView, DmaCopy, DmaFill, DmaLoad, DmaStore, Instruction, LocalTensor
from tpu_xdsl.device.simulator import schedule

_LOCAL, _DDR = 0, 1


def order_dma(chip: ChipConfig, instructions: Sequence[Instruction]) -> tuple[list[Instruction], list[int]]:
    """The program with its DMA queue reordered, and the new id of each old instruction
    (the program itself and the identity when reordering does not shorten it)."""
    program = list(instructions)
    identity = list(range(len(program)))
    if not any(isinstance(i, Compute) for i in program):
        return program, identity
    preds = _predecessors(chip, program)
    cycles = [timing.cycles(chip, i) for i in program]
    best, best_cycles, best_ids = program, schedule(chip, program).total_cycles, identity
    for keep_busy in (False, True):
        reordered, new_id = _renumbered(program, preds, _list_schedule(program, preds, cycles, keep_busy))
        if reordered is None:
            continue
        total = schedule(chip, reordered).total_cycles
        if total < best_cycles:
            best, best_cycles, best_ids = reordered, total, new_id
    return best, best_ids


# -- what each instruction reads and writes ------------------------------------------------


def _local_range(chip: ChipConfig, tensor: LocalTensor) -> tuple[int, int, int]:
    return _LOCAL, tensor.addr, tensor.addr + tensor.lane_bytes(chip.npu_num, chip.eu_bytes)


def _ddr_range(view: DdrView) -> tuple[int, int, int]:
    low, high = view.span()
    return _DDR, low, high


def _accesses(chip: ChipConfig, instruction: Instruction) -> list[tuple[int, int, int, bool]]:
    """(space, first byte, one past the last, writes) of every operand."""
    match instruction:
        case DmaLoad():
            return [(*_ddr_range(instruction.src), False), (*_local_range(chip, instruction.dst), True)]
        case DmaStore():
            return [(*_local_range(chip, instruction.src), False), (*_ddr_range(instruction.dst), True)]
        case DmaCopy():
            return [(*_ddr_range(instruction.src), False), (*_ddr_range(instruction.dst), True)]
        case DmaFill():
            return [(*_ddr_range(instruction.dst), True)]
        case Compute():
            reads = [(*_local_range(chip, t), False) for t in instruction.inputs if t is not None]
            return reads + [(*_local_range(chip, t), True) for t in instruction.outputs]
    raise TypeError(f"not an instruction: {type(instruction).__name__}")


def _writes_ddr(instruction: Instruction) -> bool:
    return isinstance(instruction, (DmaStore, DmaCopy, DmaFill))


def _predecessors(chip: ChipConfig, program: list[Instruction]) -> list[list[int]]:
    """Per instruction, the earlier ones it must follow: its own deps, every earlier
    instruction touching a byte it touches where one of the two writes (of the
    compute queue, whose order stays, only the last), and the DDR writer before it
    if it writes DDR."""
    rows = [(index, *access) for index, instruction in enumerate(program) for access in _accesses(chip, instruction)]
    owner = np.array([r[0] for r in rows], dtype=np.int64)
    space = np.array([r[1] for r in rows], dtype=np.int8)
    low = np.array([r[2] for r in rows], dtype=np.int64)
    high = np.array([r[3] for r in rows], dtype=np.int64)
    writes = np.array([r[4] for r in rows], dtype=bool)
    first = np.searchsorted(owner, np.arange(len(program) + 1))
    is_compute = np.array([isinstance(i, Compute) for i in program])
    preds: list[list[int]] = []
    last_ddr_writer = -1
    for index, instruction in enumerate(program):
        found = set(instruction.deps)
        end = first[index]
        for row in range(first[index], first[index + 1]):
            hit = (space[:end] == space[row]) & (low[:end] < high[row]) & (high[:end] > low[row])
            if not writes[row]:
                hit &= writes[:end]
            found.update(np.unique(owner[:end][hit]).tolist())
        computes = [p for p in found if is_compute[p]]
        kept = [p for p in found if not is_compute[p]]
        if computes:
            kept.append(max(computes))
        if _writes_ddr(instruction):
            if last_ddr_writer >= 0:
                kept.append(last_ddr_writer)
            last_ddr_writer = index
        preds.append(sorted(set(kept)))
    return preds


# -- list scheduling -------------------------------------------------------------------------


def _urgency(program: list[Instruction], preds: list[list[int]]) -> list[float]:
    """Per instruction, the position in the compute queue of the first compute
    instruction that waits for it (itself for a compute; inf when none does)."""
    urgency = [math.inf] * len(program)
    position = 0
    positions = {}
    for index, instruction in enumerate(program):
        if isinstance(instruction, Compute):
            positions[index] = position
            position += 1
    for index in reversed(range(len(program))):
        if index in positions:
            urgency[index] = positions[index]
        for p in preds[index]:
            urgency[p] = min(urgency[p], urgency[index])
    return urgency


def _bottom_levels(program: list[Instruction], successors: list[list[int]], cycles: list[int]) -> list[int]:
    """Per instruction, the cycles of the longest chain from its start to the program's
    end (through its successors and, for a compute, the compute queue after it)."""
    level = [0] * len(program)
    after = 0  # the bottom level of the next compute instruction
    for index in reversed(range(len(program))):
        tail = max((level[s] for s in successors[index]), default=0)
        if isinstance(program[index], Compute):
            tail = max(tail, after)
        level[index] = cycles[index] + tail
        if isinstance(program[index], Compute):
            after = level[index]
    return level


def _list_schedule(
    program: list[Instruction], preds: list[list[int]], cycles: list[int], keep_busy: bool
) -> list[int]:
    """Each instruction's start: the compute queue in program order, the DMA queue
    chosen transfer by transfer (module docstring); with `keep_busy`, while the most
    urgent transfer waits, any transfer that can start runs."""
    n = len(program)
    urgency = _urgency(program, preds)
    successors: list[list[int]] = [[] for _ in range(n)]
    waiting = [len(p) for p in preds]
    for index, ps in enumerate(preds):
        for p in ps:
            successors[p].append(index)
    level = _bottom_levels(program, successors, cycles)

    def rank(i: int) -> tuple[float, int, int]:
        return urgency[i], -level[i], i

    computes = [i for i, instruction in enumerate(program) if isinstance(instruction, Compute)]
    start, finish = [0] * n, [0] * n
    ready_at: dict[int, int] = {}  # DMA transfers whose predecessors are placed
    for index in range(n):
        if not waiting[index] and not isinstance(program[index], Compute):
            ready_at[index] = 0
    free_dma = free_compute = 0
    next_compute = placed = 0

    def place(index: int, at: int) -> None:
        nonlocal placed
        start[index], finish[index] = at, at + cycles[index]
        placed += 1
        for s in successors[index]:
            waiting[s] -= 1
            if not waiting[s] and not isinstance(program[s], Compute):
                ready_at[s] = max(finish[p] for p in preds[s])

    while placed < n:
        progress = next_compute
        while next_compute < len(computes) and not waiting[computes[next_compute]]:
            index = computes[next_compute]
            at = max([free_compute, *(finish[p] for p in preds[index])])
            place(index, at)
            free_compute = finish[index]
            next_compute += 1
        if not ready_at:
            # Every predecessor comes earlier in the program, so the earliest instruction
            # not placed is always ready: this is a bug.
            assert next_compute > progress, "dma_order: nothing can run"
            continue
        first = min(ready_at, key=rank)
        chosen = first
        if ready_at[first] > free_dma:
            # While the most urgent transfer waits for the compute engine, one that can
            # start now runs if the same compute instruction waits for it, or if it ends
            # in time (any, with keep_busy).
            gap = ready_at[first] - free_dma
            now = [i for i, at in ready_at.items()
                   if at <= free_dma and (keep_busy or urgency[i] == urgency[first] or cycles[i] <= gap)]
            if now:
                chosen = min(now, key=rank)
        at = max(free_dma, ready_at.pop(chosen))
        place(chosen, at)
        free_dma = finish[chosen]
    return start


def _renumbered(
    program: list[Instruction], preds: list[list[int]], starts: list[int]
) -> tuple[list[Instruction] | None, list[int]]:
    """The instructions in order of their starts (each engine's queue order kept), with
    new ids and, per instruction, the dependency on the other queue that implies the
    others; None when that order would put a dependency after its dependent."""
    order = sorted(range(len(program)), key=lambda i: (starts[i], i))
    new_id = [0] * len(program)
    for position, index in enumerate(order):
        new_id[index] = position
    reordered = []
    for index in order:
        instruction = program[index]
        other = [new_id[p] for p in preds[index] if program[p].engine != instruction.engine]
        deps = (max(other),) if other else ()
        if any(new_id[p] >= new_id[index] for p in preds[index]):
            return None, list(range(len(program)))
        reordered.append(dataclasses.replace(instruction, id=new_id[index], deps=deps))
    return reordered, new_id
