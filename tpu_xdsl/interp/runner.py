"""Run a TOP or TPU module on numpy inputs; capture named tensors through listeners."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.interpreter import Interpreter, PythonValues
from xdsl.interpreters.func import FuncFunctions
from xdsl.ir import Operation

from tpu_xdsl.calibration.model_scales import (
    is_model_calibrated,
    module_needs_asymmetric,
)
from tpu_xdsl.dialects.module import input_names, main_func, output_names, tensor_names
from tpu_xdsl.dialects.quant_types import qparams_of
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.feeds import accepts_dtype, held_feed, in_input_order
from tpu_xdsl.interp.plan import ExecutionPlan
from tpu_xdsl.interp.top_interpreter import ModelRounding, TopFunctions
from tpu_xdsl.interp.tpu_interpreter import TpuFunctions, TpuGroupFunctions
from tpu_xdsl.kernels.dtypes import numpy_dtype
from tpu_xdsl.kernels.malloc import keep_freed_memory
from tpu_xdsl.kernels.quant import ChannelQParams, QParams
from tpu_xdsl.limits import check_tensor_size
from tpu_xdsl.weights import weights_of


class InputMismatchError(TpuXdslError):
    """Inputs given to a run do not match the model's inputs."""


class TensorCapture(Interpreter.Listener):
    """Keeps every named tensor an op produces (`--dump-all`)."""

    def __init__(self, keep: Callable[[str], bool] = lambda name: True):
        self.keep = keep
        self.tensors: dict[str, np.ndarray] = {}

    def did_interpret_op(self, op: Operation, results: PythonValues) -> None:
        if op.name in ("top.weight", "top.none"):
            return
        for name, value in zip(tensor_names(op), results):
            if value is not None and self.keep(name):
                self.tensors[name] = np.asarray(value)


