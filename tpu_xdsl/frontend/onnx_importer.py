"""Import an ONNX model into a TOP module and a weight table.

The importer walks the graph in order. Input dims are bound first (from the
model or `--input-shapes`), and inputs bound to constants (`--constant-inputs`)
become constants, so every shape is static. A node whose inputs are all
constants is folded to a constant by ONNX's reference implementation run at
the model's own opset (`tpu_xdsl.frontend.folding`), which turns
shape-computing subgraphs (Shape, Gather, Concat, Range, ConstantOfShape,
Cast, ...) into constants; If, Loop and Scan are inlined or unrolled
(`tpu_xdsl.frontend.control_flow`); other nodes go through the rule
registered for their op type and opset (`tpu_xdsl.frontend.registry`). Every
op type without a rule is collected and reported in one error at the end of
the walk. Ops nothing uses are removed at the end. Tensor names are the ONNX
names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import onnx
from onnx import helper, numpy_helper
from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, NoneType, StringAttr, TensorType
from xdsl.ir import Attribute, Block, Operation, OpResult, Region, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import VerifyException

from tpu_xdsl.dialects import Top, shapes
from tpu_xdsl.dialects.attr_values import from_py
from tpu_xdsl.dialects.module import rename_result, tensor_names
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.frontend import constant_inputs as binding
from tpu_xdsl.frontend import registry
from tpu_xdsl.frontend.folding import FoldError, NodeFolder, folded_shapes
from tpu_xdsl.frontend.node_context import ImportResult, NodeContext
from tpu_xdsl.frontend.onnx_model import (
    CONTROL_FLOW_OPS,
    F32,
    ImportRuleError,
    NeedsConstantError,
    OnnxValue,
    UnsupportedOpError,
    bind_input_shapes,
    elem_dtype,
    graph_names,
    load_model,
    unfoldable_nodes,
)
from tpu_xdsl.frontend.validate import InvalidModelError, validate_model
from tpu_xdsl.kernels.dtypes import element_type, numpy_dtype
from tpu_xdsl.limits import check_tensor_size, element_count

# Nodes never folded even when their inputs are constant.
_NEVER_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
# What a rule's arithmetic raises on a node the ONNX spec forbids.
_RULE_FAULTS = (ValueError, IndexError, KeyError, TypeError, ArithmeticError, VerifyException)
# Folding a node whose result is larger than this many elements keeps it an op.
_FOLD_LIMIT = 1 << 24


@dataclass
class OnnxImporter:
    model: onnx.ModelProto
    model_name: str
    input_shapes: Sequence[Sequence[int]] | None = None
    values: dict[str, OnnxValue] = field(default_factory=dict)
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    # Model inputs imported as constants (`--constant-inputs`), by name.
    constant_inputs: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        registry.load_all()
        self.opsets = {o.domain or "": o.version for o in self.model.opset_import}
        # Dialect.operations is typed as plain Operation classes; TOP's are generated IRDL ones.
        self._top = {op.name: cast(type[IRDLOperation], op) for op in Top.operations}
        self._weight_ssa: dict[tuple[str, str], SSAValue] = {}
        self._none: SSAValue | None = None
        self._used_names: set[str] = set()
        # Every name the ONNX graph and its subgraphs use, so derived names never collide.
        self._onnx_names: set[str] = graph_names(self.model.graph)
        self.folder = NodeFolder(self.model)
        # The node that defined each value (renamed copies for inlined subgraphs), to
        # explain why a value is not a constant.
        self.producers: dict[str, onnx.NodeProto] = {}
        # Why folding a node failed, by each of its outputs' names.
        self._fold_failures: dict[str, str] = {}
        self._fed_inputs: set[str] = set()
        # Ops without a rule: (domain, op_type) -> (opset, count, first node's name).
        self._unsupported: dict[tuple[str, str], list[Any]] = {}
        self._first_error: TpuXdslError | None = None
        # Values not imported because an earlier node failed (the walk goes on to find
        # every unsupported op).
        self._poisoned: set[str] = set()
        # Inside a trial import (both branches of an If), errors propagate at once.
        self.strict = 0
        # Tensor names given to the copies of subgraph tensors (inlined If/Loop/Scan bodies).
        self._subgraph_names: set[str] = set()

    # -- values ------------------------------------------------------------------------

    def define(self, name: str, ssa: SSAValue) -> None:
        t = ssa.type
        assert isinstance(t, TensorType), f"{name}: {t}"

        self.values[name] = OnnxValue(name, tuple(t.get_shape()), numpy_dtype(t.element_type), ssa=ssa)

    def define_const(self, name: str, value: np.ndarray) -> None:
        self.values[name] = OnnxValue(name, tuple(value.shape), value.dtype, const=value)

    def unique_name(self, base: str, *, onnx_name: bool = False, reserve: bool = True) -> str:
        """`base`, or `base_2`, `base_3`... if taken. ONNX's own names are unique already;
        derived names must also avoid every ONNX tensor name."""
        name, n = base, 1
        while name in self._used_names or (not onnx_name and name in self._onnx_names):
            n += 1
            name = f"{base}_{n}"
        if reserve:
            self._used_names.add(name)
        return name

    def none_value(self) -> SSAValue:
        if self._none is None:
            op = self._top["top.none"].build(result_types=[NoneType()])
            self.builder.insert(op)
            self._none = op.results[0]
        return self._none

    def ssa(self, name: str, dtype: np.dtype | None) -> SSAValue:
        value = self.values[name]
        if value.const is not None:
            array = value.const if dtype is None else value.const.astype(dtype)
            return self.weight(name, array)
        assert value.ssa is not None
        if dtype is None or value.dtype == dtype:
            return value.ssa
        key = (name, str(dtype))
        if key not in self._weight_ssa:
            (converted,) = self.emit("cast", [value.ssa], None, [value.shape], [dtype], None, f"{name}_{dtype}")
            self._weight_ssa[key] = converted
        return self._weight_ssa[key]

    def weight(self, name: str, array: np.ndarray) -> SSAValue:
        """A `top.weight` holding `array` (one per constant and dtype)."""
        key = (name, str(array.dtype))
        if key in self._weight_ssa:
            return self._weight_ssa[key]
        weight_name = self.unique_name(name, onnx_name=True)
        # ascontiguousarray makes 0-d arrays 1-d: keep the shape.
        self.weights[weight_name] = np.ascontiguousarray(array).reshape(array.shape)
        op = self._top["top.weight"].build(
            result_types=[TensorType(element_type(array.dtype), array.shape)],
            attributes={"names": ArrayAttr([StringAttr(weight_name)])},
        )
        self.builder.insert(op)
        self._weight_ssa[key] = op.results[0]
        return op.results[0]

    def emit(
        self,
        kind: str,
        operands: Sequence[SSAValue | Sequence[SSAValue]],
        attrs: Mapping[str, Any] | None,
        result_shapes: Sequence[Sequence[int] | None] | None,
        dtypes: Sequence[np.dtype] | None,
        names: Sequence[str] | None,
        base_name: str | None,
    ) -> list[SSAValue]:
        op_class = self._top.get(f"top.{kind}")
        if op_class is None:
            raise ImportRuleError(f"no TOP op 'top.{kind}'")
        attrs = {k: v for k, v in (attrs or {}).items() if v is not None}
        if result_shapes is None:
            operand_shapes = [
                [_shape_of(v) for v in o] if isinstance(o, Sequence) else _shape_of(o)
                for o in operands
            ]
            result_shapes = shapes.infer_shapes(kind, operand_shapes, attrs)
        if dtypes is None:
            dtypes = [F32] * len(result_shapes)
        # A rule's shape arithmetic on hostile attributes can ask for anything: refuse it here.
        for i, (shape, dtype) in enumerate(zip(result_shapes, dtypes)):
            if shape is not None:
                label = names[i] if names is not None and i < len(names) and names[i] else base_name or kind
                check_tensor_size(f"top.{kind} result '{label}'", shape, np.dtype(dtype).itemsize)
        # A shape of None makes a `none` result (an optional output nothing reads).
        result_types: list[Attribute] = [
            NoneType() if s is None else TensorType(element_type(dt), tuple(int(d) for d in s))
            for s, dt in zip(result_shapes, dtypes, strict=True)
        ]
        if names is None:
            assert base_name is not None
            names = [
                self.unique_name(base_name if len(result_types) == 1 else f"{base_name}_{i}")
                for i in range(len(result_types))
            ]
        else:
            # A node may have more outputs than the op has results (e.g. Dropout's mask).
            names = list(names)[: len(result_types)]
            names = [n if n else self.unique_name(f"{names[0]}_unused{i}") for i, n in enumerate(names)]
            self._used_names.update(names)
        attributes = {k: from_py(v) for k, v in attrs.items()}
        attributes["names"] = ArrayAttr([StringAttr(n) for n in names])
        op = op_class.build(
            operands=[list(o) if isinstance(o, Sequence) else o for o in operands],
            result_types=[result_types] if _is_variadic_result(op_class) else result_types,
            attributes=attributes,
        )
        self.builder.insert(op)
        return list(op.results)

    # -- the walk --------------------------------------------------------------------------

    def run(self) -> ImportResult:
        graph = self.model.graph
        bound = bind_input_shapes(self.model, self.input_shapes, self.constant_inputs)
        arg_types = [TensorType(element_type(dt), shape) for _, shape, dt in bound]
        block = Block(arg_types=arg_types)
        self.builder = Builder(InsertPoint.at_end(block))
        for tensor in graph.initializer:
            self.define_const(tensor.name, numpy_helper.to_array(tensor))
        for name, array in self.constant_inputs.items():
            self.define_const(name, array)
        input_op = self._top["top.input"]
        for (name, shape, dtype), arg in zip(bound, block.args):
            op = input_op.build(
                operands=[arg],
                result_types=[arg.type],
                attributes={"names": ArrayAttr([StringAttr(name)])},
            )
            self.builder.insert(op)
            self._used_names.add(name)
            self._fed_inputs.add(name)
            self.define(name, op.results[0])
        self.import_nodes(graph.node)
        self.raise_collected()
        outputs = [self.output_value(v) for v in graph.output]
        self.builder.insert(func.ReturnOp(*outputs))
        main = func.FuncOp("main", (arg_types, [o.type for o in outputs]), Region(block))
        _remove_dead_ops(block)
        module = ModuleOp([main])
        module.attributes.update(
            {
                "module.name": StringAttr(self.model_name),
                "module.state": StringAttr("TOP_F32"),
                "module.chip": StringAttr("ALL"),
                "module.platform": StringAttr("ONNX"),
            }
        )
        for hook in registry.AFTER_IMPORT:  # a pre-quantized model's scales become its calibration
            hook(self, module)
        used = {
            op.attributes["names"].data[0].data  # type: ignore[union-attr]
            for op in block.ops
            if op.name == "top.weight"
        }
        weights = {k: v for k, v in self.weights.items() if k in used}
        return ImportResult(
            module, weights, [b[0] for b in bound], [v.name for v in graph.output],
            constant_inputs=dict(self.constant_inputs),
        )

    def output_value(self, info: onnx.ValueInfoProto) -> SSAValue:
        value = self.values.get(info.name)
        if value is None:
            raise ImportRuleError(f"graph output '{info.name}' is produced by no node")
        want = value.dtype
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
            want = elem_dtype(info.type.tensor_type.elem_type, f"output '{info.name}'")
        if value.const is not None:
            return self.weight(info.name, value.const.astype(want))
        assert value.ssa is not None
        if value.dtype == want:
            return value.ssa
        # The cast takes the output's name (post-processing reads `y`, not `y_float16`); the
        # value it converts, computed in f32, gets a derived one.
        owner = value.ssa.owner
        if isinstance(owner, Operation) and owner.name != "top.input" and info.name in tensor_names(owner):
            rename_result(value.ssa, self.unique_name(f"{info.name}_{value.dtype}"))
            (cast,) = self.emit("cast", [value.ssa], None, [value.shape], [want], [info.name], None)
        else:
            (cast,) = self.emit("cast", [value.ssa], None, [value.shape], [want], None, f"{info.name}_{want}")
        return cast

    def import_nodes(self, nodes: Iterable[onnx.NodeProto]) -> None:
        """Import nodes in order. Outside a trial, a node without a rule or whose rule
        fails is recorded and the walk goes on, so one error can name every unsupported op."""
        for node in nodes:
            if self.strict:
                self.import_node(node)
                continue
            if any(name in self._poisoned for name in node.input if name):
                self._note_unsupported_within(node)
                self._poisoned.update(n for n in node.output if n)
                continue
            try:
                self.import_node(node)
            except UnsupportedOpError:
                raise
            except TpuXdslError as e:  # a rule's or a shape rule's error: reported after the walk
                if self._first_error is None:
                    self._first_error = e
                self._note_unsupported_within(node)
                self._poisoned.update(n for n in node.output if n)

    def raise_collected(self) -> None:
        """Raise the error for every op type without a rule, else the first rule error."""
        if self._unsupported:
            listed = ", ".join(
                f"{f'{domain}.' if domain else ''}{op_type} (opset {opset}, {count} "
                f"node{'s' if count > 1 else ''}, first '{first}')"
                for (domain, op_type), (opset, count, first) in self._unsupported.items()
            )
            raise UnsupportedOpError(
                f"no import rule for ONNX op {listed}; `tpu-xdsl list-ops` lists the supported ones"
            )
        if self._first_error is not None:
            raise self._first_error

    def opset_of(self, node: onnx.NodeProto) -> tuple[str, int]:
        domain = node.domain if node.domain not in ("ai.onnx",) else ""
        return domain, self.opsets.get(domain, self.opsets.get("", 1))

    def find_rule(self, node: onnx.NodeProto, opset: int) -> registry.Rule | None:
        domain, _ = self.opset_of(node)
        return registry.find_rule(node.op_type, opset, domain)

    def _record_unsupported(self, node: onnx.NodeProto, domain: str, opset: int) -> None:
        entry = self._unsupported.setdefault((domain, node.op_type), [opset, 0, _node_label(node)])
        entry[1] += 1

    def _note_unsupported_within(self, node: onnx.NodeProto) -> None:
        """Record op types without a rule in a node that cannot be imported, and in its
        subgraphs (a control-flow op that was not inlined)."""
        domain, opset = self.opset_of(node)
        if node.op_type in CONTROL_FLOW_OPS and domain == "":
            for attr in node.attribute:
                for graph in (*([attr.g] if attr.HasField("g") else []), *attr.graphs):
                    for inner in unfoldable_nodes(graph):
                        self._note_unsupported_within(inner)
            return
        if node.op_type == "Constant" and domain == "":
            return
        if self.find_rule(node, opset) is None:
            self._record_unsupported(node, domain, opset)

    def import_node(self, node: onnx.NodeProto, opset: int | None = None) -> None:
        """Import one node; `opset` overrides the model's (for nodes the importer builds)."""
        domain, model_opset = self.opset_of(node)
        ctx = NodeContext(self, node, model_opset if opset is None else opset)
        for name in node.input:
            if name and name not in self.values:
                raise ImportRuleError(
                    f"{ctx.where}: input '{name}' is produced by no earlier node "
                    "(is the model truncated or corrupt?)"
                )
        for name in node.output:
            if name:
                self.producers[name] = node
        if self.try_fold(ctx, opset):
            return
        rule = self.find_rule(node, ctx.opset)
        if rule is None:
            if self.strict:
                raise UnsupportedOpError(f"{ctx.where}: no import rule for ONNX op {node.op_type}")
            self._record_unsupported(node, domain, ctx.opset)
            self._poisoned.update(n for n in node.output if n)
            return
        try:
            rule(ctx)
        except shapes.ShapeError as e:
            # The TOP op's shape rule refused what the rule emitted: say which ONNX node, and
            # when the sizes came from --input-shapes, that they may be what the model refuses.
            raise ctx.error(f"{e}{self._shapes_hint()}") from e
        except _RULE_FAULTS as e:
            # A rule's arithmetic failed. If ONNX's own shape inference refuses the node too (a
            # scale of the wrong length, an axis past the rank), the input is at fault: one line
            # naming the node. If ONNX accepts it, the fault is ours: it propagates (exit 3).
            refusal = self._onnx_refusal(ctx)
            if refusal is None:
                raise
            raise ctx.error(f"ONNX's shape inference refuses it: {refusal}; fix the node") from e
        for i, name in enumerate(node.output):
            if name and name not in self.values:
                raise ImportRuleError(f"{ctx.where}: the import rule did not produce output {i} '{name}'")

    def _shapes_hint(self) -> str:
        """What to check when a shape rule fails on sizes the user bound (--input-shapes)."""
        if not self.input_shapes:
            return ""
        given = str([list(s) for s in self.input_shapes]).replace(" ", "")
        return (f"; the model may not take the input shapes {given} (--input-shapes): many need sizes that "
                "their total stride divides (32 for most detectors)")

    def _onnx_refusal(self, ctx: NodeContext) -> str | None:
        """ONNX's verdict on a node given its inputs' types and constant values: the first
        line of its refusal, or None when it accepts the node or cannot judge it (an op of
        another domain, a dtype it cannot name)."""
        node = ctx.node
        try:
            schema = onnx.defs.get_schema(node.op_type, ctx.opset, node.domain)
            types, data = {}, {}
            for name in node.input:
                if not name:
                    continue
                value = self.values[name]
                elem = helper.np_dtype_to_tensor_dtype(np.dtype(value.dtype))
                types[name] = helper.make_tensor_type_proto(elem, list(value.shape))
                if value.const is not None:
                    data[name] = numpy_helper.from_array(np.asarray(value.const), name)
        except (onnx.defs.SchemaError, KeyError, TypeError, ValueError):
            return None
        opsets = [helper.make_opsetid(domain, version) for domain, version in self.opsets.items()]
        try:
            onnx.shape_inference.infer_node_outputs(schema, node, types, data, opset_imports=opsets)
        except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError, RuntimeError) as e:
            return _first_line(e)
        return None

    def try_fold(self, ctx: NodeContext, opset: int | None = None) -> bool:
        """Fold a node whose inputs are all constants with ONNX's reference implementation
        at the model's opset. A failure is recorded against the node's outputs, so an error
        about a value that had to be constant can say which node could not be evaluated."""
        node = ctx.node
        if node.op_type in _NEVER_FOLD or any(
            a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute
        ):
            return False
        present = [n for n in node.input if n]
        if any(self.values[n].const is None for n in present):
            return False
        if node.op_type != "Constant" and not present:
            return False
        feeds = [self.values[n].const if n else None for n in node.input]
        # The result is sized before the evaluation allocates it (a ConstantOfShape, an Expand...).
        try:
            predicted = folded_shapes(node, feeds, ctx.opset)
        except ValueError as e:
            raise ctx.error(str(e)) from e
        for shape in predicted or ():
            check_tensor_size(f"{ctx.where} result", shape, _result_itemsize(node, feeds))
        if predicted is not None and sum(element_count(s) for s in predicted) > _FOLD_LIMIT:
            for name in node.output:
                if name:
                    self._fold_failures[name] = f"{ctx.where} is not folded: its result is too large to fold at import"
            return False
        try:
            results = self.folder.evaluate(node, feeds, opset)
        except FoldError as e:
            if node.op_type == "Constant":
                raise ctx.error(f"cannot evaluate constant: {e}") from e
            for name in node.output:
                if name:
                    self._fold_failures[name] = f"{ctx.where} could not be evaluated at import ({e})"
            return False
        size = sum(r.size for r in results)
        if size > _FOLD_LIMIT:
            for name in node.output:
                if name:
                    self._fold_failures[name] = (
                        f"{ctx.where} is not folded: its result has {size} elements, more than "
                        f"the {_FOLD_LIMIT} folded at import"
                    )
            return False
        for name, result in zip([n for n in node.output if n], results):
            self.define_const(name, result)
        return True

    # -- subgraphs (control flow) ----------------------------------------------------------

    def fresh_subgraph_name(self, name: str, suffix: str) -> str:
        """A name for a tensor of an inlined subgraph: its own name while unused, else
        with `suffix` and a counter (both branches of an If, loop iterations)."""
        base = f"{name}{suffix}"
        candidate, n = base, 1
        while (
            candidate in self.values
            or candidate in self._used_names
            or candidate in self._poisoned
            or (candidate != name and candidate in self._onnx_names)
        ):
            n += 1
            candidate = f"{base}_{n}"
        self._used_names.add(candidate)
        self._subgraph_names.add(candidate)
        return candidate

    def define_fresh_const(self, base: str, array: np.ndarray) -> OnnxValue:
        name = self.fresh_subgraph_name(base, "")
        self.define_const(name, array)
        return self.values[name]

    def alias(self, name: str, source: str) -> None:
        """Make `name` another name of the value `source` (a subgraph output). A run-time
        value named inside a subgraph takes the new name in TOP, so the tensor keeps the
        name the graph gives it (e.g. a Loop's final state under the Loop's output name)."""
        value = self.values[source]
        self.values[name] = replace(value, name=name)
        self.producers[name] = helper.make_node("Identity", [source], [name])
        ssa = value.ssa
        if ssa is None or source not in self._subgraph_names or not isinstance(ssa, OpResult):
            return
        names = ssa.op.attributes.get("names")
        if isinstance(names, ArrayAttr) and ssa.index < len(names.data) and names.data[ssa.index].data == source:
            renamed = [n.data for n in names.data]
            renamed[ssa.index] = name
            ssa.op.attributes["names"] = ArrayAttr([StringAttr(n) for n in renamed])
            self._used_names.add(name)

    def is_poisoned(self, name: str) -> bool:
        return name in self._poisoned

    def poison(self, name: str) -> None:
        if name:
            self._poisoned.add(name)

    def checkpoint(self) -> tuple[Any, ...]:
        """The importer's state, to undo a trial import (`rollback`)."""
        block = self.builder.insertion_point.block
        return (
            block.last_op, dict(self.values), set(self._used_names), dict(self._weight_ssa),
            dict(self.weights), self._none, dict(self.producers), dict(self._fold_failures),
        )

    def rollback(self, state: tuple[Any, ...]) -> None:
        last, values, used, weight_ssa, weights, none, producers, failures = state
        block = self.builder.insertion_point.block
        while block.last_op is not None and block.last_op is not last:
            block.erase_op(block.last_op, safe_erase=False)
        self.values, self._used_names, self._weight_ssa = values, used, weight_ssa
        self.weights, self._none, self.producers, self._fold_failures = weights, none, producers, failures

    # -- why a value is not a constant ---------------------------------------------------

    def not_constant_error(self, ctx: NodeContext, name: str, what: str) -> ImportRuleError:
        """The error for a value that must be a constant and is not: it names the node that
        could not be folded and why, or the run-time inputs the value depends on."""
        failure, inputs = self.why_not_constant(name)
        if failure is not None:
            return ctx.error(f"{what} must be a constant; {failure}")
        if inputs:
            listed = ", ".join(f"'{n}'" for n in inputs)
            return NeedsConstantError(
                f"{ctx.where}: {what} must be a constant but depends on the run-time input(s) "
                f"{listed}; bind them with --constant-inputs NAME=VALUE",
                inputs,
                _node_label(ctx.node),
            )
        return ctx.error(f"{what} must be a constant (it is computed at run time)")

    def why_not_constant(self, name: str) -> tuple[str | None, list[str]]:
        """(the nearest node whose folding failed, else None; the fed inputs `name`'s value
        depends on). Shape and Size read only shapes, which are static."""
        seen: set[str] = set()
        inputs: list[str] = []
        queue = [name]
        while queue:
            current = queue.pop(0)
            if current in seen or not current:
                continue
            seen.add(current)
            if current in self._fold_failures:
                return self._fold_failures[current], []
            if current in self._fed_inputs:
                inputs.append(current)
                continue
            value = self.values.get(current)
            if value is not None and value.const is not None:
                continue
            node = self.producers.get(current)
            if node is None or node.op_type in ("Shape", "Size"):
                continue
            queue.extend(node.input)
        return None, sorted(inputs)

