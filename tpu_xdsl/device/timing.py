"""Cycles of one instruction on a chip (DESIGN.md section 6; docs/device.md).

- DMA: a fixed latency plus bytes / bandwidth per cycle (DDR -> local memory
  and local -> DDR have their own bandwidths; a DDR -> DDR copy moves its
  bytes at the lower of the two).
- Convolution and matmul: output channels go on the lanes and are rounded up
  to them, input channels to the array's input-channel parallelism, output
  pixels to its pixel parallelism: cycles = ceil(OC / lanes) * ceil(IC / ic_par)
  * taps * ceil(pixels / px_par). A depthwise convolution has one input channel
  per output: a multiply-add per tap on each lane's execution units.
- Everything else works elementwise on the lanes: ceil(C / lanes) * ceil(N*H*W /
  elements per EU) cycles per pass over the output (pooling: a pass per tap, but a
  global pool, one output pixel per plane, is one pass over its input as a reduction;
  transcendental and normalization ops: several passes; INT8 per-channel
  factors along the last axis, `channel_axis`: one more).
- A stem's taps folded into channels inside a layer group (`fold_taps`) move across
  lanes: timed as a DMA move at the DDR -> local rate.
- Compute instructions add a fixed issue latency.
"""

from __future__ import annotations

import math

import numpy as np

from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.device.isa import (
    DTYPE_SIZES,
    Compute,
    DmaCopy,
    DmaFill,
    DmaLoad,
    DmaStore,
    Instruction,
    LocalTensor,
)

# Passes over the output per element for ops that are not a single multiply-add.
_PASSES = {
    "add": 2, "sub": 2, "mul": 2, "scale": 2, "lut": 1, "cast": 1, "requant": 2, "relu": 1,
    "softmax": 6, "log_softmax": 6, "layer_norm": 8, "group_norm": 8, "instance_norm": 8,
    "exp": 4, "log": 4, "tanh": 4, "sigmoid": 4, "silu": 5, "gelu": 6, "hard_swish": 3,
    "hard_sigmoid": 2, "erf": 6, "sqrt": 3, "rsqrt": 3, "reciprocal": 3, "div": 3, "pow": 4,
    "mish": 8, "softplus": 6, "reduce": 1, "interp": 2, "grid_sample": 8, "upsample": 1, "max_pool": 1, "avg_pool": 1,
}


def mode_of(dtype: str) -> str:
    if dtype in ("int8", "uint8", "int16", "int32"):
        return "INT8"
    return {"float16": "F16", "bfloat16": "BF16", "float32": "F32"}[dtype]


def dma_load_cycles(chip: ChipConfig, nbytes: int) -> int:
    """DDR -> local memory."""
    return chip.dma_latency + math.ceil(nbytes / (chip.ddr_to_lmem_bytes_per_s / chip.clock_hz))


def dma_store_cycles(chip: ChipConfig, nbytes: int) -> int:
    """Local memory -> DDR (a fill writes at this rate too)."""
    return chip.dma_latency + math.ceil(nbytes / (chip.lmem_to_ddr_bytes_per_s / chip.clock_hz))


def dma_cycles(chip: ChipConfig, instruction: Instruction) -> int:
    match instruction:
        case DmaLoad():
            return dma_load_cycles(chip, instruction.dst.nbytes)
        case DmaStore():
            return dma_store_cycles(chip, instruction.src.nbytes)
        case DmaCopy():
            per_cycle = min(chip.ddr_to_lmem_bytes_per_s, chip.lmem_to_ddr_bytes_per_s) / chip.clock_hz
            return chip.dma_latency + math.ceil(instruction.src.nbytes / per_cycle)
        case DmaFill():
            return dma_store_cycles(chip, instruction.dst.nbytes)
    raise TypeError(f"not a DMA instruction: {type(instruction).__name__}")


