"""Import ONNX control flow (If, Loop, Scan) into TOP, which has none: inline or unroll.

- `If` whose condition is a constant once shapes and constant inputs are bound: the
  chosen branch's nodes are imported in place (its outputs renamed to the If's outputs;
  outer-scope reads, nested Ifs and the branch's own initializers work as in the main
  graph).
- `If` with a run-time condition whose branches are free of side effects and give
  outputs of equal shapes and dtypes: both branches are imported and each output is a
  `top.where` (ONNX Where) between them.
- `Loop` with a constant trip count (or a condition that folds each iteration) and
  `Scan` are unrolled, up to `MAX_UNROLLED_ITERATIONS` iterations; scan outputs are
  stacked with Reshape + Concat.

Anything else is a one-line error naming the node. Subgraph tensors keep their ONNX
names where they are unique; copies (both branches, loop iterations) get a suffix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import onnx
from onnx import helper, numpy_helper

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.frontend.onnx_model import CONTROL_FLOW_OPS, NeedsConstantError
from tpu_xdsl.frontend.registry import onnx_rule

if TYPE_CHECKING:
    from tpu_xdsl.frontend.node_context import NodeContext
    from tpu_xdsl.frontend.onnx_importer import OnnxImporter
    from tpu_xdsl.frontend.onnx_model import OnnxValue

OP_TYPES = CONTROL_FLOW_OPS
# Loop and Scan are unrolled at import up to this many iterations.
MAX_UNROLLED_ITERATIONS = 1024
# Ops whose results differ run to run: both branches of an If cannot run side by side.
_SIDE_EFFECTS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
# The opset of the Reshape/Concat/Gather/Where nodes this module builds itself.
_OWN_OPSET = 13


class _PoisonedBody(Exception):
    """A subgraph output was not imported (an op inside has no rule): the walk goes on."""


@onnx_rule("If", "Loop")
@onnx_rule("Scan", since=8)
def import_control_flow(ctx: NodeContext) -> None:
    try:
        if ctx.op_type == "If":
            import_if(ctx)
        elif ctx.op_type == "Loop":
            import_loop(ctx)
        elif ctx.opset < 9:
            import_scan8(ctx)
        else:
            import_scan(ctx)
    except _PoisonedBody:
        for output in ctx.node.output:
            ctx.importer.poison(output)


# -- inlining a subgraph --------------------------------------------------------------------


def inline_graph(
    importer: OnnxImporter,
    graph: onnx.GraphProto,
    formals: Sequence[OnnxValue],
    suffix: str,
    output_names: Sequence[str] | None = None,
) -> list[str]:
    """Import `graph`'s nodes with its inputs bound to `formals`; the names of its outputs'
    values. Produced outputs are renamed to `output_names` when given."""
    produced = [n for node in graph.node for n in node.output if n]
    targets: dict[str, str] = {}
    for out, target in zip(graph.output, output_names or ()):
        if out.name in produced and out.name not in targets and target:
            targets[out.name] = target
    mapping: dict[str, str] = {}
    for name in (*(v.name for v in graph.input), *(t.name for t in graph.initializer), *produced):
        if name not in mapping:
            mapping[name] = targets.get(name) or importer.fresh_subgraph_name(name, suffix)
    for info, value in zip(graph.input, formals, strict=True):
        importer.values[mapping[info.name]] = replace(value, name=mapping[info.name])
    for tensor in graph.initializer:
        importer.define_const(mapping[tensor.name], numpy_helper.to_array(tensor))
    importer.import_nodes(_renamed_node(node, mapping) for node in graph.node)
    names = [mapping.get(o.name, o.name) for o in graph.output]
    if any(importer.is_poisoned(n) for n in names):
        raise _PoisonedBody()
    return names


def _renamed_node(node: onnx.NodeProto, mapping: dict[str, str]) -> onnx.NodeProto:
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.input[:] = [mapping.get(n, n) for n in node.input]
    copy.output[:] = [mapping.get(n, n) for n in node.output]
    for attr in copy.attribute:
        if attr.HasField("g"):
            _rename_references(attr.g, mapping)
        for graph in attr.graphs:
            _rename_references(graph, mapping)
    return copy


def _rename_references(graph: onnx.GraphProto, mapping: dict[str, str]) -> None:
    """Rename, in place, the names a nested subgraph reads from enclosing scopes."""
    local = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    local.update(n for node in graph.node for n in node.output)
    outer = {k: v for k, v in mapping.items() if k not in local}
    for node in graph.node:
        node.input[:] = [outer.get(n, n) for n in node.input]
        for attr in node.attribute:
            if attr.HasField("g"):
                _rename_references(attr.g, outer)
            for sub in attr.graphs:
                _rename_references(sub, outer)
    for out in graph.output:
        out.name = outer.get(out.name, out.name)


def _bind_outputs(ctx: NodeContext, names: Sequence[str], outputs: Sequence[str]) -> None:
    """Make the values `names` the node's `outputs` (a poisoned value poisons the output)."""
    importer = ctx.importer
    for name, output in zip(names, outputs, strict=True):
        if not output or name == output:
            continue
        if name not in importer.values:
            raise ctx.error(f"the subgraph output '{name}' is produced by no node")
        importer.alias(output, name)


