"""Run TPU modules as the device will, with the kernels of `kernels.tpu`: float ops
compute in f32 and round to the storage type (f16/bf16) on every store; INT8 ops run
the integer kernels of `kernels.int8` (exact accumulation, multiplier/shift
requantization, LUTs); `tpu.cast` converts between types.

A `tpu.group` runs its region once on whole tensors: a group changes where the
chip keeps tensors and in which order it computes their slices, never their
values, so `tpu.load` and `tpu.store` pass tensors through.
"""

from __future__ import annotations

from typing import Any

from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.ir import Operation

from tpu_xdsl.dialects import Tpu, op_class
from tpu_xdsl.interp.top_interpreter import make_functions
from tpu_xdsl.kernels.tpu import TPU_KERNELS

_TpuKernelFunctions = make_functions(Tpu, TPU_KERNELS, "TpuKernelFunctions")


@register_impls
class TpuFunctions(_TpuKernelFunctions):
    """TPU op implementations (float and INT8)."""

    def __init__(self) -> None:
        self.static_cache: dict[Any, Any] = {}


@register_impls
class TpuGroupFunctions(InterpreterFunctions):
    """tpu.group, tpu.load, tpu.store and tpu.yield."""

    @impl(op_class("tpu.group"))
    def run_group(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return interpreter.run_ssacfg_region(op.regions[0], (), "tpu.group")

    @impl(op_class("tpu.load"))
    def run_load(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return args

    @impl(op_class("tpu.store"))
    def run_store(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return args

    @impl_terminator(op_class("tpu.yield"))
    def run_yield(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return ReturnedValues(args), ()
