"""Run TOP modules with xDSL's interpreter: one `@impl` per TOP op, bound to the numpy kernels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import NoneType, TensorType
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.ir import Attribute, Dialect, Operation

from tpu_xdsl.dialects import Top
from tpu_xdsl.dialects.attr_values import op_attrs
from tpu_xdsl.dialects.quant_types import calibration_of
from tpu_xdsl.kernels import Kernel, ResultSpec, load_all
from tpu_xdsl.kernels.dtypes import numpy_dtype
from tpu_xdsl.kernels.quant import activation_qparams
from tpu_xdsl.weights import in_element_type, weight_name


class InterpretError(Exception):
    """An op could not be executed (a bug or an unsupported case, not bad input)."""


class ModelRounding:
    """What a pre-quantized model computes where it quantizes a tensor: its readers get
    the value rounded to the model's own grid, (clip(round(x / S) + z) - z) * S, as
    the QuantizeLinear/DequantizeLinear pair (or QLinear op) gives them in onnxruntime.

    TOP of such a model (`model_scales.is_model_calibrated`) thus runs the model's
    arithmetic. The tensor itself keeps its float value, as the ONNX tensor of that
    name does before its QuantizeLinear, so transform compares like with like, and
    INT8 (which stores exactly the rounded values) differs from TOP by one rounding
    per tensor instead of the model's rounding accumulated over every layer.
    """

    def __init__(self, asymmetric: bool):
        self.asymmetric = asymmetric
        # Per op, found once: its operands' and its returned results' quantization.
        self._qparams: dict[Operation, tuple[list[Any], list[Any]]] = {}

    def __call__(self, op: Operation, args: PythonValues) -> PythonValues:
        """`op`'s operands as the model's quantized tensors reach it."""
        operands, _ = self._of_op(op)
        if len(operands) != len(args):
            return args  # variadic operands arrive flattened: a list, left alone
        return _rounded(args, operands)

    def returned(self, op: Operation, outputs: PythonValues) -> PythonValues:
        """`op`'s results, those @main returns as the model holds them: a quantized graph
        output is its DequantizeLinear's result in ONNX."""
        return _rounded(outputs, self._of_op(op)[1])

    def held(self, value: Any, array: np.ndarray) -> np.ndarray:
        """`array`, the TOP tensor of SSA value `value`, as the model holds it: rounded
        to its scale where the model quantizes it (what an INT8 tensor stores)."""
        qparams = self._of(value)
        if qparams is None:
            return array
        (rounded,) = _rounded((np.asarray(array, np.float32),), [qparams])
        return rounded

    def _of_op(self, op: Operation) -> tuple[list[Any], list[Any]]:
        if op not in self._qparams:
            returned = [
                self._of(r) if any(use.operation.name == "func.return" for use in r.uses) else None
                for r in op.results
            ]
            self._qparams[op] = ([self._of(v) for v in op.operands], returned)
        return self._qparams[op]

    def _of(self, value: Any) -> Any:
        t = value.type
        owner = value.owner
        if isinstance(owner, Operation) and owner.name == "top.weight":
            return None  # weights hold the model's dequantized codes already
        if not isinstance(t, TensorType) or numpy_dtype(t.element_type).kind != "f":
            return None
        calibration = calibration_of(t)
        if calibration is None:
            return None
        return activation_qparams(calibration.threshold, calibration.min, calibration.max, self.asymmetric)


def _rounded(values: PythonValues, qparams_list: list[Any]) -> PythonValues:
    """Each array rounded to its quantization's grid, (q - z) * S; others as they are."""
    if all(q is None for q in qparams_list):
        return values
    rounded = []
    for value, qparams in zip(values, qparams_list, strict=True):
        if qparams is None or not isinstance(value, np.ndarray):
            rounded.append(value)
            continue
        codes = qparams.quantize(value, "half_to_even")
        rounded.append(qparams.dequantize(codes).astype(value.dtype, copy=False))
    return tuple(rounded)


