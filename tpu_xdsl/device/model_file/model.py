"""What a `.tpumodel` file holds: the compiled model and its descriptors (no xDSL)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tpu_xdsl.device.isa import Instruction
from tpu_xdsl.device.model_file.format import FORMAT_VERSION
from tpu_xdsl.errors import TpuXdslError


class ModelFileError(TpuXdslError):
    """A .tpumodel file is missing, corrupt, truncated, of an unknown version, or for another chip."""


@dataclass(frozen=True)
class IoDesc:
    """A model input or output: where it lives in DDR and how it is quantized.

    `scale`/`zero_point` for an INT8 tensor quantized per tensor, `scales` (along
    `channel_axis`, 1 unless a features-last tensor's last axis) for one quantized
    per channel; both absent for float tensors."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    addr: int
    scale: float | None = None
    zero_point: int = 0
    scales: tuple[float, ...] | None = None
    channel_axis: int = 1


@dataclass(frozen=True)
class TensorDesc:
    """A named tensor of the program (for debugging and --dump-all): its DDR place and
    the instruction whose write completes it."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    addr: int
    written_by: int
    scale: float | None = None
    zero_point: int = 0
    scales: tuple[float, ...] | None = None
    channel_axis: int = 1


@dataclass(frozen=True)
class GroupDesc:
    """A layer group: ops run slice by slice out of local memory, their intermediate
    tensors never in DDR. `name` is the last op's tensor name, `ops` the tensor names
    of its ops in program order; the output is cut into `n_slices` (batch) x
    `h_slices` (height) steps. For profiles: instructions carry the group's index."""

    name: str
    ops: tuple[str, ...]
    n_slices: int
    h_slices: int


@dataclass
class TpuModel:
    """A compiled model: the instruction streams (one program, each instruction names its
    engine), the coefficients placed at DDR address 0, the DDR the program needs, its
    inputs, outputs, named tensors and layer groups."""

    name: str
    chip: str
    mode: str
    instructions: list[Instruction]
    coefficients: bytes
    ddr_bytes: int
    inputs: list[IoDesc]
    outputs: list[IoDesc]
    tensors: list[TensorDesc] = field(default_factory=list)
    groups: list[GroupDesc] = field(default_factory=list)
    version: int = FORMAT_VERSION
    # The image preprocessing the model was imported with (TOP's module.preprocess), so
    # that `tpu-xdsl run` can feed it images; None when not recorded.
    preprocess: dict[str, Any] | None = None
    # The bytes of the model's weights: the coefficients but for the lane images of the
    # weights layer groups load in one transfer (codegen's `constants`), which repeat them
    # in another layout. None: all of the coefficients.
    weight_bytes: int | None = None

    @property
    def own_weight_bytes(self) -> int:
        """The bytes of the weights themselves (what the roofline bound counts)."""
        return len(self.coefficients) if self.weight_bytes is None else self.weight_bytes
