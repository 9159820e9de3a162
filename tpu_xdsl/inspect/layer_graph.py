"""A model's layers as a graph: nodes are ops (or ONNX nodes, or a compiled model's named
tensors), edges the tensors between them, layer-group membership marked.

Taken from the most readable stage loaded: the TOP module, else the TPU module (through
its unnamed tpu.load/tpu.store ops and out of tpu.group regions), else the ONNX graph,
else the device model (edges where an instruction waits for another layer's), else the
final outputs of a TOSA module (no edges: IREE gives nothing else). Layer
groups come from the device model, else from the TPU module's tpu.group ops. `report`
draws it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tpu_xdsl.inspect.stages import SILENT_OPS, Stage


@dataclass
class Layer:
    """A node of the graph: an op (or ONNX node, or device tensor) and its tensor names."""

    index: int
    names: list[str]
    op: str
    shape: tuple[int, ...] | None
    group: int | None = None  # index into LayerGraph.groups


@dataclass
class LayerGraph:
    layers: list[Layer]
    edges: list[tuple[int, int, str]]  # producer, consumer, tensor name
    source: str  # what the layers are, for the page
    groups: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # name, member tensor names


def shape_of(value_type) -> tuple[int, ...] | None:
    get_shape = getattr(value_type, "get_shape", None)
    return tuple(get_shape()) if get_shape else None


def module_graph(module, label: str) -> LayerGraph:
    """The named ops of a TOP or TPU module; edges follow operands through the unnamed
    ops (tpu.load, tpu.store) and out of tpu.group regions to the op that made the value."""
    from xdsl.ir import Operation

    # delays xDSL and the dialects: a device-only report reads no IR
    from tpu_xdsl.dialects.module import main_func, tensor_names

    layers: list[Layer] = []
    edges: list[tuple[int, int, str]] = []
    by_op: dict[Operation, Layer] = {}

    def producers(value) -> list[tuple[Layer, str]]:
        owner = value.owner
        if not isinstance(owner, Operation) or owner.name in SILENT_OPS:
            return []
        if owner in by_op:
            layer = by_op[owner]
            return [(layer, layer.names[min(value.index, len(layer.names) - 1)])]
        if owner.name == "tpu.group":
            yielded = owner.regions[0].block.last_op
            return producers(yielded.operands[value.index]) if yielded is not None else []
        return [p for operand in owner.operands for p in producers(operand)]

    for op in main_func(module).walk():
        if op.name.startswith("func.") or op.name in SILENT_OPS or op.name == "tpu.group":
            continue
        names = tensor_names(op)
        if not names:
            continue
        layer = Layer(len(layers), names, op.name, shape_of(op.results[0].type) if op.results else None)
        for operand in op.operands:
            for producer, tensor in producers(operand):
                edges.append((producer.index, layer.index, tensor))
        by_op[op] = layer
        layers.append(layer)
    return LayerGraph(layers, edges, f"{label} ops")


def module_groups(module) -> list[tuple[str, tuple[str, ...]]]:
    """The tpu.group ops of a TPU module: name and member tensor names, in program order."""
    # delays xDSL and the dialects: a device-only report reads no IR
    from tpu_xdsl.dialects.module import main_func, tensor_names

    groups = []
    for op in main_func(module).walk():
        if op.name != "tpu.group":
            continue
        members = tuple(n for inner in op.walk() if inner is not op for n in tensor_names(inner)[:1])
        groups.append(((tensor_names(op) or [f"group {len(groups)}"])[0], members))
    return groups


def onnx_graph(model, shapes: Mapping[str, tuple[int, ...]]) -> LayerGraph:
    """The graph inputs and nodes of an ONNX model (Constant nodes left out)."""
    # delays onnx: only ONNX stages need it
    from tpu_xdsl.frontend.onnx_model import model_inputs

    layers: list[Layer] = []
    edges: list[tuple[int, int, str]] = []
    made_by: dict[str, Layer] = {}
    for value in model_inputs(model):
        made_by[value.name] = Layer(len(layers), [value.name], "Input", shapes.get(value.name))
        layers.append(made_by[value.name])
    for node in model.graph.node:
        names = [n for n in node.output if n]
        if node.op_type == "Constant" or not names:
            continue
        layer = Layer(len(layers), names, node.op_type, shapes.get(names[0]))
        for name in node.input:
            if name in made_by:
                edges.append((made_by[name].index, layer.index, name))
        for name in names:
            made_by[name] = layer
        layers.append(layer)
    return LayerGraph(layers, edges, "ONNX nodes")


def device_graph(model) -> LayerGraph:
    """The named tensors of a compiled model in program order; an edge where an instruction
    of one tensor's layer waits for an instruction of an earlier one."""
    layers: list[Layer] = []
    by_name: dict[str, Layer] = {}
    for desc in (*model.inputs, *sorted(model.tensors, key=lambda d: d.written_by)):
        if desc.name not in by_name:
            by_name[desc.name] = Layer(len(layers), [desc.name], "tensor", tuple(desc.shape))
            layers.append(by_name[desc.name])
    edges = set()
    for instruction in model.instructions:
        consumer = by_name.get(instruction.layer)
        for dep in instruction.deps:
            producer = by_name.get(model.instructions[dep].layer)
            if producer and consumer and producer.index < consumer.index:
                edges.add((producer.index, consumer.index, producer.names[0]))
    return LayerGraph(layers, sorted(edges), "device tensors")


def outputs_graph(outputs: Mapping[str, np.ndarray]) -> LayerGraph:
    """A stage that gives its final outputs only (a TOSA module run by IREE): one layer each."""
    layers = [Layer(i, [name], "output", tuple(np.shape(value))) for i, (name, value) in enumerate(outputs.items())]
    return LayerGraph(layers, [], "final outputs")


def layer_graph(stages: Sequence[Stage], results: Mapping[str, Mapping[str, np.ndarray]]) -> LayerGraph:
    """The graph of the most readable stage loaded (TOP, TPU, ONNX, device, else the final
    outputs of a TOSA stage), with the layer
    groups of the device model (or the TPU module) marked on its layers."""
    by_kind = {s.kind: s for s in stages}
    if "top" in by_kind:
        graph = module_graph(by_kind["top"].handle, "TOP")
    elif "tpu" in by_kind:
        graph = module_graph(by_kind["tpu"].handle, by_kind["tpu"].label)
    elif "onnx" in by_kind:
        shapes = {name: tuple(np.shape(v)) for name, v in results["onnx"].items()}
        graph = onnx_graph(by_kind["onnx"].handle, shapes)
    elif "device" in by_kind:
        graph = device_graph(by_kind["device"].handle)
    else:
        graph = outputs_graph(results["tosa"])
    if "device" in by_kind:
        graph.groups = [(g.name, tuple(g.ops)) for g in by_kind["device"].handle.groups]
    elif "tpu" in by_kind:
        graph.groups = module_groups(by_kind["tpu"].handle)
    group_of = {name: i for i, (_, members) in enumerate(graph.groups) for name in members}
    for layer in graph.layers:
        layer.group = next((group_of[n] for n in layer.names if n in group_of), None)
    return graph