# -- If ----------------------------------------------------------------------------------------


def import_if(ctx: NodeContext) -> None:
    importer = ctx.importer
    then_graph, else_graph = ctx.attr("then_branch"), ctx.attr("else_branch")
    outputs = list(ctx.node.output)
    cond = ctx.const(0)
    if cond is not None:
        if cond.size != 1:
            raise ctx.error(f"the condition has {cond.size} elements; If needs a single boolean")
        branch = then_graph if bool(cond.reshape(-1)[0]) else else_graph
        names = inline_graph(importer, branch, [], "", outputs)
        _bind_outputs(ctx, names, outputs)
        return
    blocker = _side_effect(then_graph) or _side_effect(else_graph)
    if blocker is not None:
        raise _runtime_condition_error(ctx, f"the branches cannot both run: {blocker}")
    if int(np.prod(ctx.value(0).shape)) != 1:
        raise ctx.error(f"the condition has shape {list(ctx.value(0).shape)}; If needs a single boolean")
    checkpoint = importer.checkpoint()
    importer.strict += 1
    try:
        then_names = inline_graph(importer, then_graph, [], "")
        else_names = inline_graph(importer, else_graph, [], "")
        for k, (t, e) in enumerate(zip(then_names, else_names, strict=True)):
            tv, ev = importer.values[t], importer.values[e]
            if tv.shape != ev.shape or tv.dtype != ev.dtype:
                raise ctx.error(
                    f"output {k} is {list(tv.shape)} {tv.dtype} in then_branch and "
                    f"{list(ev.shape)} {ev.dtype} in else_branch"
                )
    except TpuXdslError as e:
        importer.rollback(checkpoint)
        raise _runtime_condition_error(ctx, f"importing both branches to select between them failed: {e}") from e
    finally:
        importer.strict -= 1
    cond_name = ctx.node.input[0]
    if ctx.value(0).shape:
        cond_name = _reshaped(ctx, cond_name, (), "cond")
    for t, e, output in zip(then_names, else_names, outputs):
        if output:
            _own_node(ctx, "Where", [cond_name, t, e], [output])


def _runtime_condition_error(ctx: NodeContext, detail: str) -> TpuXdslError:
    error = ctx.importer.not_constant_error(ctx, ctx.node.input[0], "the condition (input 0)")
    if isinstance(error, NeedsConstantError):
        return NeedsConstantError(f"{error} ({detail})", error.inputs, error.node)
    return type(error)(f"{error} ({detail})")


def _side_effect(graph: onnx.GraphProto) -> str | None:
    for node in graph.node:
        if node.op_type in _SIDE_EFFECTS:
            return f"node '{node.name or node.output[0]}' ({node.op_type}) draws random numbers"
        for attr in node.attribute:
            for sub in (*([attr.g] if attr.HasField("g") else []), *attr.graphs):
                found = _side_effect(sub)
                if found:
                    return found
    return None


# -- Loop --------------------------------------------------------------------------------------