def _shape_of(value: SSAValue) -> tuple[int, ...] | None:
    t = value.type
    if isinstance(t, TensorType):
        return tuple(t.get_shape())
    return None


def _is_variadic_result(op_class: type) -> bool:
    from xdsl.irdl import VarResultDef

    op_def = op_class.get_irdl_definition()  # type: ignore[attr-defined]
    return len(op_def.results) == 1 and isinstance(op_def.results[0][1], VarResultDef)


def _node_label(node: onnx.NodeProto) -> str:
    return node.name or (node.output[0] if node.output else node.op_type)


def _remove_dead_ops(block: Block) -> None:
    """Erase ops whose results nothing uses (the walk emits ops in order, so one pass)."""
    for op in reversed(list(block.ops)):
        if op.name.startswith("top.") and op.name != "top.input" and all(not r.uses for r in op.results):
            block.erase_op(op)


def import_onnx(
    model: onnx.ModelProto | str | Path,
    model_name: str | None = None,
    input_shapes: Sequence[Sequence[int]] | None = None,
    constant_inputs: Mapping[str, Any] | None = None,
    steering_values: Mapping[str, np.ndarray] | None = None,
    validated: bool = False,
) -> ImportResult:
    """Import an ONNX model (a ModelProto or a path) into a TOP module and weights.

    A ModelProto is validated first (`frontend.validate`) unless `validated` says the caller
    has it from `onnx_model.load_model`, which validates what it reads.

    `constant_inputs` binds model inputs to constants (they leave the module's inputs).
    `steering_values` (a test input) may bind inputs that only steer shapes or branches,
    when a shape or branch needs their value at import, as TPU-MLIR does for
    shape-influencing inputs; each such binding is a note in the result.
    """
    if not isinstance(model, onnx.ModelProto):
        path = Path(model)
        model = load_model(path)
        model_name = model_name or path.stem
        validated = True
    name = model_name or (model.graph.name or "model")
    if model.functions:
        # Model-local functions (exporters write modules as functions) become their bodies.
        from onnx import inliner

        try:
            model = inliner.inline_local_functions(model, convert_version=True)
        except Exception as e:  # the inliner's own checks of the functions: a malformed model
            raise InvalidModelError(f"model '{name}': its local functions cannot be inlined ({_first_line(e)})") from e
        validated = False  # the inlined bodies are new nodes
    if not validated:
        validate_model(model, f"model '{name}'")
    bound = binding.typed_constants(model, constant_inputs or {})
    notes = [binding.bound_note(n, v, "--constant-inputs") for n, v in bound.items()]
    steering = binding.steering_only_inputs(model)
    while True:
        try:
            result = OnnxImporter(model, name, input_shapes, constant_inputs=bound).run()
        except NeedsConstantError as e:
            usable = [
                n for n in e.inputs
                if steering_values is not None and n in steering_values and n in steering and n not in bound
            ]
            if not usable or len(usable) != len(e.inputs):
                raise
            for n in usable:
                bound[n] = binding.typed_constants(model, {n: steering_values[n]})[n]  # type: ignore[index]
                notes.append(binding.steering_note(n, bound[n], e.node))
            continue
        result.notes = notes + result.notes
        return result


def _result_itemsize(node: onnx.NodeProto, feeds: Sequence[np.ndarray | None]) -> int:
    """The bytes per element of a folded result, at least 4 (what TOP computes in)."""
    if node.op_type == "ConstantOfShape":
        value = next((a.t for a in node.attribute if a.name == "value" and a.HasField("t")), None)
        return max(helper.tensor_dtype_to_np_dtype(value.data_type).itemsize if value else 4, 4)
    data = feeds[1] if node.op_type == "Where" and len(feeds) > 1 else feeds[0] if feeds else None
    return max(data.dtype.itemsize if data is not None else 4, 4)


def _first_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:200]}" if lines else type(error).__name__


def supported_ops() -> Iterable[str]:
    return registry.supported_op_types()
