"""Import an ONNX model into a TOP module and a weight table.

The importer walks the graph in order. Input dims are bound first (from the
model or `--input-shapes`), so every shape is static. A node whose inputs are
all constants is folded to a constant with ONNX's reference implementation,
which turns shape-computing subgraphs (Shape, Gather, Concat, Range,
ConstantOfShape, Cast, ...) into constants; other nodes go through the rule
registered for their op type and opset (`tpu_xdsl.frontend.registry`). Ops
nothing uses are removed at the end. Tensor names are the ONNX names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import helper, numpy_helper
from xdsl.builder import Builder, InsertPoint
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, NoneType, StringAttr, TensorType
from xdsl.ir import Attribute, Block, Region, SSAValue

from tpu_xdsl.dialects import Top, shapes
from tpu_xdsl.dialects.attr_values import from_py
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.frontend import registry
from tpu_xdsl.interp.dtypes import element_type

F32 = np.dtype(np.float32)

# Nodes never folded even when their inputs are constant.
_NEVER_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
# Folding a node whose result is larger than this many elements keeps it an op.
_FOLD_LIMIT = 1 << 24


class ModelLoadError(TpuXdslError):
    """The model file cannot be read as ONNX."""


class UnsupportedOpError(TpuXdslError):
    """An ONNX node has no import rule for its op type and opset."""


class ShapeBindingError(TpuXdslError):
    """Input shapes are missing or do not fit the model."""


class ImportRuleError(TpuXdslError):
    """A node's attributes or inputs are outside what its import rule handles."""


@dataclass
class OnnxValue:
    """An ONNX tensor during import: a TOP value, or a constant known at import."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    ssa: SSAValue | None = None
    const: np.ndarray | None = None


def load_model(path: str | Path) -> onnx.ModelProto:
    """Read an ONNX file (with its external data) or raise a one-line error."""
    path = Path(path)
    if not path.is_file():
        raise ModelLoadError(f"{path}: no such model file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, RuntimeWarning, ValueError) as e:
        raise ModelLoadError(
            f"{path}: not an ONNX model (protobuf parse failed: {e}); pass a .onnx file"
        ) from e
    if not model.graph.node and not model.graph.output:
        raise ModelLoadError(f"{path}: not an ONNX model (no graph); pass a .onnx file")
    try:
        onnx.external_data_helper.load_external_data_for_model(model, str(path.parent))
    except (OSError, onnx.checker.ValidationError) as e:
        raise ModelLoadError(
            f"{path}: external data missing ({e}); keep the data files beside the model"
        ) from e
    return model


def model_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that are not initializers (the tensors a user feeds)."""
    initializers = {t.name for t in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in initializers]


def _onnx_dtype(elem_type: int, where: str) -> np.dtype:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError) as e:
        raise ImportRuleError(f"{where}: unsupported element type {elem_type}") from e


def bind_input_shapes(
    model: onnx.ModelProto, input_shapes: Sequence[Sequence[int]] | None
) -> list[tuple[str, tuple[int, ...], np.dtype]]:
    """Static (name, shape, dtype) of each model input, dynamic dims bound by `input_shapes`."""
    inputs = model_inputs(model)
    if input_shapes is not None and len(input_shapes) != len(inputs):
        raise ShapeBindingError(
            f"--input-shapes gives {len(input_shapes)} shape(s) but the model has "
            f"{len(inputs)} input(s): {', '.join(v.name for v in inputs)}"
        )
    bound = []
    for i, value in enumerate(inputs):
        tensor_type = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            raise ShapeBindingError(f"input '{value.name}' is not a tensor (sequences and maps are not supported)")
        dims = list(tensor_type.shape.dim)
        dtype = _onnx_dtype(tensor_type.elem_type, f"input '{value.name}'")
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
            shape = []
            for axis, dim in enumerate(dims):
                if not dim.HasField("dim_value") or dim.dim_value <= 0:
                    label = f" ('{dim.dim_param}')" if dim.dim_param else ""
                    raise ShapeBindingError(
                        f"input '{value.name}' dim {axis}{label} is dynamic; give its size "
                        f"with --input-shapes"
                    )
                shape.append(dim.dim_value)
            shape = tuple(shape)
        bound.append((value.name, shape, dtype))
    return bound


