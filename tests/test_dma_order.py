"""`order_dma`: the DMA queue list-scheduled on the timing model, the program's results unchanged.

Programs are written by hand or drawn at random over a few buffers; the reference for
what a program computes is the program as written, run on the device model.
"""

from __future__ import annotations

import numpy as np
import pytest

from tpu_xdsl.backend.codegen.dma_order import order_dma
from tpu_xdsl.device.chip import BM1684X, CV183X
from tpu_xdsl.device.isa import Compute, DdrView, DmaLoad, DmaStore, Instruction, LocalTensor
from tpu_xdsl.device.simulator import Device, schedule

HALF_SUM = {"multiplier": [1 << 30, 1 << 30], "rshift": [31]}  # (a + b) / 2


def _local(addr: int, shape: tuple[int, int, int, int]) -> LocalTensor:
    return LocalTensor(addr, "int8", shape, shape)


def _run(program: list[Instruction], ddr: np.ndarray, chip=BM1684X) -> np.ndarray:
    device = Device(chip, ddr.size)
    device.ddr[:] = ddr
    device.execute(program)
    return device.ddr.copy()


def test_a_store_the_next_load_waits_for_goes_before_weights_needed_later():
    """As codegen emits a layer group: the next group's two weights ahead, then this
    group's store. The store (and the load of its result) is what the next compute waits
    for; the second weight is needed only by the compute after it."""
    shape = (1, 64, 16, 64)  # 64 KiB: about 1.1 us to load at 58 GB/s
    size = int(np.prod(shape))
    x, w1, w2, y, out = (DdrView.contiguous(i * size, "int8", shape) for i in range(5))
    lx, ly, lw1, lw2, lv, lu, lo = (_local(i * 1024, shape) for i in range(7))
    program = [
        DmaLoad(0, x, lx),
        Compute(1, "add", (lx, lx), (ly,), HALF_SUM, deps=(0,)),
        DmaLoad(2, w1, lw1),
        DmaLoad(3, w2, lw2),
        DmaStore(4, ly, y, deps=(1,)),
        DmaLoad(5, y, lv),
        Compute(6, "add", (lv, lw1), (lu,), HALF_SUM, deps=(2, 5)),
        Compute(7, "add", (lu, lw2), (lo,), HALF_SUM, deps=(3, 6)),
        DmaStore(8, lo, out, deps=(7,)),
    ]
    reordered, new_id = order_dma(BM1684X, program)
    assert schedule(BM1684X, reordered).total_cycles < schedule(BM1684X, program).total_cycles
    assert new_id[3] > new_id[5], "the weight needed later moves behind the load the next compute waits for"
    assert new_id[4] < new_id[5]
    rng = np.random.default_rng(0)
    ddr = np.zeros(6 * size, dtype=np.uint8)
    ddr[: 3 * size] = rng.integers(0, 256, 3 * size)
    np.testing.assert_array_equal(_run(reordered, ddr), _run(program, ddr))


def test_a_program_without_compute_or_already_in_order_is_returned_as_it_is():
    shape = (1, 64, 1, 64)
    program = [DmaLoad(0, DdrView.contiguous(0, "int8", shape), _local(0, shape)),
               DmaStore(1, _local(0, shape), DdrView.contiguous(4096, "int8", shape), deps=(0,))]
    assert order_dma(BM1684X, program) == (program, [0, 1])
    program = [DmaLoad(0, DdrView.contiguous(0, "int8", shape), _local(0, shape)),
               Compute(1, "add", (_local(0, shape), _local(0, shape)), (_local(64, shape),), HALF_SUM, deps=(0,)),
               DmaStore(2, _local(64, shape), DdrView.contiguous(4096, "int8", shape), deps=(1,))]
    assert order_dma(BM1684X, program) == (program, [0, 1, 2])


def _random_program(rng: np.random.Generator, length: int) -> list[Instruction]:
    """Loads, stores and adds over 6 local buffers and 6 DDR slots of [1, 64, h, 64] int8,
    h drawn per instruction so transfers and computes differ in length; every hazard
    between the engines carries a dependency (as codegen emits them), those between DMA
    transfers rely on program order (as DDR hazards do in codegen's programs)."""
    rows = (1, 2, 4, 8)
    shape_of = {}  # buffer or slot -> its rows (a buffer's rows fix its tensor's shape)
    program: list[Instruction] = []
    footprint: list[tuple[str, set[tuple[str, int]], set[tuple[str, int]]]] = []
    written = {("ddr", s) for s in range(3)}  # the inputs
    for s in range(6):
        shape_of["ddr", s] = 8
    for index in range(length):
        kind = rng.choice(["load", "store", "add"], p=[0.4, 0.25, 0.35])
        buffers_written = [b for b in range(6) if ("lmem", b) in written]
        if kind == "store" and buffers_written:
            b = int(rng.choice(buffers_written))
            s = int(rng.integers(3, 6))
            h = shape_of["lmem", b]
            instruction: Instruction = DmaStore(index, _local(b * 1024, (1, 64, h, 64)),
                                                DdrView.contiguous(s * 65536, "int8", (1, 64, h, 64)))
            reads, writes = {("lmem", b)}, {("ddr", s)}
        elif kind == "add" and buffers_written:
            a, c = (int(v) for v in rng.choice(buffers_written, 2))
            h = shape_of["lmem", a]
            if shape_of["lmem", c] != h:
                c = a
            out = int(rng.integers(0, 6))
            instruction = Compute(index, "add", (_local(a * 1024, (1, 64, h, 64)), _local(c * 1024, (1, 64, h, 64))),
                                  (_local(out * 1024, (1, 64, h, 64)),), HALF_SUM)
            reads, writes = {("lmem", a), ("lmem", c)}, {("lmem", out)}
            shape_of["lmem", out] = h
        else:
            s = int(rng.choice([s for s in range(6) if ("ddr", s) in written]))
            b = int(rng.integers(0, 6))
            h = int(rng.choice(rows))
            instruction = DmaLoad(index, DdrView.contiguous(s * 65536, "int8", (1, 64, h, 64)),
                                  _local(b * 1024, (1, 64, h, 64)))
            reads, writes = {("ddr", s)}, {("lmem", b)}
            shape_of["lmem", b] = h
        deps = [j for j, (engine, r, w) in enumerate(footprint)
                if engine != instruction.engine and (w & (reads | writes) or r & writes)]
        instruction.deps = tuple(deps)
        footprint.append((instruction.engine, reads, writes))
        written |= writes
        program.append(instruction)
    return program


@pytest.mark.parametrize("chip", [BM1684X, CV183X], ids=lambda c: c.name)
def test_reordered_random_programs_compute_what_they_computed(chip):
    rng = np.random.default_rng(7)
    moved = 0
    for _ in range(40):
        program = _random_program(rng, 40)
        reordered, new_id = order_dma(chip, program)
        assert schedule(chip, reordered).total_cycles <= schedule(chip, program).total_cycles
        assert sorted(new_id) == list(range(len(program)))
        if reordered is program:
            continue
        moved += 1
        ddr = np.zeros(6 * 65536, dtype=np.uint8)
        ddr[: 3 * 65536] = rng.integers(0, 256, 3 * 65536)
        np.testing.assert_array_equal(_run(reordered, ddr, chip), _run(program, ddr, chip))
        computes = [new_id[i.id] for i in program if isinstance(i, Compute)]
        assert computes == sorted(computes), "the compute queue keeps its order"
    assert moved >= 10, f"only {moved} of 40 random programs were reordered"