def _eu_elements(chip: ChipConfig, dtype: str) -> int:
    return max(1, chip.eu_bytes // DTYPE_SIZES[dtype])


def _elementwise(chip: ChipConfig, out: LocalTensor, passes: int) -> int:
    n, c, h, w = out.shape4
    return passes * math.ceil(c / chip.npu_num) * math.ceil(n * h * w / _eu_elements(chip, out.dtype))


# Recurrent layers (backend/recurrent.py): the operand holding the weight rows, and the
# elementwise passes of the gate math per output element (3 sigmoids and 2 tanh at 4 each
# and the multiply-adds of an LSTM cell, ...).
_RECURRENT = {"rnn_project": (1, 1), "lstm_cell": (3, 26), "gru_cell": (3, 22), "gru_gates": (3, 10),
              "gru_update": (4, 9)}


def _recurrent_cycles(chip: ChipConfig, instruction: Compute) -> int:
    """Gate rows of the block's units on the lanes, times the dot products' input channels
    at the array's parallelism, then the elementwise gate math on [units, batch]."""
    weights_at, passes = _RECURRENT[instruction.kind]
    weights = instruction.inputs[weights_at]
    out = instruction.outputs[0]
    assert weights is not None
    mode = mode_of(weights.dtype)
    units = out.view[1] if instruction.kind == "rnn_project" else out.view[0]
    if instruction.kind == "rnn_project":
        steps, _, gates, batch = out.view
        pixels, size, vector = steps * batch, weights.view[1] // gates, instruction.inputs[0]
    else:
        vector = instruction.inputs[1]
        batch = out.view[1]
        size = vector.view[0] if vector is not None else 0
        gates = weights.view[1] // max(1, size) if size else 0
        pixels = batch
    lane_rows = math.ceil(units / chip.npu_num)
    matmul = 0 if vector is None else (
        lane_rows * gates * math.ceil(size / chip.ic_parallel.get(mode, 1))
        * math.ceil(pixels / chip.pixel_parallel.get(mode, 1))
    )
    elementwise = passes * lane_rows * math.ceil(out.size // max(1, units) / _eu_elements(chip, "float32"))
    return matmul + elementwise


# Ops that move elements across lanes in local memory, inside a layer group: a stem's taps
# folded into channels. The chip does that with its DMA engine, local to local; no public
# figure gives that rate, so the device model takes the DDR -> local one.
LOCAL_MOVES = frozenset({"fold_taps"})


def local_move_cycles(chip: ChipConfig, nbytes: int) -> int:
    """A local-to-local move of `nbytes`: timed as a DDR -> local load of as many bytes."""
    return dma_load_cycles(chip, nbytes)


def compute_cycles(chip: ChipConfig, instruction: Compute) -> int:
    out = instruction.outputs[0]
    if instruction.kind in _RECURRENT:
        return chip.compute_latency + _recurrent_cycles(chip, instruction)
    data = instruction.inputs[0] or out
    mode = mode_of(data.dtype)
    lanes = chip.npu_num
    attrs = instruction.attrs
    kind = instruction.kind
    if kind in ("conv", "deconv", "matmul"):
        weights = instruction.inputs[1]
        assert weights is not None
        if kind == "matmul":
            out_channels = out.view[-1]
            in_channels = data.view[-1]
            pixels = int(np.prod(out.view[:-1]))
            taps, groups = 1, 1
        else:
            groups = int(attrs.get("group", 1))
            out_channels = out.view[1]
            in_channels = data.view[1] // groups
            pixels = int(np.prod(out.view[:1] + out.view[2:]))
            taps = int(np.prod(attrs["kernel_shape"]))
        if groups > 1 and in_channels == 1 and out_channels == groups:  # depthwise
            cycles = math.ceil(out_channels / lanes) * taps * math.ceil(pixels / _eu_elements(chip, data.dtype))
        else:
            per_group = math.ceil(out_channels / groups)
            cycles = groups * (
                math.ceil(per_group / lanes)
                * math.ceil(in_channels / chip.ic_parallel.get(mode, 1))
                * taps
                * math.ceil(pixels / chip.pixel_parallel.get(mode, 1))
            )
        return chip.compute_latency + cycles
    if kind in LOCAL_MOVES:
        return chip.compute_latency + local_move_cycles(chip, out.nbytes)
    passes = _PASSES.get(kind, 1)
    if int(attrs.get("axis" if kind == "requant" else "channel_axis", 1) or 1) != 1:
        # Per-channel factors along the last axis vary inside each lane (lanes hold axis 1):
        # one more pass reads them as a vector instead of one value per lane.
        passes += 1
    if kind in ("max_pool", "avg_pool"):
        if _is_global_pool(instruction):
            return chip.compute_latency + _elementwise(chip, data, 1)
        passes = int(np.prod(attrs["kernel_shape"]))
    if kind == "reduce":
        return chip.compute_latency + _elementwise(chip, data, 1)
    return chip.compute_latency + _elementwise(chip, out, passes)


def _is_global_pool(instruction: Compute) -> bool:
    """A pool with one output pixel per plane: its window covers the whole input plane, so
    it is a reduction, one pass over the input as `reduce` (a pass per tap over the output
    would use one of each execution unit's elements)."""
    out = instruction.outputs[0]
    return instruction.kind in ("max_pool", "avg_pool") and out.shape4[2] * out.shape4[3] == 1


def is_depthwise(instruction: Compute) -> bool:
    """A convolution with one input channel per group and one output channel per group."""
    if instruction.kind not in ("conv", "deconv"):
        return False
    groups = int(instruction.attrs.get("group", 1))
    data, out = instruction.inputs[0], instruction.outputs[0]
    return groups > 1 and data is not None and data.view[1] == groups and out.view[1] == groups


def engine_of(instruction: Compute) -> str:
    """The unit an instruction's work runs on: `array` (the MAC array: convolutions and
    matmuls), `vector` (the lanes' execution units: depthwise convolutions and every
    elementwise, pooling and normalization op)."""
    if instruction.kind in ("conv", "deconv", "matmul") and not is_depthwise(instruction):
        return "array"
    return "vector"


def ideal_compute_cycles(chip: ChipConfig, instruction: Compute) -> float:
    """The fewest cycles the instruction's work takes on its own unit with every lane and
    execution unit busy (no rounding up to lanes or parallelism, no issue latency): MACs at
    the array's peak for convolutions and matmuls, MACs at lanes x elements per EU for a
    depthwise convolution (the vector path), passes x elements at lanes x elements per EU
    for everything else. Summed over a program, a lower bound that knows each op's engine."""
    out = instruction.outputs[0]
    data = instruction.inputs[0] or out
    vector_rate = chip.npu_num * _eu_elements(chip, data.dtype)
    if instruction.kind in _RECURRENT:  # mixed array and vector work: as timed
        return float(compute_cycles(chip, instruction) - chip.compute_latency)
    if instruction.kind in ("conv", "deconv", "matmul"):
        if is_depthwise(instruction):
            return instruction.macs / vector_rate
        return instruction.macs / chip.macs_per_cycle.get(mode_of(data.dtype), 1)
    if instruction.kind in LOCAL_MOVES:  # moves, no work of any unit
        return 0.0
    passes = _PASSES.get(instruction.kind, 1)
    if instruction.kind in ("max_pool", "avg_pool") and not _is_global_pool(instruction):
        passes = int(np.prod(instruction.attrs["kernel_shape"]))
    swept = data if instruction.kind == "reduce" or _is_global_pool(instruction) else out
    return passes * swept.size / (chip.npu_num * _eu_elements(chip, swept.dtype))


def cycles(chip: ChipConfig, instruction: Instruction) -> int:
    if isinstance(instruction, Compute):
        return compute_cycles(chip, instruction)
    return dma_cycles(chip, instruction)
