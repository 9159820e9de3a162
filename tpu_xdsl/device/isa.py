"""The instruction set of the Python TPU: plain dataclasses, serializable to JSON.

Two engines run concurrently, each taking its instructions in program order:

- DMA (`DmaLoad` DDR -> local memory, `DmaStore` local -> DDR, `DmaCopy`
  DDR -> DDR, `DmaFill` a constant into DDR);
- compute (`Compute`: one kernel on local-memory tensors).

An instruction starts when its engine is free and every instruction in its
`deps` has finished: the dependency tokens between the two queues (VTA's
push/pop tokens, as explicit edges). The compiler makes the dependencies
complete; the simulator checks that none points forward.

DDR data is addressed through `DdrView`s (numpy's as_strided: shape and
strides in elements, strides may be 0 to broadcast or permuted to transpose),
local data through `LocalTensor`s in the lane layout of DESIGN.md section 6.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tpu_xdsl.errors import TpuXdslError

DTYPE_SIZES = {"int8": 1, "uint8": 1, "int16": 2, "int32": 4, "float16": 2, "bfloat16": 2, "float32": 4}


class IllegalProgramError(TpuXdslError):
    """A program breaks a rule of the device (an address out of range, a misaligned
    tensor, a dependency on a later instruction): the message names the instruction."""


def where(instruction: Instruction, position: int | None = None) -> str:
    """`instruction 3 (DmaLoad, layer conv1)` for messages: a layer name of a model file with
    control characters (a newline would split the one-line error) is shown quoted."""
    layer = instruction.layer or "-"
    if not layer.isprintable():
        layer = repr(layer)
    index = instruction.id if position is None else position
    return f"instruction {index} ({type(instruction).__name__}, layer {layer})"


def numpy_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def dtype_name(dtype: np.dtype) -> str:
    name = str(np.dtype(dtype))
    if name not in DTYPE_SIZES:
        raise ValueError(f"the device holds no {name} tensors")
    return name


@dataclass(frozen=True)
class DdrView:
    """Elements of DDR: `shape` and `strides` (in elements) from byte address `addr`."""

    addr: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @staticmethod
    def contiguous(addr: int, dtype: str, shape: tuple[int, ...] | list[int]) -> DdrView:
        shape = tuple(int(d) for d in shape)
        strides, step = [], 1
        for d in reversed(shape):
            strides.append(step)
            step *= d
        return DdrView(addr, dtype, shape, tuple(reversed(strides)))

    @property
    def size(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1

    @property
    def nbytes(self) -> int:
        return self.size * DTYPE_SIZES[self.dtype]

    def box(self, starts: tuple[int, ...], sizes: tuple[int, ...]) -> DdrView:
        """The sub-box starting at `starts` (per dim) of `sizes` elements."""
        offset = sum(s * st for s, st in zip(starts, self.strides, strict=True))
        return DdrView(self.addr + offset * DTYPE_SIZES[self.dtype], self.dtype, tuple(sizes), self.strides)

    def permuted(self, order: tuple[int, ...]) -> DdrView:
        shape, strides = tuple(self.shape[i] for i in order), tuple(self.strides[i] for i in order)
        return DdrView(self.addr, self.dtype, shape, strides)

    def span(self) -> tuple[int, int]:
        """The lowest and one past the highest byte address the view touches."""
        size = DTYPE_SIZES[self.dtype]
        if self.size == 0:
            return self.addr, self.addr
        low = self.addr + sum(min(0, (d - 1) * s) for d, s in zip(self.shape, self.strides)) * size
        high = self.addr + (sum(max(0, (d - 1) * s) for d, s in zip(self.shape, self.strides)) + 1) * size
        return low, high


@dataclass(frozen=True)
class LocalTensor:
    """A tensor in local memory, at lane address `addr` in every lane.

    `shape4` [N, C, H, W] places channel c in lane c % npu_num; each lane holds
    [N, ceil(C / npu_num), H, W], each (n, c) plane of H*W elements starting on
    an execution-unit boundary when `eu_align`. `view` is the kernel's logical
    shape (same element count, row-major).
    """

    addr: int
    dtype: str
    shape4: tuple[int, int, int, int]
    view: tuple[int, ...]
    eu_align: bool = True

    def __post_init__(self) -> None:
        if math.prod(self.shape4) != math.prod(self.view):
            raise IllegalProgramError(
                f"local tensor {list(self.shape4)} and its view {list(self.view)} hold different numbers of elements"
            )

    def plane_bytes(self, eu_bytes: int) -> int:
        _, _, h, w = self.shape4
        raw = h * w * DTYPE_SIZES[self.dtype]
        return -(-raw // eu_bytes) * eu_bytes if self.eu_align else raw

    def lane_bytes(self, npu_num: int, eu_bytes: int) -> int:
        """Bytes this tensor occupies in each lane."""
        n, c, _, _ = self.shape4
        return n * -(-c // npu_num) * self.plane_bytes(eu_bytes)

    @property
    def size(self) -> int:
        n, c, h, w = self.shape4
        return n * c * h * w

    @property
    def nbytes(self) -> int:
        return self.size * DTYPE_SIZES[self.dtype]


@dataclass
class Instruction:
    """What every instruction has: its index in the program, the engine that runs it,
    the instructions it waits for, the layer (tensor name) it belongs to, and the
    index of its layer group in the model's `groups` (-1 for none; profiles only)."""

    id: int
    deps: tuple[int, ...] = field(default=(), kw_only=True)
    layer: str = field(default="", kw_only=True)
    group: int = field(default=-1, kw_only=True)

    engine = "dma"