@dataclass
class ImportResult:
    module: ModuleOp
    weights: dict[str, np.ndarray]
    input_names: list[str]
    output_names: list[str]


class NodeContext:
    """What an import rule sees of one ONNX node, and how it emits TOP ops."""

    def __init__(self, importer: OnnxImporter, node: onnx.NodeProto, opset: int):
        self.importer = importer
        self.node = node
        self.opset = opset
        self._attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        self._emitted = 0

    # -- reading the node ----------------------------------------------------------

    @property
    def op_type(self) -> str:
        return self.node.op_type

    @property
    def where(self) -> str:
        name = self.node.name or (self.node.output[0] if self.node.output else "?")
        return f"node '{name}' ({self.node.op_type}, opset {self.opset})"

    def error(self, message: str) -> ImportRuleError:
        return ImportRuleError(f"{self.where}: {message}")

    @property
    def num_inputs(self) -> int:
        return len(self.node.input)

    @property
    def num_outputs(self) -> int:
        return len(self.node.output)

    def has_input(self, i: int) -> bool:
        return i < len(self.node.input) and self.node.input[i] != ""

    def has_output(self, i: int) -> bool:
        return i < len(self.node.output) and self.node.output[i] != ""

    def value(self, i: int) -> OnnxValue:
        if not self.has_input(i):
            raise self.error(f"input {i} is required")
        return self.importer.values[self.node.input[i]]

    def const(self, i: int) -> np.ndarray | None:
        """The constant value of input i, or None when absent or computed at run time."""
        if not self.has_input(i):
            return None
        return self.importer.values[self.node.input[i]].const

    def require_const(self, i: int, what: str) -> np.ndarray:
        value = self.const(i)
        if value is None:
            raise self.error(f"{what} (input {i}) must be a constant")
        return value

    def shape(self, i: int) -> tuple[int, ...]:
        return self.value(i).shape

    def rank(self, i: int) -> int:
        return len(self.value(i).shape)

    def dtype(self, i: int) -> np.dtype:
        return self.value(i).dtype

    def attr(self, name: str, default: Any = None) -> Any:
        value = self._attrs.get(name, default)
        if isinstance(value, bytes):
            return value.decode()
        if isinstance(value, list) and value and isinstance(value[0], bytes):
            return [v.decode() for v in value]
        return value

    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def output_name(self, i: int = 0) -> str:
        return self.node.output[i]

    # -- emitting ops ------------------------------------------------------------------

    def input(self, i: int, dtype: np.dtype | None = F32) -> SSAValue:
        """Input i as a TOP value (a `top.weight` for a constant, `top.none` when absent).

        With `dtype` set (f32 by default), a value of another dtype is converted:
        constants at import, run-time values by a `top.cast`.
        """
        if not self.has_input(i):
            return self.importer.none_value()
        return self.importer.ssa(self.node.input[i], dtype)

    def emit(
        self,
        kind: str,
        operands: Sequence[SSAValue | Sequence[SSAValue]],
        attrs: Mapping[str, Any] | None = None,
        *,
        shapes_: Sequence[Sequence[int]] | None = None,
        dtypes: Sequence[np.dtype] | None = None,
        name: str | None = None,
    ) -> list[SSAValue]:
        """Emit an intermediate `top.<kind>`; its tensors get derived names."""
        base = name or f"{self.output_name(0)}_{kind}"
        return self.importer.emit(kind, operands, attrs, shapes_, dtypes, None, base)

    def output(
        self,
        kind: str,
        operands: Sequence[SSAValue | Sequence[SSAValue]],
        attrs: Mapping[str, Any] | None = None,
        *,
        shapes_: Sequence[Sequence[int]] | None = None,
        dtypes: Sequence[np.dtype] | None = None,
    ) -> list[SSAValue]:
        """Emit `top.<kind>` whose results are this node's outputs, under the ONNX names."""
        names = list(self.node.output)
        results = self.importer.emit(kind, operands, attrs, shapes_, dtypes, names, None)
        for name, result in zip(names, results):
            if name and isinstance(result.type, TensorType):
                self.importer.define(name, result)
        return results

    def constant(self, array: np.ndarray, tag: str) -> SSAValue:
        """A `top.weight` for a constant the rule computes, under a fresh derived name."""
        array = np.asarray(array)
        name = self.importer.unique_name(f"{self.output_name(0)}_{tag}", reserve=False)
        return self.importer.weight(name, array)

    def set_output(self, i: int, value: SSAValue) -> None:
        """Make an already emitted value the node's output i (its name stays)."""
        self.importer.define(self.node.output[i], value)

    def set_const(self, i: int, value: np.ndarray) -> None:
        """Make output i a constant known at import."""
        self.importer.define_const(self.node.output[i], np.asarray(value))


