"""A layer group's weights loaded in as few transfers as pay: coefficient images.

A group keeps its weights resident, each at its own lane address. Loaded one tensor at a
time, each pays the DMA's issue latency (200 cycles on bm1684x, the time of 11.6 KB of
transfer): ppocr_cls's 136 weights spent more of its run on that latency than on their
bytes. Weights whose lane ranges follow one another without a gap can instead come in
one transfer of their lane image, the bytes every lane holds from the first one's
address to the end of the last, laid out in DDR as [lanes, bytes per lane] when the
model is compiled (TPU-MLIR likewise reorders coefficients at compile time so that a
group's weights take few transfers). An image also moves what the tensors' own loads
skip: the padding that starts each plane on an execution unit, and the lanes a tensor
of fewer channels leaves empty. So each run of adjacent weights is cut into the images
that cost the fewest cycles on the timing model, a weight alone loaded as before
(`_segments`).

`emit_constants` emits the loads (an image's DDR address is not known yet);
`lay_out_coefficients` (once the program is complete) lays the coefficients out again: the
weights some instruction still loads as themselves, then the images, so that no weight is
held twice; the activations move by the difference, and every load points at its data.
The roofline bound counts the weights' own bytes (`TpuModel.weight_bytes`), not the
images'.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tpu_xdsl.backend.codegen.state import CodegenState
from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.device.isa import DdrView, DmaCopy, DmaFill, DmaLoad, DmaStore, Instruction, LocalTensor
from tpu_xdsl.device.simulator import Device
from tpu_xdsl.device.timing import dma_load_cycles

# Where images start and how far activations move: a multiple of this (tpu-assign-memory
# aligns DDR tensors to less).
_ALIGN = 4096


@dataclass
class Image:
    """One image load: its instruction, the weights it holds (their DDR views and local
    tensors) and the lane range it fills."""

    instruction: int
    members: list[tuple[DdrView, LocalTensor]]
    base: int
    span: int


@dataclass
class Constant:
    """A weight to load: its key, where it is in DDR, where it goes in local memory."""

    key: str
    src: DdrView
    dst: LocalTensor


def emit_constants(
    state: CodegenState, constants: Sequence[Constant], deps: Sequence[int], layer: str, group: int,
    images: bool = True,
) -> dict[str, int]:
    """Loads of `constants` (in their order, each image where its first weight was): one
    per image where that is faster (with `images`), one per weight otherwise. Returns
    each key's load."""
    chip = state.chip
    loads: dict[str, int] = {}
    segments = []
    for run in _runs(chip, constants):
        segments.extend(_segments(chip, run) if images else [[c] for c in run])
    position = {c.key: i for i, c in enumerate(constants)}
    for segment in sorted(segments, key=lambda s: min(position[c.key] for c in s)):
        if len(segment) == 1:
            (c,) = segment
            loads[c.key] = state.program.emit(DmaLoad, c.src, c.dst, deps=deps, layer=layer, group=group)
            continue
        base, span = segment[0].dst.addr, _end(chip, segment[-1].dst) - segment[0].dst.addr
        shape = (1, chip.npu_num, 1, span)
        src = DdrView.contiguous(0, "uint8", shape)  # its address: lay_out_coefficients
        dst = LocalTensor(base, "uint8", shape, shape, eu_align=False)
        load = state.program.emit(DmaLoad, src, dst, deps=deps, layer=layer, group=group)
        state.images.append(Image(load, [(c.src, c.dst) for c in segment], base, span))
        for c in segment:
            loads[c.key] = load
    return loads


def _end(chip: ChipConfig, tensor: LocalTensor) -> int:
    return tensor.addr + tensor.lane_bytes(chip.npu_num, chip.eu_bytes)


