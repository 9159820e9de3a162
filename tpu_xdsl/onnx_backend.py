"""An `onnx.backend.base.Backend` running models through tpu-xdsl: import + canonicalize, then the TOP interpreter.

    from tpu_xdsl.onnx_backend import TpuXdslBackend
    rep = TpuXdslBackend.prepare(model)
    outputs = rep.run([x])

This lets ONNX's own conformance cases run the compiler.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, namedtupledict

from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.frontend.onnx_model import model_inputs
from tpu_xdsl.interp.runner import run_module
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.weights import attach_weights


class TpuXdslRep(BackendRep):
    """A prepared model: its TOP module and weights."""

    def __init__(
        self,
        model: onnx.ModelProto,
        input_shapes: Sequence[Sequence[int]] | None,
        constant_inputs: Mapping[str, np.ndarray] | None = None,
    ):
        self.constant_inputs = dict(constant_inputs or {})
        self.all_input_names = [v.name for v in model_inputs(model)]
        if self.constant_inputs:
            model = with_constant_inputs(model, self.constant_inputs)
        result = import_onnx(model, model.graph.name or "model", input_shapes)
        self.weights = attach_weights(result.module, result.weights)
        canonicalize(result.module)
        self.module = result.module
        self.input_names = result.input_names
        self.output_names = result.output_names

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if not isinstance(inputs, Mapping):
            inputs = dict(zip(self.all_input_names, inputs))
        feeds = {k: v for k, v in inputs.items() if k not in self.constant_inputs}
        outputs = run_module(self.module, feeds, self.weights)
        values = [outputs[name] for name in outputs]
        return namedtupledict("Outputs", self.output_names)(*values)


class TpuXdslBackend(Backend):
    """ONNX backend: `prepare` imports and canonicalizes, `run` interprets TOP."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> TpuXdslRep:
        super().prepare(model, device, **kwargs)
        input_shapes = kwargs.get("input_shapes")
        if input_shapes is None:
            input_shapes = _static_shapes(model)
        return TpuXdslRep(model, input_shapes, kwargs.get("constant_inputs"))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        if "input_shapes" not in kwargs and not isinstance(inputs, Mapping):
            arrays = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            kwargs["input_shapes"] = [np.shape(a) for a in arrays]
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


def with_constant_inputs(model: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """A copy of `model` whose inputs named in `values` are initializers holding them.

    Shapes in TOP are static, so inputs that decide a shape (a Reshape target,
    Slice bounds, reduction axes, TopK's k) must be known at compile time.
    """
    from onnx import numpy_helper

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for name, value in values.items():
        copy.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    kept = [v for v in copy.graph.input if v.name not in values]
    del copy.graph.input[:]
    copy.graph.input.extend(kept)
    return copy


def _static_shapes(model: onnx.ModelProto) -> list[list[int]] | None:
    """The inputs' shapes when the model fixes them all, else None (binding will say which)."""
    shapes = []
    for value in model_inputs(model):
        dims = value.type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") for d in dims):
            return None
        shapes.append([d.dim_value for d in dims])
    return shapes


prepare = TpuXdslBackend.prepare
run_model = TpuXdslBackend.run_model
supports_device = TpuXdslBackend.supports_device
