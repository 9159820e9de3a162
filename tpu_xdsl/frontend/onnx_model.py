"""An ONNX model as the importer takes it: loaded and checked, its inputs, their shapes bound
(from the model or `--input-shapes`), and the errors an import reports."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper
from xdsl.ir import SSAValue

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.frontend.validate import SUPPORTED_TYPES, load_external_data, parse_model, type_name, validate_model
from tpu_xdsl.limits import check_tensor_size

F32 = np.dtype(np.float32)
# ONNX ops with subgraphs, inlined or unrolled at import (`frontend.control_flow`).
CONTROL_FLOW_OPS = frozenset({"If", "Loop", "Scan"})


class ModelLoadError(TpuXdslError):
    """The model file cannot be read as ONNX."""


class UnsupportedOpError(TpuXdslError):
    """An ONNX node has no import rule for its op type and opset."""


class ShapeBindingError(TpuXdslError):
    """Input shapes are missing or do not fit the model."""


class ImportRuleError(TpuXdslError):
    """A node's attributes or inputs are outside what its import rule handles."""


class NeedsConstantError(ImportRuleError):
    """A value that decides a shape or a branch depends on run-time model inputs.

    `inputs` names those inputs: binding them to constants (`--constant-inputs`,
    or the test input's values) makes the value foldable.
    """

    def __init__(self, message: str, inputs: Iterable[str], node: str):
        super().__init__(message)
        self.inputs = sorted(set(inputs))
        self.node = node


@dataclass
class OnnxValue:
    """An ONNX tensor during import: a TOP value, or a constant known at import."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    ssa: SSAValue | None = None
    const: np.ndarray | None = None


def load_model(path: str | Path) -> onnx.ModelProto:
    """Read an ONNX file (with its external data) and validate it, or raise a one-line error."""
    path = Path(path)
    if not path.is_file():
        raise ModelLoadError(f"{path}: no such model file")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read the model ({e.strerror or e})") from e
    model = parse_model(data, path)
    if not model.graph.node and not model.graph.output:
        raise ModelLoadError(f"{path}: not an ONNX model (no graph); pass a .onnx file")
    load_external_data(model, path)
    validate_model(model, str(path))
    return model


def model_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that are not initializers (the tensors a user feeds)."""
    initializers = {t.name for t in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in initializers]


def elem_dtype(elem_type: int, where: str) -> np.dtype:
    if elem_type not in SUPPORTED_TYPES:
        raise ImportRuleError(f"{where}: element type {type_name(elem_type)} is not supported")
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


def bind_input_shapes(
    model: onnx.ModelProto,
    input_shapes: Sequence[Sequence[int]] | None,
    constant_inputs: Iterable[str] = (),
) -> list[tuple[str, tuple[int, ...], np.dtype]]:
    """Static (name, shape, dtype) of each fed model input, dynamic dims bound by
    `input_shapes`. Inputs named in `constant_inputs` are not fed; `input_shapes` may list
    every input (the constant ones' entries are then skipped) or only the fed ones."""
    constants = set(constant_inputs)
    every = model_inputs(model)
    inputs = [v for v in every if v.name not in constants]
    if input_shapes is not None and constants and len(input_shapes) == len(every) != len(inputs):
        input_shapes = [s for v, s in zip(every, input_shapes) if v.name not in constants]
    if input_shapes is not None and len(input_shapes) != len(inputs):
        raise ShapeBindingError(
            f"--input-shapes gives {len(input_shapes)} shape(s) but the model has "
            f"{len(inputs)} input(s): {', '.join(v.name for v in inputs)}"
            + (f" (and the constant input(s) {', '.join(sorted(constants))})" if constants else "")
        )
    bound = []
    for i, value in enumerate(inputs):
        tensor_type = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            raise ShapeBindingError(f"input '{value.name}' is not a tensor (sequences and maps are not supported)")
        dims = list(tensor_type.shape.dim)
        dtype = elem_dtype(tensor_type.elem_type, f"input '{value.name}'")
        if input_shapes is not None:
            shape = tuple(int(d) for d in input_shapes[i])
            if tensor_type.HasField("shape") and len(shape) != len(dims):
                raise ShapeBindingError(
                    f"--input-shapes gives input '{value.name}' rank {len(shape)}, the model "
                    f"says rank {len(dims)}"
                )
            for axis, (dim, given) in enumerate(zip(dims, shape)):
                # Some exporters write -1 (or 0) for a dynamic dim.
                if dim.HasField("dim_value") and dim.dim_value > 0 and dim.dim_value != given:
                    raise ShapeBindingError(
                        f"--input-shapes gives input '{value.name}' dim {axis} = {given}, "
                        f"the model fixes it to {dim.dim_value}"
                    )
            if any(d < 0 for d in shape):
                raise ShapeBindingError(f"--input-shapes: input '{value.name}' has a negative dim: {list(shape)}")
        else:
            if not tensor_type.HasField("shape"):  # a scalar has a shape with no dims
                raise ShapeBindingError(f"input '{value.name}' has no shape in the model (not even its rank); "
                                        "give it with --input-shapes")
            dynamic = [f"{axis}" + (f" ('{dim.dim_param}')" if dim.dim_param else "")
                       for axis, dim in enumerate(dims) if not dim.HasField("dim_value") or dim.dim_value <= 0]
            if dynamic:
                raise ShapeBindingError(
                    f"input '{value.name}' dim{'s' if len(dynamic) > 1 else ''} {', '.join(dynamic)} "
                    f"{'are' if len(dynamic) > 1 else 'is'} dynamic; give the input's shape with --input-shapes"
                )
            shape = tuple(dim.dim_value for dim in dims)
        check_tensor_size(f"input '{value.name}'", shape, dtype.itemsize)
        bound.append((value.name, shape, dtype))
    return bound


def graph_names(graph: onnx.GraphProto) -> set[str]:
    """Every tensor name `graph` and its subgraphs use."""
    names = {v.name for v in (*graph.input, *graph.output)}
    names.update(t.name for t in graph.initializer)
    for node in graph.node:
        names.update(n for n in (*node.input, *node.output) if n)
        for attr in node.attribute:
            for sub in (*([attr.g] if attr.HasField("g") else []), *attr.graphs):
                names |= graph_names(sub)
    return names


def unfoldable_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The nodes of a subgraph that would not fold (some input not a constant of the
    subgraph): the ones that need an import rule."""
    constants = {t.name for t in graph.initializer}
    nodes = []
    for node in graph.node:
        present = [n for n in node.input if n]
        graph_attr = any(a.HasField("g") or a.graphs for a in node.attribute)
        if not graph_attr and (node.op_type == "Constant" or (present and all(n in constants for n in present))):
            constants.update(n for n in node.output if n)
            continue
        nodes.append(node)
    return nodes