def _runs(chip: ChipConfig, constants: Sequence[Constant]) -> list[list[Constant]]:
    """The constants by lane address, in runs where each starts where the one before ends
    (rounded up to an execution unit: a group gives each weight its bytes so rounded, so
    the bytes up to the next one are the first one's own)."""
    ordered = sorted(constants, key=lambda c: c.dst.addr)
    runs: list[list[Constant]] = []
    for c in ordered:
        if runs and -(-_end(chip, runs[-1][-1].dst) // chip.eu_bytes) * chip.eu_bytes == c.dst.addr:
            runs[-1].append(c)
        else:
            runs.append([c])
    return runs


def _segments(chip: ChipConfig, run: list[Constant]) -> list[list[Constant]]:
    """`run` cut into consecutive pieces, each loaded as one image (or alone), with the
    fewest DMA cycles in all (dynamic programming over the cut points)."""
    n = len(run)
    alone = [dma_load_cycles(chip, c.dst.nbytes) for c in run]
    best = [0] * (n + 1)
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        best[j], cut[j] = best[j - 1] + alone[j - 1], j - 1
        for i in range(j - 1):
            span = _end(chip, run[j - 1].dst) - run[i].dst.addr
            cost = best[i] + dma_load_cycles(chip, span * chip.npu_num)
            if cost < best[j]:
                best[j], cut[j] = cost, i
    pieces = []
    j = n
    while j > 0:
        pieces.append(run[cut[j]:j])
        j = cut[j]
    return pieces[::-1]


def lay_out_coefficients(
    chip: ChipConfig, images: Sequence[Image], instructions: list[Instruction], coefficients: bytes,
    weights: Sequence[tuple[int, int]], activations: int, kept: Sequence[int] = (),
) -> tuple[bytearray, int, dict[int, int]]:
    """The coefficients laid out again: the weights some instruction still reads from DDR,
    or whose address is in `kept` (a weight the model returns as an output), in their
    order, each on a 64-byte boundary, then the images; every load pointed at its new
    place, every DDR view at or above `activations` (where the activations began) moved by
    the same multiple of 4096 bytes. `weights` are the (address, bytes) of the weights in
    `coefficients`. Returns the new coefficients, how far activations moved, and each kept
    weight's new address by its old one."""
    loaded = {image.instruction for image in images}
    weights = sorted(weights)
    starts = [addr for addr, _ in weights]
    read = {bisect.bisect_right(starts, addr) - 1 for addr in kept}
    for index, instruction in enumerate(instructions):
        if index not in loaded:
            for view in _ddr_reads(instruction):
                if view.addr < activations:
                    read.add(bisect.bisect_right(starts, view.addr) - 1)
    new_addr, at = {}, 0
    for k in sorted(read):
        new_addr[k], at = at, at + -(-weights[k][1] // 64) * 64
    device = Device(chip, max(1, len(coefficients)))
    device.ddr[: len(coefficients)] = np.frombuffer(coefficients, dtype=np.uint8)
    blobs, where = [], {}
    for image in images:
        for src, dst in image.members:
            device.write_local(dst, device.read_ddr(src))
        lanes = device.lmem[:, image.base : image.base + image.span]
        blobs.append((at, lanes.tobytes()))
        lanes[...] = 0
        where[image.instruction] = at
        at += -(-lanes.size // 64) * 64
    moved = -(-(at - activations) // _ALIGN) * _ALIGN
    laid = bytearray(at)
    for k, addr in new_addr.items():
        old, size = weights[k]
        laid[addr : addr + size] = coefficients[old : old + size]
    for addr, blob in blobs:
        laid[addr : addr + len(blob)] = blob

    def move(view: DdrView) -> DdrView:
        if view.addr >= activations:
            return dataclasses.replace(view, addr=view.addr + moved)
        k = bisect.bisect_right(starts, view.addr) - 1
        return dataclasses.replace(view, addr=new_addr[k] + view.addr - weights[k][0])

    for index, instruction in enumerate(instructions):
        if index in where:
            assert isinstance(instruction, DmaLoad)
            src = dataclasses.replace(instruction.src, addr=where[index])
            instructions[index] = dataclasses.replace(instruction, src=src)
        else:
            instructions[index] = _moved(instruction, move)
    return laid, moved, {weights[k][0]: new_addr[k] for k in read}


def _ddr_reads(instruction: Instruction) -> list[DdrView]:
    if isinstance(instruction, (DmaLoad, DmaCopy)):
        return [instruction.src]
    return []


def _moved(instruction: Instruction, move: Callable[[DdrView], DdrView]) -> Instruction:
    """`instruction` with each DDR view moved by `move`."""
    match instruction:
        case DmaLoad():
            return dataclasses.replace(instruction, src=move(instruction.src))
        case DmaStore():
            return dataclasses.replace(instruction, dst=move(instruction.dst))
        case DmaCopy():
            return dataclasses.replace(instruction, src=move(instruction.src), dst=move(instruction.dst))
        case DmaFill():
            return dataclasses.replace(instruction, dst=move(instruction.dst))
    return instruction
