"""Model inputs bound to constants at import: parsing `--constant-inputs`, typing the values,
and finding the inputs that only steer shapes or branches.

TOP shapes are static and TOP has no control flow, so an input such as a sample
rate that picks an `If` branch, or a length that sets a Reshape target, must be
known at import. `--constant-inputs sr=16000` (or an .npz) binds such inputs;
the test input's values may bind inputs that only steer shapes or branches
(TPU-MLIR's shape-influencing inputs), and a note says so.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

import numpy as np
import onnx

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.frontend.onnx_model import elem_dtype, model_inputs


class ConstantInputError(TpuXdslError):
    """`--constant-inputs` is malformed or does not fit the model's inputs."""


# Inputs that decide a result's shape (or a control-flow decision), by op type and
# input index: a value reaching only these positions never flows into tensor data.
STEERING_POSITIONS: dict[str, set[int]] = {
    "Reshape": {1}, "Expand": {1}, "Tile": {1}, "Slice": {1, 2, 3, 4}, "Pad": {1, 3},
    "Resize": {1, 2, 3}, "Upsample": {1}, "Split": {1}, "Squeeze": {1}, "Unsqueeze": {1},
    "TopK": {1}, "ConstantOfShape": {0}, "Range": {0, 1, 2}, "OneHot": {1}, "CenterCropPad": {1},
    "ReduceMean": {1}, "ReduceSum": {1}, "ReduceMax": {1}, "ReduceMin": {1}, "ReduceProd": {1},
    "ReduceL1": {1}, "ReduceL2": {1}, "ReduceLogSum": {1}, "ReduceLogSumExp": {1},
    "ReduceSumSquare": {1}, "Trilu": {1}, "Compress": {1}, "If": {0}, "Loop": {0, 1},
}
# Ops whose output depends on their input's shape only.
SHAPE_READERS = {"Shape", "Size"}


def parse_constant_inputs(text: str) -> dict[str, np.ndarray]:
    """`NAME=VALUE[,NAME=VALUE...]` (VALUE a number or a nested list) or an .npz file."""
    if text.endswith(".npz"):
        from tpu_xdsl.npz import read_npz

        return read_npz(text, "give an .npz of the inputs' values by name", where=f"--constant-inputs {text}")
    values: dict[str, np.ndarray] = {}
    for item in _split_top_level(text):
        name, sep, literal = item.partition("=")
        name, literal = name.strip(), literal.strip()
        if not sep or not name or not literal:
            raise ConstantInputError(
                f"--constant-inputs {text!r}: write NAME=VALUE[,NAME=VALUE...], e.g. sr=16000, "
                "or give an .npz"
            )
        try:
            value = ast.literal_eval(literal)
            array = np.asarray(value)
        except (ValueError, SyntaxError) as e:
            raise ConstantInputError(f"--constant-inputs: value of '{name}' {literal!r} is not a number or list") from e
        if array.dtype.kind not in "biuf":
            raise ConstantInputError(f"--constant-inputs: value of '{name}' {literal!r} is not a number or list")
        values[name] = array
    return values


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets, so `a=[1,2],b=3` gives two items."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += char in "[(" 
        depth -= char in "])"
        if char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item for item in items if item.strip()]


def typed_constants(model: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The values in each input's ONNX dtype and declared shape; one-line errors for
    unknown names or values that do not fit."""
    inputs = {v.name: v for v in model_inputs(model)}
    typed = {}
    for name, value in values.items():
        info = inputs.get(name)
        if info is None:
            raise ConstantInputError(
                f"--constant-inputs names '{name}', which is not an input of the model "
                f"(inputs: {', '.join(inputs) or 'none'})"
            )
        array = np.asarray(value)
        tensor_type = info.type.tensor_type
        dtype = elem_dtype(tensor_type.elem_type, f"--constant-inputs: input '{name}'")
        if tensor_type.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in tensor_type.shape.dim]
            known = [d for d in dims if d is not None]
            if len(known) == len(dims) and int(np.prod(known, dtype=np.int64)) == array.size:
                array = array.reshape(known)
            if array.ndim != len(dims) or any(d is not None and d != s for d, s in zip(dims, array.shape)):
                raise ConstantInputError(
                    f"--constant-inputs: '{name}' has shape {list(array.shape)}, the model declares "
                    f"{['?' if d is None else d for d in dims]}"
                )
        if array.dtype.kind == "f" and dtype.kind in "iub" and not np.array_equal(array, np.round(array)):
            raise ConstantInputError(f"--constant-inputs: '{name}' is {dtype} in the model; give a whole number")
        typed[name] = array.astype(dtype)
    return typed


def bound_note(name: str, value: np.ndarray, flag: str) -> str:
    return f"input '{name}' is the constant {_show(value)} ({flag}); the TOP module has no input '{name}'"


def steering_note(name: str, value: np.ndarray, node: str) -> str:
    return (
        f"input '{name}' only steers shapes or branches (node '{node}' needs its value at import): "
        f"it is bound to the test input's value {_show(value)}, as TPU-MLIR binds shape-influencing "
        f"inputs; the TOP module has no input '{name}' and holds for that value only"
    )


def _show(value: np.ndarray) -> str:
    text = np.array2string(np.asarray(value), separator=",", threshold=8)
    return text if len(text) <= 60 else text[:57] + "..."


def steering_only_inputs(model: onnx.ModelProto) -> set[str]:
    """Model inputs whose values reach the outputs only through steering positions
    (`STEERING_POSITIONS`) or shape readers: binding them changes no tensor data, only
    which shapes and branches the model takes."""
    graph = model.graph
    return {v.name for v in model_inputs(model)} - _data_names(graph, {o.name for o in graph.output})


def _data_names(graph: onnx.GraphProto, data: set[str]) -> set[str]:
    """The names (the graph's own and outer-scope ones) whose values flow into the
    tensors `data`, walking the graph backwards."""
    data = set(data)
    for node in reversed(graph.node):
        if not any(n in data for n in node.output if n):
            continue
        steering = STEERING_POSITIONS.get(node.op_type, set())
        for i, name in enumerate(node.input):
            if name and i not in steering and node.op_type not in SHAPE_READERS:
                data.add(name)
        for attr in node.attribute:
            for sub in (*([attr.g] if attr.HasField("g") else []), *attr.graphs):
                if node.op_type == "If":
                    # A branch's outer reads are data only where they reach its outputs.
                    data |= _data_names(sub, {o.name for o in sub.output})
                else:
                    data |= _outer_references(sub)
    return data


def _outer_references(graph: onnx.GraphProto) -> set[str]:
    """Names a subgraph reads from enclosing scopes."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    used: set[str] = set()
    for node in graph.node:
        used.update(n for n in node.input if n)
        for attr in node.attribute:
            for sub in (*([attr.g] if attr.HasField("g") else []), *attr.graphs):
                used |= _outer_references(sub)
        defined.update(n for n in node.output if n)
    used.update(o.name for o in graph.output)
    return used - defined