@dataclass
class OnnxImporter:
    model: onnx.ModelProto
    model_name: str
    input_shapes: Sequence[Sequence[int]] | None = None
    values: dict[str, OnnxValue] = field(default_factory=dict)
    weights: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        registry.load_all()
        self.opsets = {o.domain or "": o.version for o in self.model.opset_import}
        self._top = {op.name: op for op in Top.operations}
        self._weight_ssa: dict[tuple[str, str], SSAValue] = {}
        self._none: SSAValue | None = None
        self._used_names: set[str] = set()
        graph = self.model.graph
        # Every name the ONNX graph uses, so derived names never collide with later ones.
        self._onnx_names: set[str] = {v.name for v in (*graph.input, *graph.output)}
        self._onnx_names.update(t.name for t in graph.initializer)
        self._onnx_names.update(n for node in graph.node for n in (*node.input, *node.output) if n)

    # -- values ------------------------------------------------------------------------

    def define(self, name: str, ssa: SSAValue) -> None:
        t = ssa.type
        assert isinstance(t, TensorType), f"{name}: {t}"
        from tpu_xdsl.interp.dtypes import numpy_dtype

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
            (cast,) = self.emit("cast", [value.ssa], None, [value.shape], [dtype], None, f"{name}_{dtype}")
            self._weight_ssa[key] = cast
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
        result_shapes: Sequence[Sequence[int]] | None,
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
        # A shape of None makes a `none` result (an optional output nothing reads).
        result_types: list[Attribute] = [
            NoneType() if s is None else TensorType(element_type(dt), tuple(int(d) for d in s))
            for s, dt in zip(result_shapes, dtypes, strict=True)
        ]
        if names is None:
            assert base_name is not None
            names = [self.unique_name(base_name if len(result_types) == 1 else f"{base_name}_{i}") for i in range(len(result_types))]
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
        bound = bind_input_shapes(self.model, self.input_shapes)
        arg_types = [TensorType(element_type(dt), shape) for _, shape, dt in bound]
        block = Block(arg_types=arg_types)
        self.builder = Builder(InsertPoint.at_end(block))
        for tensor in graph.initializer:
            self.define_const(tensor.name, numpy_helper.to_array(tensor))
        input_op = self._top["top.input"]
        for (name, shape, dtype), arg in zip(bound, block.args):
            op = input_op.build(
                operands=[arg],
                result_types=[arg.type],
                attributes={"names": ArrayAttr([StringAttr(name)])},
            )
            self.builder.insert(op)
            self._used_names.add(name)
            self.define(name, op.results[0])
        for node in graph.node:
            self.import_node(node)
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
        from tpu_xdsl.frontend.rules.quantized import attach_model_scales

        attach_model_scales(self, module)  # a pre-quantized model's scales become its calibration
        used = {
            op.attributes["names"].data[0].data  # type: ignore[union-attr]
            for op in block.ops
            if op.name == "top.weight"
        }
        weights = {k: v for k, v in self.weights.items() if k in used}
        return ImportResult(module, weights, [b[0] for b in bound], [v.name for v in graph.output])

    def output_value(self, info: onnx.ValueInfoProto) -> SSAValue:
        value = self.values.get(info.name)
        if value is None:
            raise ImportRuleError(f"graph output '{info.name}' is produced by no node")
        want = value.dtype
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
            want = _onnx_dtype(info.type.tensor_type.elem_type, f"output '{info.name}'")
        if value.const is not None:
            return self.weight(info.name, value.const.astype(want))
        assert value.ssa is not None
        if value.dtype == want:
            return value.ssa
        (cast,) = self.emit("cast", [value.ssa], None, [value.shape], [want], None, f"{info.name}_{want}")
        return cast

    def import_node(self, node: onnx.NodeProto) -> None:
        domain = node.domain if node.domain not in ("ai.onnx",) else ""
        opset = self.opsets.get(domain, self.opsets.get("", 1))
        ctx = NodeContext(self, node, opset)
        for name in node.input:
            if name and name not in self.values:
                raise ImportRuleError(
                    f"{ctx.where}: input '{name}' is produced by no earlier node "
                    "(is the model truncated or corrupt?)"
                )
        if self.try_fold(ctx):
            return
        rule = registry.find_rule(node.op_type, opset, domain)
        if rule is None:
            label = f"{domain}." if domain else ""
            raise UnsupportedOpError(
                f"{ctx.where}: ONNX op {label}{node.op_type} at opset {opset} has no import rule; "
                f"`tpu-xdsl list-ops` lists the supported ones"
            )
        rule(ctx)
        for i, name in enumerate(node.output):
            if name and name not in self.values:
                raise ImportRuleError(f"{ctx.where}: the import rule did not produce output {i} '{name}'")

    def try_fold(self, ctx: NodeContext) -> bool:
        """Fold a node whose inputs are all constants with ONNX's reference implementation."""
        node = ctx.node
        if node.op_type in _NEVER_FOLD or any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            return False
        present = [n for n in node.input if n]
        if any(self.values[n].const is None for n in present):
            return False
        if node.op_type == "Constant" or present:
            pass
        else:
            return False
        from onnx.reference import ReferenceEvaluator

        feeds = {n: self.values[n].const for n in present}
        try:
            evaluator = ReferenceEvaluator(node, opsets={node.domain or "": ctx.opset})
            results = evaluator.run(None, feeds)
        except Exception as e:  # the reference raises many kinds; folding is optional
            if node.op_type == "Constant":
                raise ctx.error(f"cannot evaluate constant: {e}") from e
            return False
        if sum(np.asarray(r).size for r in results) > _FOLD_LIMIT:
            return False
        for name, result in zip(node.output, results):
            if name:
                self.define_const(name, np.asarray(result))
        return True