def result_specs(op: Operation) -> list[ResultSpec]:
    specs = []
    for result in op.results:
        t: Attribute = result.type
        if isinstance(t, TensorType):
            specs.append(ResultSpec(tuple(t.get_shape()), numpy_dtype(t.element_type)))
        elif isinstance(t, NoneType):
            specs.append(ResultSpec((), np.dtype(np.float32)))
        else:
            raise InterpretError(f"'{op.name}': result type {t} is not a tensor")
    return specs


def _run_kernel(
    kernel: Kernel, op: Operation, args: PythonValues, static: dict[Operation, Any] | None = None
) -> PythonValues:
    """Run `kernel` for `op`; `static` caches each op's attributes and result specs
    for the lifetime of one set of interpreter functions (passes may edit ops in
    place between runs, so the cache never outlives them)."""
    cached = static.get(op) if static is not None else None
    if cached is None:
        cached = (op_attrs(op), result_specs(op))
        if static is not None:
            static[op] = cached
    attrs, specs = cached
    # Variadic operands arrive flattened; kernels of variadic ops take the list.
    return checked_outputs(op, specs, kernel(list(args), attrs, specs))


def checked_outputs(op: Operation, specs: list[ResultSpec], outputs: Sequence[Any]) -> PythonValues:
    """A kernel's `outputs` for `op` in its result types; an output of another shape
    than the IR's is a bug (InterpretError)."""
    checked = []
    for out, spec in zip(outputs, specs, strict=True):
        if out is None:
            checked.append(None)
            continue
        out = np.asarray(out)
        if out.shape != spec.shape:
            raise InterpretError(
                f"'{op.name}' ({_names(op)}): kernel produced shape {out.shape}, "
                f"IR says {spec.shape}"
            )
        checked.append(out.astype(spec.dtype, copy=False))
    return tuple(checked)


def _names(op: Operation) -> str:
    names = op.attributes.get("names")
    return ", ".join(str(n) for n in names.data) if names is not None else "unnamed"  # type: ignore[union-attr]


def make_functions(dialect: Dialect, kernels: Mapping[str, Kernel], name: str):
    """An `InterpreterFunctions` class with one `@impl` per op of `dialect` that has a kernel."""
    namespace: dict[str, Any] = {}
    for op_class in dialect.operations:
        kind = op_class.name.split(".", 1)[1]
        if kind not in kernels:
            continue

        def run(self, interpreter: Interpreter, op: Operation, args: PythonValues, _k=kernels[kind]):
            rounding = getattr(self, "model_rounding", None)
            if rounding is None:
                return _run_kernel(_k, op, args, self.static_cache)
            return rounding.returned(op, _run_kernel(_k, op, rounding(op, args), self.static_cache))

        namespace[f"run_{kind}"] = impl(op_class)(run)
    namespace["static_cache"] = None
    return register_impls(type(name, (InterpreterFunctions,), namespace))


_TopKernelFunctions = make_functions(Top, load_all(), "TopKernelFunctions")
_top_ops = {op.name: op for op in Top.operations}


@register_impls
class TopFunctions(_TopKernelFunctions):
    """TOP op implementations; weights come from the module's weight file."""

    def __init__(self, weights: Mapping[str, np.ndarray], model_rounding: ModelRounding | None = None):
        self.weights = weights
        self.static_cache: dict[Operation, Any] = {}
        self.model_rounding = model_rounding

    @impl(_top_ops["top.input"])
    def run_input(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        spec = result_specs(op)[0]
        return (np.asarray(args[0]).astype(spec.dtype, copy=False),)

    @impl(_top_ops["top.weight"])
    def run_weight(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (self.weight_value(op),)

    def weight_value(self, op: Operation) -> np.ndarray:
        """The array of `top.weight` op `op`, from the weight file, in its result type."""
        name = weight_name(op)
        if name not in self.weights:
            raise InterpretError(f"weight '{name}' is not in the weight file")
        spec = result_specs(op)[0]
        value = np.asarray(self.weights[name])
        if value.shape != spec.shape:
            raise InterpretError(
                f"weight '{name}' has shape {value.shape} in the weight file, IR says {spec.shape}"
            )
        return in_element_type(value, spec.dtype)

    @impl(_top_ops["top.none"])
    def run_none(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (None,)
