"""Run TPU modules as the device will, with the kernels of `kernels.tpu`: float ops
compute in f32 and round to the storage type (f16/bf16) on every store; INT8 ops run
the integer kernels of `kernels.int8` (exact accumulation, multiplier/shift
requantization, LUTs); `tpu.cast` converts between types.
"""

from __future__ import annotations

from typing import Any

from xdsl.interpreter import register_impls

from tpu_xdsl.dialects import Tpu
from tpu_xdsl.interp.kernels.tpu import TPU_KERNELS
from tpu_xdsl.interp.top_interpreter import make_functions

_TpuKernelFunctions = make_functions(Tpu, TPU_KERNELS, "TpuKernelFunctions")


@register_impls
class TpuFunctions(_TpuKernelFunctions):
    """TPU op implementations (float and INT8)."""

    def __init__(self) -> None:
        self.static_cache: dict[Any, Any] = {}
