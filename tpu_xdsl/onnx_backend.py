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

from tpu_xdsl.frontend.onnx_importer import import_onnx, model_inputs
from tpu_xdsl.interp.runner import run_module


class TpuXdslRep(BackendRep):
    """A prepared model: its TOP module and weights."""

    def __init__(self, model: onnx.ModelProto, input_shapes: Sequence[Sequence[int]] | None):
        from tpu_xdsl.transforms.pipelines import canonicalize

        result = import_onnx(model, model.graph.name or "model", input_shapes)
        canonicalize(result.module)
        self.module = result.module
        self.weights = result.weights
        self.input_names = result.input_names
        self.output_names = result.output_names

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        if isinstance(inputs, Mapping):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            feeds = dict(zip(self.input_names, inputs))
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
        return TpuXdslRep(model, input_shapes)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        if "input_shapes" not in kwargs and not isinstance(inputs, Mapping):
            arrays = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            kwargs["input_shapes"] = [np.shape(a) for a in arrays]
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


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
