"""Text about a model for `tpu-xdsl info` and the debugger: a summary, every instruction
one line each, and the DDR memory map."""

from __future__ import annotations

import hashlib
from collections import Counter

from tpu_xdsl.device.isa import DTYPE_SIZES, INSTRUCTIONS
from tpu_xdsl.device.model_file.encode import ENCODE, dumps, json_value
from tpu_xdsl.device.model_file.format import OPERANDS
from tpu_xdsl.device.model_file.model import IoDesc, TpuModel


def model_summary(model: TpuModel) -> list[str]:
    """Lines describing the model, for `tpu-xdsl info`."""
    by_type = Counter(type(i).__name__ for i in model.instructions)
    by_engine = Counter(i.engine for i in model.instructions)
    lines = [
        f"model: {model.name}",
        f"chip: {model.chip}",
        f"mode: {model.mode}",
        f"format version: {model.version}",
        f"instructions: {len(model.instructions)} ("
        + ", ".join(f"{op} {by_type[op]}" for op in INSTRUCTIONS if by_type[op])
        + ")",
        "engines: " + ", ".join(f"{engine} {by_engine[engine]}" for engine in ("dma", "compute")),
        f"DDR bytes: {len(model.coefficients):,} coefficients / {model.ddr_bytes:,} total",
    ]
    for role, descs in (("input", model.inputs), ("output", model.outputs)):
        for d in descs:
            shape = "x".join(str(s) for s in d.shape) or "scalar"
            lines.append(f"{role} {d.name}: {shape} {d.dtype} at DDR 0x{d.addr:x}, {_quantization(d)}")
    lines.append(f"named tensors: {len(model.tensors)}")
    lines.append(f"layer groups: {len(model.groups)}")
    return lines


def _quantization(desc: IoDesc) -> str:
    if desc.scales is not None:
        return f"per-channel scales ({len(desc.scales)} channels), zero point {desc.zero_point}"
    if desc.scale is not None:
        return f"scale {desc.scale:.6g}, zero point {desc.zero_point}"
    return "not quantized"


def instruction_lines(model: TpuModel) -> list[str]:
    """Every instruction, one line each, for `tpu-xdsl info --instructions`: its id, engine,
    kind, layer, group and dependencies, then its operands as the file encodes them
    (DDR views [addr, dtype, shape, strides], local tensors [addr, dtype, shape4, view,
    eu_align]), and the SHA-256 of the coefficients they read: two models whose lines are
    equal run the same program on the same data."""
    lines = [f"coefficients: {len(model.coefficients)} bytes, sha256 {hashlib.sha256(model.coefficients).hexdigest()}"]
    for instruction in model.instructions:
        op = type(instruction).__name__
        operands = []
        for name, kind in OPERANDS[op]:
            value = getattr(instruction, name)
            encoded = json_value(value, "") if kind == "attrs" else ENCODE[kind](value)
            operands.append(f"{name}={dumps(encoded)}")
        lines.append(
            f"{instruction.id:>6} {instruction.engine:<7} {op:<8} {instruction.layer} group={instruction.group} "
            f"deps={dumps(list(instruction.deps))} " + " ".join(operands)
        )
    return lines


def memory_map_lines(model: TpuModel) -> list[str]:
    """The DDR map for `tpu-xdsl info` and the debugger: coefficients, then every named
    tensor, input and output by address."""
    import numpy as np

    lines = ["memory map (DDR):",
             f"  {0:#012x} - {len(model.coefficients):#012x}  coefficients ({len(model.coefficients)} bytes)"]
    named = {d.name for d in model.tensors}
    entries = [*model.tensors, *(d for d in (*model.inputs, *model.outputs) if d.name not in named)]
    for desc in sorted(entries, key=lambda d: (d.addr, d.name)):
        size = int(np.prod(desc.shape)) * DTYPE_SIZES[desc.dtype] if desc.shape else DTYPE_SIZES[desc.dtype]
        lines.append(f"  {desc.addr:#012x} - {desc.addr + size:#012x}  {desc.name} {list(desc.shape)} {desc.dtype}")
    return lines