def import_loop(ctx: NodeContext) -> None:
    """Loop(M, cond, v...) unrolled: body(iter_num, cond, v...) -> (cond, v..., scan...)."""
    importer = ctx.importer
    body: onnx.GraphProto = ctx.attr("body")
    trip = None
    if ctx.has_input(0):
        trip = int(ctx.require_const(0, "the trip count M").reshape(-1)[0])
        _check_bound(ctx, trip)
    uses_cond = ctx.has_input(1)
    if trip is None and not uses_cond:
        raise ctx.error("has neither a trip count nor a condition (an endless loop)")
    carried = [ctx.value(i) for i in range(2, ctx.num_inputs)]
    num_scans = len(body.output) - 1 - len(carried)
    scans: list[list[str]] = [[] for _ in range(num_scans)]
    cond: OnnxValue | None = ctx.value(1) if uses_cond else None
    iteration = 0
    while trip is None or iteration < trip:
        if cond is not None:
            if cond.const is None:
                raise importer.not_constant_error(ctx, cond.name, "the loop condition")
            if not bool(cond.const.reshape(-1)[0]):
                break
        _check_bound(ctx, iteration + 1)
        iter_num = importer.define_fresh_const(f"{_label(ctx)}_iter{iteration}_num", np.array(iteration, np.int64))
        cond_in = cond if cond is not None else importer.define_fresh_const(
            f"{_label(ctx)}_iter{iteration}_cond", np.array(True)
        )
        names = inline_graph(importer, body, [iter_num, cond_in, *carried], f"_iter{iteration}")
        if uses_cond:
            cond = importer.values[names[0]]
        carried = [importer.values[n] for n in names[1 : 1 + len(carried)]]
        for k, name in enumerate(names[1 + len(carried) :]):
            scans[k].append(name)
        iteration += 1
    outputs = list(ctx.node.output)
    _bind_outputs(ctx, [v.name for v in carried], outputs[: len(carried)])
    for k, output in enumerate(outputs[len(carried) :]):
        if output:
            if not scans[k]:
                raise ctx.error("runs no iteration: its scan outputs would be empty, which TOP cannot hold")
            _stack(ctx, scans[k], 0, output)


def _check_bound(ctx: NodeContext, iterations: int) -> None:
    if iterations > MAX_UNROLLED_ITERATIONS:
        known = ctx.op_type != "Loop" or ctx.has_input(0)
        count = iterations if known else f"more than {MAX_UNROLLED_ITERATIONS}"
        raise ctx.error(
            f"runs {count} iterations; Loop and Scan are unrolled at import up to {MAX_UNROLLED_ITERATIONS} "
            "(control_flow.MAX_UNROLLED_ITERATIONS)"
        )


# -- Scan --------------------------------------------------------------------------------------


def import_scan(ctx: NodeContext) -> None:
    """Scan (opset 9+): N states, M scan inputs sliced along their axes, unrolled."""
    body: onnx.GraphProto = ctx.attr("body")
    num_scan_inputs = ctx.attr("num_scan_inputs")
    num_states = ctx.num_inputs - num_scan_inputs
    states = [ctx.node.input[i] for i in range(num_states)]
    xs = [ctx.node.input[i] for i in range(num_states, ctx.num_inputs)]
    num_scan_outputs = len(body.output) - num_states
    in_axes = list(ctx.attr("scan_input_axes") or [0] * num_scan_inputs)
    in_dirs = list(ctx.attr("scan_input_directions") or [0] * num_scan_inputs)
    out_axes = list(ctx.attr("scan_output_axes") or [0] * num_scan_outputs)
    out_dirs = list(ctx.attr("scan_output_directions") or [0] * num_scan_outputs)
    outputs = list(ctx.node.output)
    final, _ = _scan(ctx, body, states, xs, in_axes, in_dirs, out_axes, out_dirs, "", outputs[num_states:])
    _bind_outputs(ctx, final, outputs[:num_states])


def import_scan8(ctx: NodeContext) -> None:
    """Scan (opset 8): a batch axis 0 before the sequence axis 1; each batch is scanned."""
    if ctx.has_input(0):
        raise ctx.error("sequence_lens is not supported (all sequences must have the full length)")
    body: onnx.GraphProto = ctx.attr("body")
    num_scan_inputs = ctx.attr("num_scan_inputs")
    num_states = ctx.num_inputs - 1 - num_scan_inputs
    states = [ctx.node.input[1 + i] for i in range(num_states)]
    xs = [ctx.node.input[1 + num_states + j] for j in range(num_scan_inputs)]
    dirs = list(ctx.attr("directions") or [0] * num_scan_inputs)
    num_scan_outputs = len(body.output) - num_states
    batch = ctx.importer.values[(states or xs)[0]].shape[0]
    per_batch_states: list[list[str]] = [[] for _ in states]
    per_batch_scans: list[list[str]] = [[] for _ in range(num_scan_outputs)]
    for b in range(batch):
        states_b = [_gather(ctx, s, b, 0, f"b{b}") for s in states]
        xs_b = [_gather(ctx, x, b, 0, f"b{b}") for x in xs]
        final, scans = _scan(
            ctx, body, states_b, xs_b, [0] * len(xs), dirs, [0] * num_scan_outputs, [0] * num_scan_outputs, f"_b{b}"
        )
        for k, name in enumerate(final):
            per_batch_states[k].append(name)
        for k, name in enumerate(scans):
            per_batch_scans[k].append(name)
    for names, output in zip((*per_batch_states, *per_batch_scans), ctx.node.output):
        if output:
            _stack(ctx, names, 0, output)


