"""What every part of codegen shares: the program being emitted, where each value lives
in DDR, and which instruction completes it.

DDR hazards need no tokens: every DDR access is on the DMA queue, which runs in
program order. Local-memory hazards between the two engines are explicit
dependencies (`deps`). (`dma_order` reorders the queue afterwards and finds every
hazard itself.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.backend.slicing import Box
from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.device.isa import DTYPE_SIZES, DdrView, Instruction
from tpu_xdsl.device.model_file import GroupDesc
from tpu_xdsl.dialects.attr_values import op_attrs
from tpu_xdsl.dialects.module import tensor_names
from tpu_xdsl.errors import TpuXdslError


class CodegenError(TpuXdslError):
    """An op cannot be compiled for the chip (too large for local memory, unsupported)."""


@dataclass
class DdrTensor:
    """A value's place in DDR."""

    addr: int
    shape: tuple[int, ...]
    dtype: str

    def view(self) -> DdrView:
        return DdrView.contiguous(self.addr, self.dtype, self.shape)


@dataclass
class Program:
    """The instructions emitted so far; `emit` appends one and returns its id."""

    chip: ChipConfig
    instructions: list[Instruction] = field(default_factory=list)

    def emit(self, cls, *args, deps: Sequence[int] = (), layer: str = "", **kwargs) -> int:
        index = len(self.instructions)
        self.instructions.append(cls(index, *args, deps=tuple(sorted(set(deps))), layer=layer, **kwargs))
        return index


@dataclass
class CodegenState:
    """What the emitters write into: the chip, the program, each value's DDR place, the
    instruction whose write completes each value, the layer groups emitted so far
    (instructions of group i carry group=i) and the coefficient images their weights
    load from (`constants`)."""

    chip: ChipConfig
    program: Program
    places: dict[SSAValue, DdrTensor] = field(default_factory=dict)
    written_by: dict[SSAValue, int] = field(default_factory=dict)
    group_descs: list[GroupDesc] = field(default_factory=list)
    images: list[Any] = field(default_factory=list)  # constants.Image, placed once the program is complete


def ddr_addresses(op: Operation) -> list[int]:
    """The DDR addresses tpu-assign-memory gave the op's results."""
    attr = op.attributes.get("ddr")
    if not isinstance(attr, ArrayAttr):
        raise CodegenError(
            f"'{op.name}' ({', '.join(tensor_names(op))}) has no DDR address: run tpu-assign-memory first"
        )
    return [a.value.data for a in attr.data if isinstance(a, IntegerAttr)]


def int_attr(op: Operation, name: str) -> int:
    attr = op.attributes.get(name)
    if not isinstance(attr, IntegerAttr):
        raise CodegenError(f"'{op.name}' has no integer attribute {name}")
    return int(attr.value.data)


def dtype_size(dtype: str) -> int:
    return DTYPE_SIZES[dtype]


def nbytes(place: DdrTensor) -> int:
    return int(np.prod(place.shape)) * dtype_size(place.dtype)


def starts_sizes(box: Box) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(s for s, _ in box), tuple(n for _, n in box)


def op_macs(kind: str, op: Operation) -> int:
    """The multiply-accumulates of a conv, deconv or matmul (TOP or TPU op; 0 for others)."""
    if kind not in ("conv", "deconv", "matmul"):
        return 0
    out = op.results[0].type.get_shape()  # type: ignore[attr-defined]
    if kind == "matmul":
        k = op.operands[0].type.get_shape()[-1]  # type: ignore[attr-defined]
        return int(np.prod(out)) * int(k)
    w = op.operands[1].type.get_shape()  # type: ignore[attr-defined]
    if kind == "conv":
        per_output = int(np.prod(w[1:]))
    else:
        per_output = int(np.prod(w[2:])) * int(w[0]) // max(1, int(op_attrs(op).get("group", 1)))
    if kind == "deconv":
        x = op.operands[0].type.get_shape()  # type: ignore[attr-defined]
        return int(np.prod(x)) * int(np.prod(w[1:]))
    return int(np.prod(out)) * per_output