class InputSignature:
    """@main's inputs (names, shapes, dtypes, quantization), read once from the module,
    to match the arrays given to many runs."""

    def __init__(self, module: ModuleOp):
        self.names = input_names(module)
        arg_types = main_func(module).function_type.inputs.data
        self.types = [
            (
                tuple(arg_type.get_shape()),  # type: ignore[attr-defined]
                numpy_dtype(arg_type.element_type),  # type: ignore[attr-defined]
                qparams_of(arg_type),
            )
            for arg_type in arg_types
        ]

    def arrange(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Match inputs by name (or, for a single input, whatever its key) to @main's arguments."""
        values = in_input_order(self.names, inputs, InputMismatchError)
        arranged = []
        for name, value, (shape, dtype, qparams) in zip(self.names, values, self.types, strict=True):
            value = np.asarray(value)
            if value.shape != shape:
                raise InputMismatchError(
                    f"input '{name}' has shape {list(value.shape)}, the model expects {list(shape)}"
                )
            if qparams is not None and value.dtype.kind == "f":
                # An INT8 input (quant_input): float data is quantized as the chip's runtime does.
                value = qparams.quantize(value)
            if not accepts_dtype(value.dtype, dtype):
                raise InputMismatchError(
                    f"input '{name}' has dtype {value.dtype}, the model expects {dtype}; save it as {dtype}"
                )
            arranged.append(held_feed(name, value, dtype, InputMismatchError))
        return arranged


def arrange_inputs(module: ModuleOp, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Match inputs by name (or, for a single input, whatever its key) to @main's arguments."""
    return InputSignature(module).arrange(inputs)


def tensor_qparams(module: ModuleOp) -> dict[str, QParams | ChannelQParams]:
    """The quantization of every named INT8 tensor of the module (from its type; per-channel
    scales from the module's weight table)."""
    weights = weights_of(module)
    found: dict[str, QParams | ChannelQParams] = {}
    for op in module.walk():
        for name, result in zip(tensor_names(op), op.results):
            qparams = qparams_of(result.type, weights)
            if qparams is not None:
                found[name] = qparams
    return found


def real_values(module: ModuleOp, tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`tensors` with the INT8 ones dequantized (the real values they stand for), so that
    they compare with float tensors of other stages."""
    params = tensor_qparams(module)
    return {
        name: params[name].dequantize(value) if name in params and value.dtype.kind in "iu" else value
        for name, value in tensors.items()
    }


def model_rounding(module: ModuleOp):
    """For the TOP module of a pre-quantized model, the rounding to its own scales
    (`top_interpreter.ModelRounding`); None for any other module."""
    state = module.attributes.get("module.state")
    if not is_model_calibrated(module) or not str(getattr(state, "data", "")).startswith("TOP"):
        return None
    return ModelRounding(module_needs_asymmetric(module))


def check_tensor_sizes(module: ModuleOp) -> None:
    """Refuse, before anything runs, a module whose types declare a tensor over the size
    limit (tpu_xdsl.limits): an Expand to [1e6, 1e6] written in a .mlir asked for 3.6 TiB."""
    for op in module.walk():
        for index, result in enumerate(op.results):
            kind = result.type
            if not isinstance(kind, TensorType):
                continue
            try:
                itemsize = numpy_dtype(kind.element_type).itemsize
            except (KeyError, ValueError, TypeError):
                itemsize = 4
            names = tensor_names(op)
            what = f"{op.name} '{names[index]}'" if index < len(names) else f"{op.name} result {index}"
            check_tensor_size(what, kind.get_shape(), itemsize)


class ModuleRunner:
    """Runs @main of one module many times (calibration, benchmarks), reusing the
    op implementations and their per-op caches between runs.

    `run` goes through an `ExecutionPlan` (each op bound once to its kernel, attributes
    and weights) where the module has one, through xDSL's interpreter otherwise; both
    compute the same arrays and call listeners alike. The plan reads the module's ops and
    weights once, on the first run: a caller that edits either makes a new runner (as the
    interpreter functions' per-op caches already required). `functions` are the
    interpreter functions, for callers that run the interpreter with implementations of
    their own. Making a runner keeps the process's freed memory for reuse
    (`kernels.malloc`)."""

    def __init__(self, module: ModuleOp, weights: Mapping[str, np.ndarray]):
        check_tensor_sizes(module)
        keep_freed_memory()
        self.module = module
        rounding = model_rounding(module)
        self.top = TopFunctions(weights, rounding)
        self.functions = [FuncFunctions(), self.top, TpuFunctions(), TpuGroupFunctions()]
        self.output_names = output_names(module)
        self.signature = InputSignature(module)
        self._plan: ExecutionPlan | None | bool = False  # False: not built yet

    @property
    def plan(self) -> ExecutionPlan | None:
        """The module's execution plan, built on first use; None where it has none."""
        if self._plan is False:
            self._plan = ExecutionPlan.build(main_func(self.module).body.block, self.top)
        assert self._plan is not True
        return self._plan

    def run(
        self, inputs: Mapping[str, np.ndarray], listeners: Iterable[Interpreter.Listener] = ()
    ) -> dict[str, np.ndarray]:
        args = self.signature.arrange(inputs)
        plan = self.plan
        if plan is not None:
            results = plan.run(args, tuple(listeners))
        else:
            results = self.interpret(args, listeners)
        return {
            name: np.asarray(value)
            for name, value in zip(self.output_names, results, strict=True)
        }

    def interpret(self, args: Sequence[np.ndarray], listeners: Iterable[Interpreter.Listener] = ()) -> PythonValues:
        """@main's results on `args` through xDSL's interpreter (no plan)."""
        interpreter = Interpreter(self.module, listeners=tuple(listeners))
        for functions in self.functions:
            interpreter.register_implementations(functions)
        return interpreter.call_op("main", tuple(args))


def run_module(
    module: ModuleOp,
    inputs: Mapping[str, np.ndarray],
    weights: Mapping[str, np.ndarray],
    listeners: Iterable[Interpreter.Listener] = (),
) -> dict[str, np.ndarray]:
    """Interpret @main on `inputs` once; return the outputs by tensor name."""
    return ModuleRunner(module, weights).run(inputs, listeners)