def _scan(
    ctx: NodeContext,
    body: onnx.GraphProto,
    states: list[str],
    xs: list[str],
    in_axes: list[int],
    in_dirs: list[int],
    out_axes: list[int],
    out_dirs: list[int],
    suffix: str,
    scan_output_names: Sequence[str] = (),
) -> tuple[list[str], list[str]]:
    """Unroll one scan: (final state names, stacked scan output names)."""
    importer = ctx.importer
    shapes = [importer.values[x].shape for x in xs]
    axes = [a + len(s) if a < 0 else a for a, s in zip(in_axes, shapes)]
    lengths = {s[a] for s, a in zip(shapes, axes)}
    if len(lengths) != 1:
        raise ctx.error(f"scan inputs have different sequence lengths {sorted(lengths)}")
    (length,) = lengths
    if length == 0:
        raise ctx.error("scans a sequence of length 0: its scan outputs would be empty, which TOP cannot hold")
    _check_bound(ctx, length)
    num_scan_outputs = len(body.output) - len(states)
    per_step: list[list[str]] = [[] for _ in range(num_scan_outputs)]
    for t in range(length):
        slices = [
            _gather(ctx, x, length - 1 - t if d else t, a, f"t{t}{suffix}")
            for x, a, d in zip(xs, axes, in_dirs)
        ]
        formals = [importer.values[n] for n in (*states, *slices)]
        names = inline_graph(importer, body, formals, f"{suffix}_t{t}")
        states = names[: len(states)]
        for k, name in enumerate(names[len(states) :]):
            per_step[k].append(name)
    stacked = []
    for k, names in enumerate(per_step):
        ordered = names[::-1] if out_dirs[k] else names
        rank = len(importer.values[ordered[0]].shape)
        axis = out_axes[k] + rank + 1 if out_axes[k] < 0 else out_axes[k]
        name = scan_output_names[k] if k < len(scan_output_names) else ""
        if not name:
            name = importer.fresh_subgraph_name(f"{_label(ctx)}_scan{k}", suffix)
        _stack(ctx, ordered, axis, name)
        stacked.append(name)
    return states, stacked


# -- nodes this module builds ------------------------------------------------------------------


def _label(ctx: NodeContext) -> str:
    return ctx.node.name or ctx.node.output[0]


def _own_node(ctx: NodeContext, op_type: str, inputs: list[str], outputs: list[str], **attrs) -> None:
    node = helper.make_node(op_type, inputs, outputs, name=f"{_label(ctx)}/{op_type}", **attrs)
    ctx.importer.import_node(node, opset=max(_OWN_OPSET, ctx.opset))


def _const(ctx: NodeContext, array: np.ndarray, tag: str) -> str:
    return ctx.importer.define_fresh_const(f"{_label(ctx)}_{tag}", array).name


def _gather(ctx: NodeContext, name: str, index: int, axis: int, tag: str) -> str:
    """`name`[..., index, ...] along `axis` (the axis removed)."""
    out = ctx.importer.fresh_subgraph_name(f"{name}_{tag}", "")
    _own_node(ctx, "Gather", [name, _const(ctx, np.array(index, np.int64), f"{tag}_index")], [out], axis=axis)
    return out


def _reshaped(ctx: NodeContext, name: str, shape: tuple[int, ...], tag: str) -> str:
    out = ctx.importer.fresh_subgraph_name(f"{name}_{tag}", "")
    _own_node(ctx, "Reshape", [name, _const(ctx, np.array(shape, np.int64), f"{tag}_shape")], [out])
    return out


def _stack(ctx: NodeContext, names: list[str], axis: int, output: str) -> None:
    """`output` = the values `names` stacked along a new `axis`."""
    importer = ctx.importer
    shape = importer.values[names[0]].shape
    expanded = [_reshaped(ctx, n, (*shape[:axis], 1, *shape[axis:]), f"stack{axis}") for n in names]
    _own_node(ctx, "Concat", expanded, [output], axis=axis)