def _shape_of(value: SSAValue) -> tuple[int, ...] | None:
    t = value.type
    if isinstance(t, TensorType):
        return tuple(t.get_shape())
    return None


def _is_variadic_result(op_class: type) -> bool:
    from xdsl.irdl import VarResultDef

    op_def = op_class.get_irdl_definition()  # type: ignore[attr-defined]
    return len(op_def.results) == 1 and isinstance(op_def.results[0][1], VarResultDef)


def _remove_dead_ops(block: Block) -> None:
    """Erase ops whose results nothing uses (the walk emits ops in order, so one pass)."""
    for op in reversed(list(block.ops)):
        if op.name.startswith("top.") and op.name != "top.input" and all(not r.uses for r in op.results):
            block.erase_op(op)


def import_onnx(
    model: onnx.ModelProto | str | Path,
    model_name: str | None = None,
    input_shapes: Sequence[Sequence[int]] | None = None,
) -> ImportResult:
    """Import an ONNX model (a ModelProto or a path) into a TOP module and weights."""
    if not isinstance(model, onnx.ModelProto):
        path = Path(model)
        model = load_model(path)
        model_name = model_name or path.stem
    return OnnxImporter(model, model_name or (model.graph.name or "model"), input_shapes).run()


def supported_ops() -> Iterable[str]:
    return registry.supported_op_types()