@dataclass
class DmaLoad(Instruction):
    """DDR -> local memory: the elements of `src` in row-major order fill `dst`."""

    src: DdrView
    dst: LocalTensor


@dataclass
class DmaStore(Instruction):
    """Local memory -> DDR: the elements of `src` in row-major order go to `dst`."""

    src: LocalTensor
    dst: DdrView


@dataclass
class DmaCopy(Instruction):
    """DDR -> DDR: the elements of `src` in row-major order go to `dst` (reshapes,
    transposes through strides, slices, concatenation, broadcasts with stride 0)."""

    src: DdrView
    dst: DdrView


@dataclass
class DmaFill(Instruction):
    """A constant into every element of `dst` (padding)."""

    dst: DdrView
    value: float


@dataclass
class Compute(Instruction):
    """One kernel (`kind`, as the TPU interpreter names them) on local tensors: inputs
    (None for an absent operand), outputs, and the op's attributes for this slice."""

    kind: str
    inputs: tuple[LocalTensor | None, ...]
    outputs: tuple[LocalTensor, ...]
    attrs: dict[str, Any]
    macs: int = field(default=0, kw_only=True)

    engine = "compute"


INSTRUCTIONS = {cls.__name__: cls for cls in (DmaLoad, DmaStore, DmaCopy, DmaFill, Compute)}


def to_json(instruction: Instruction) -> dict[str, Any]:
    data = asdict(instruction)
    data["op"] = type(instruction).__name__
    return data


def from_json(data: dict[str, Any]) -> Instruction:
    data = dict(data)
    cls = INSTRUCTIONS[data.pop("op")]

    def ddr(d: dict) -> DdrView:
        return DdrView(d["addr"], d["dtype"], tuple(d["shape"]), tuple(d["strides"]))

    def local(d: dict | None) -> LocalTensor | None:
        if d is None:
            return None
        return LocalTensor(d["addr"], d["dtype"], tuple(d["shape4"]), tuple(d["view"]), d["eu_align"])  # type: ignore[arg-type]

    data["deps"] = tuple(data.get("deps", ()))
    for key in ("src", "dst"):
        if key in data:
            data[key] = local(data[key]) if "shape4" in data[key] else ddr(data[key])
    if cls is Compute:
        data["inputs"] = tuple(local(d) for d in data["inputs"])
        data["outputs"] = tuple(local(d) for d in data["outputs"])
    return cls(**data)
