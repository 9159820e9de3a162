"""Check an ONNX model from an untrusted file before anything reads it: one pass over the
ModelProto that refuses, in one line naming the tensor, node or attribute, what would
otherwise crash the importer or make it allocate without bound.

`parse_model` turns any protobuf failure into an error; `load_external_data` reads external
tensors only from inside the model's folder and only the bytes the file holds;
`validate_model` checks names (valid UTF-8), graph inputs and outputs, every tensor
(element type, dims against the data and the size limit) and every node (outputs,
attributes against the ONNX schema of the model's opset, required attributes). onnx.checker
is not used: it accepts some of these and crashes on others.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, defs, helper

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.limits import check_tensor_size, element_count


class InvalidModelError(TpuXdslError):
    """The ONNX model is malformed: a field contradicts another or the ONNX specification."""


# Element types the IR has (tpu_xdsl.kernels.dtypes).
SUPPORTED_TYPES = frozenset(
    {
        TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE, TensorProto.BOOL,
        TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64,
        TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64,
    }
)
# The TensorProto field holding the values of each type when raw_data is empty.
_TYPED_FIELD: dict[int, str] = {
    TensorProto.FLOAT: "float_data",
    TensorProto.DOUBLE: "double_data",
    TensorProto.INT64: "int64_data",
    TensorProto.UINT32: "uint64_data",
    TensorProto.UINT64: "uint64_data",
}
_VALUE_FIELDS = ("float_data", "double_data", "int32_data", "int64_data", "uint64_data", "string_data")

_INTEGER_TENSORS = frozenset(
    f"tensor({w})" for w in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
)
# The field holding each attribute type's value (scalars are optional fields, lists repeated).
_ATTR_FIELDS = {
    AttributeProto.FLOAT: "f", AttributeProto.INT: "i", AttributeProto.STRING: "s",
    AttributeProto.TENSOR: "t", AttributeProto.GRAPH: "g", AttributeProto.SPARSE_TENSOR: "sparse_tensor",
    AttributeProto.TYPE_PROTO: "tp", AttributeProto.FLOATS: "floats", AttributeProto.INTS: "ints",
    AttributeProto.STRINGS: "strings", AttributeProto.TENSORS: "tensors", AttributeProto.GRAPHS: "graphs",
    AttributeProto.SPARSE_TENSORS: "sparse_tensors", AttributeProto.TYPE_PROTOS: "type_protos",
}
_SCALAR_ATTRS = frozenset({"f", "i", "s", "t", "g", "sparse_tensor", "tp"})


def type_name(elem_type: int) -> str:
    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return str(elem_type)


def _attr_type_name(attr_type: int) -> str:
    try:
        return AttributeProto.AttributeType.Name(attr_type)
    except ValueError:
        return str(attr_type)


def _show(name: object) -> str:
    """A name for a message: itself if it is text, else its bytes escaped."""
    if isinstance(name, str) and name.isprintable():
        return name if len(name) <= 80 else name[:77] + "..."
    return repr(name)[:80]


def _text(name: object, what: str) -> str:
    """`name` (protobuf gives invalid UTF-8 in a string field as bytes) or an error; a control
    character (a newline...) would break the one-line messages and the .mlir that name it."""
    if not isinstance(name, str):
        raise InvalidModelError(f"{what} {_show(name)} is not valid UTF-8 text; rename it in the model")
    if not name.isprintable() and any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name):
        raise InvalidModelError(f"{what} {name[:80]!r} holds a control character; rename it in the model")
    return name


# -- reading the file ----------------------------------------------------------------------


def parse_model(data: bytes, path: Path) -> onnx.ModelProto:
    """The ModelProto in `data`, or a one-line error for anything protobuf cannot parse."""
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as e:  # DecodeError, RuntimeWarning, RecursionError...: all mean "not a model"
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InvalidModelError(
            f"{path}: not an ONNX model (protobuf parse failed: {reason[:200]}); pass a .onnx file"
        ) from e
    return model


def _all_tensors(graph: onnx.GraphProto) -> Iterable[tuple[TensorProto, str]]:
    """Every TensorProto of `graph` and its subgraphs, with what to call it."""
    for t in graph.initializer:
        yield t, f"initializer '{_show(t.name)}'"
    for node in graph.node:
        for attr in node.attribute:
            where = f"attribute '{_show(attr.name)}' of node '{_show(node.name or node.op_type)}'"
            if attr.HasField("t"):
                yield attr.t, where
            for t in attr.tensors:
                yield t, where
            for sub in (*([attr.g] if attr.HasField("g") else []), *attr.graphs):
                yield from _all_tensors(sub)


def load_external_data(model: onnx.ModelProto, path: Path) -> None:
    """Read every external tensor of `model` into its raw_data. The data file must lie in the
    model's folder (no `..`, no absolute path) and hold the bytes the tensor declares."""
    folder = path.parent.resolve()
    for tensor, what in _all_tensors(model.graph):
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        _load_external_tensor(tensor, f"{path}: {what}", folder)


def _load_external_tensor(tensor: TensorProto, what: str, folder: Path) -> None:
    entries: dict[str, str] = {}
    for entry in tensor.external_data:
        key = _text(entry.key, f"{what}: external data key")
        entries[key] = _text(entry.value, f"{what}: external data '{key}'")
    location = entries.get("location", "")
    if not location:
        raise InvalidModelError(f"{what}: external data has no location; give the data file's name")
    if os.path.isabs(location) or ".." in Path(location).parts or "\0" in location:
        raise InvalidModelError(
            f"{what}: external data location '{_show(location)}' is outside the model's folder; "
            "keep the data files beside the model"
        )
    file = (folder / location).resolve()
    if not file.is_relative_to(folder):
        raise InvalidModelError(
            f"{what}: external data location '{_show(location)}' leads outside the model's folder"
        )
    if not file.is_file():
        raise InvalidModelError(
            f"{what}: external data missing: no file '{_show(location)}'; keep the data files beside the model"
        )
    numbers = {}
    for key in ("offset", "length"):
        if key not in entries:
            continue
        try:
            numbers[key] = int(entries[key])
        except ValueError:
            raise InvalidModelError(f"{what}: external data {key} '{_show(entries[key])}' is not a number") from None
        if numbers[key] < 0:
            raise InvalidModelError(f"{what}: external data {key} {numbers[key]} is negative")
    size = file.stat().st_size
    offset = numbers.get("offset", 0)
    length = numbers.get("length", size - offset)
    if offset + length > size:
        raise InvalidModelError(
            f"{what}: external data offset {offset} + length {length} is beyond the end of "
            f"'{_show(location)}' ({size} bytes); the data file is truncated or not the model's"
        )
    # The declared dims decide the bytes needed: check them before reading.
    _check_dims_and_type(tensor, what)
    expected = element_count(tensor.dims) * np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
    if length != expected:
        raise InvalidModelError(
            f"{what}: external data holds {length} bytes, dims {list(tensor.dims)} of "
            f"{type_name(tensor.data_type)} need {expected}"
        )
    with open(file, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    if len(data) != length:
        raise InvalidModelError(f"{what}: external data file '{_show(location)}' ended early")
    tensor.raw_data = data
    tensor.data_location = TensorProto.DEFAULT
    del tensor.external_data[:]


# -- the model -------------------------------------------------------------------------------


def validate_model(model: onnx.ModelProto, where: str = "model") -> None:
    """Refuse a model whose fields contradict each other or the ONNX specification."""
    opsets: dict[str, int] = {}
    for opset in model.opset_import:
        domain = _text(opset.domain, f"{where}: opset domain")
        if opset.version < 1:
            raise InvalidModelError(f"{where}: opset version {opset.version} of domain '{domain}' is not >= 1")
        if ("" if domain == "ai.onnx" else domain) in opsets:
            raise InvalidModelError(f"{where}: domain '{domain or 'ai.onnx'}' is imported twice in opset_import")
        opsets["" if domain == "ai.onnx" else domain] = opset.version
    graph = model.graph
    if not graph.output:
        raise InvalidModelError(f"{where}: the graph has no outputs; a model must name at least one output")
    _check_graph(graph, opsets, f"{where}: ", frozenset(), top=True)


def _check_graph(
    graph: onnx.GraphProto, opsets: Mapping[str, int], prefix: str, outer: frozenset[str], top: bool
) -> None:
    """`outer`: the names of enclosing graphs a subgraph may read."""
    label = "graph" if top else f"subgraph '{_show(graph.name)}'"
    _text(graph.name, f"{prefix}{label} name")
    _unique(graph.input, f"{prefix}{label} input")
    _unique(graph.output, f"{prefix}{label} output")
    _unique(graph.initializer, f"{prefix}initializer")
    for output in graph.output:
        if not output.name:
            raise InvalidModelError(f"{prefix}{label} has an output with no name")
    declared: dict[str, tuple[int, int | None]] = {}
    initialized = {t.name for t in graph.initializer}
    for kind, infos in (("input", graph.input), ("output", graph.output), ("value_info", graph.value_info)):
        for info in infos:
            # A fed input needs its element type; subgraphs may leave theirs to be inferred.
            required = top and kind == "input" and info.name not in initialized
            _check_value_info(info, f"{prefix}{label} {kind}", declared, kind != "value_info", required)
    for tensor in graph.initializer:
        if not tensor.name:
            raise InvalidModelError(f"{prefix}{label} has an initializer with no name")
        _check_tensor(tensor, f"{prefix}initializer '{_text(tensor.name, f'{prefix}initializer name')}'")
    if graph.sparse_initializer:
        name = _show(graph.sparse_initializer[0].values.name)
        raise InvalidModelError(f"{prefix}sparse initializer '{name}' is not supported; store it dense")
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    # Element types known without running anything: the inputs', initializers' and Constants'.
    known = {v.name: v.type.tensor_type.elem_type for v in graph.input if v.type.tensor_type.elem_type}
    known.update((t.name, t.data_type) for t in graph.initializer)
    for node in graph.node:
        _check_node(node, opsets, prefix, defined, outer, known)
        value = next((a.t for a in node.attribute if a.name == "value" and a.HasField("t")), None)
        if node.op_type == "Constant" and value is not None and node.output:
            known[node.output[0]] = value.data_type
    for output in graph.output:
        if output.name not in defined and output.name not in outer:
            raise InvalidModelError(f"{prefix}{label} output '{output.name}' is produced by no node")


def _unique(items: Iterable, what: str) -> None:
    seen: set[str] = set()
    for item in items:
        name = _text(item.name, f"{what} name")
        if name in seen:
            raise InvalidModelError(f"{what} '{_show(name)}' is listed twice; each name must be unique")
        seen.add(name)


def _check_value_info(
    info: onnx.ValueInfoProto,
    what: str,
    declared: dict[str, tuple[int, int | None]],
    typed: bool,
    required: bool,
) -> None:
    """`typed`: the element type must be one the IR has (a graph input or output);
    `required`: and it must be given."""
    name = _text(info.name, f"{what} name")
    if not info.type.HasField("tensor_type"):
        return
    tensor_type = info.type.tensor_type
    elem = tensor_type.elem_type
    if typed and elem not in SUPPORTED_TYPES and (elem or required):
        raise InvalidModelError(
            f"{what} '{_show(name)}': element type {type_name(elem)} is not supported; "
            f"supported: {_supported_list()}"
        )
    rank = len(tensor_type.shape.dim) if tensor_type.HasField("shape") else None
    for dim in tensor_type.shape.dim:
        if dim.HasField("dim_param"):
            _text(dim.dim_param, f"{what} '{_show(name)}': dim name")
    previous = declared.get(name)
    declared[name] = (elem, rank)
    if previous is None:
        return
    old_elem, old_rank = previous
    if elem and old_elem and elem != old_elem:
        raise InvalidModelError(
            f"{what} '{_show(name)}' is declared {type_name(elem)} here and {type_name(old_elem)} before; "
            "the model's type information conflicts"
        )
    if rank is not None and old_rank is not None and rank != old_rank:
        raise InvalidModelError(
            f"{what} '{_show(name)}' is declared rank {rank} here and rank {old_rank} before; "
            "the model's shape information conflicts"
        )


def _supported_list() -> str:
    return ", ".join(sorted(type_name(t) for t in SUPPORTED_TYPES))


def _check_dims_and_type(tensor: TensorProto, what: str) -> None:
    if tensor.data_type not in SUPPORTED_TYPES:
        raise InvalidModelError(
            f"{what}: element type {type_name(tensor.data_type)} is not supported; supported: {_supported_list()}"
        )
    dims = list(tensor.dims)
    if any(d < 0 for d in dims):
        raise InvalidModelError(f"{what}: dims {dims} has a negative dimension")
    itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
    check_tensor_size(what, dims, itemsize)


def _check_tensor(tensor: TensorProto, what: str) -> None:
    """Element type, dims and the amount of data agree, and the tensor fits the size limit."""
    _check_dims_and_type(tensor, what)
    if tensor.data_location == TensorProto.EXTERNAL:
        raise InvalidModelError(
            f"{what}: its data is external and was not loaded; load the model from its file, beside its data"
        )
    if tensor.HasField("segment"):
        raise InvalidModelError(f"{what}: segmented tensors are not supported")
    dims = list(tensor.dims)
    count = element_count(dims)
    itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
    raw = len(tensor.raw_data)
    type_text = type_name(tensor.data_type)
    if raw:
        if raw % itemsize:
            raise InvalidModelError(
                f"{what}: raw_data has {raw} bytes, not a multiple of the {itemsize}-byte {type_text}"
            )
        if raw != count * itemsize:
            raise InvalidModelError(
                f"{what}: dims {dims} need {count} {type_text} values but raw_data holds {raw // itemsize}; "
                "the file is corrupt"
            )
        return
    field = _TYPED_FIELD.get(tensor.data_type, "int32_data")
    held = len(getattr(tensor, field))
    if held != count:
        raise InvalidModelError(
            f"{what}: dims {dims} need {count} {type_text} values but {field} holds {held}; the file is corrupt"
        )
    others = [f for f in _VALUE_FIELDS if f != field and len(getattr(tensor, f))]
    if others:
        raise InvalidModelError(f"{what}: a {type_text} tensor holds values in {others[0]}; the file is corrupt")


def _check_node(
    node: onnx.NodeProto,
    opsets: Mapping[str, int],
    prefix: str,
    defined: set[str],
    outer: frozenset[str],
    known: Mapping[str, int],
) -> None:
    """Check `node` and its subgraphs; add its outputs to `defined` (this graph's names so far)."""
    op_type = _text(node.op_type, f"{prefix}op type")
    name = _text(node.name, f"{prefix}node name ({op_type})")
    domain = _text(node.domain, f"{prefix}node '{name}' domain")
    for tensor_name in (*node.input, *node.output):
        _text(tensor_name, f"{prefix}node '{name}' ({op_type}) tensor name")
    label = name or (node.output[0] if node.output else op_type)
    where = f"{prefix}node '{_show(label)}' ({op_type})"
    if not any(node.output):
        raise InvalidModelError(f"{where} has no outputs; every node must produce a tensor")
    for input_name in node.input:
        if input_name and input_name not in defined and input_name not in outer:
            raise InvalidModelError(
                f"{where}: input '{input_name}' is produced by no earlier node (is the model truncated or corrupt?)"
            )
    domain = "" if domain == "ai.onnx" else domain
    seen: set[str] = set()
    for attr in node.attribute:
        attr_name = _text(attr.name, f"{where}: attribute name")
        if attr_name in seen:
            raise InvalidModelError(f"{where}: attribute '{attr_name}' is given twice")
        seen.add(attr_name)
        _check_attribute(attr, f"{where}: attribute '{attr_name}'", opsets, prefix, outer | defined)
    for output in node.output:
        if output and output in defined:
            raise InvalidModelError(
                f"{where}: output '{_show(output)}' is already defined by an input, initializer or earlier node"
            )
        if output:
            defined.add(output)
    _check_schema(node, domain, opsets, where, known)
    if domain == "" and op_type in ("If", "Loop", "Scan"):
        _check_control_flow(node, where)


def _check_control_flow(node: onnx.NodeProto, where: str) -> None:
    """The subgraphs' inputs and outputs match the node's (ONNX's If, Loop and Scan signatures)."""
    graphs = {a.name: a.g for a in node.attribute if a.HasField("g")}
    outputs = len(node.output)
    if node.op_type == "If":
        for branch in ("then_branch", "else_branch"):
            if branch in graphs and len(graphs[branch].output) != outputs:
                raise InvalidModelError(
                    f"{where}: {branch} has {len(graphs[branch].output)} outputs, the node {outputs}"
                )
        return
    body = graphs.get("body")
    if body is None:
        return  # the schema check has said it is required
    inputs, body_inputs, body_outputs = len(node.input), len(body.input), len(body.output)
    if node.op_type == "Loop":
        # inputs (M, cond, N carried), body inputs (iteration, cond, N carried), body outputs
        # (cond, N carried, K scanned), node outputs (N carried, K scanned)
        if body_inputs != max(inputs, 2) or body_outputs != outputs + 1 or body_outputs < body_inputs - 1:
            raise InvalidModelError(
                f"{where}: the body has {body_inputs} inputs and {body_outputs} outputs; with {inputs} node "
                f"inputs and {outputs} node outputs it must have {max(inputs, 2)} inputs and "
                f"{max(outputs + 1, max(inputs, 2) - 1)} outputs"
            )
        return
    # Scan before opset 9 has a sequence_lens input before the body's.
    if body_inputs not in (inputs, inputs - 1) or body_outputs != outputs:
        raise InvalidModelError(
            f"{where}: the body has {body_inputs} inputs and {body_outputs} outputs, the node {inputs} and {outputs}"
        )


def _check_attribute(
    attr: AttributeProto, what: str, opsets: Mapping[str, int], prefix: str, scope: frozenset[str]
) -> None:
    populated = [
        kind for kind, field in _ATTR_FIELDS.items()
        if (attr.HasField(field) if field in _SCALAR_ATTRS else len(getattr(attr, field)))
    ]
    if attr.type == AttributeProto.UNDEFINED and len(populated) == 1:
        attr.type = populated[0]  # an old writer left the type out; the value says it
    if attr.type not in _ATTR_FIELDS:
        raise InvalidModelError(f"{what} has no valid type ({_attr_type_name(attr.type)})")
    field = _ATTR_FIELDS[attr.type]
    # A message-valued attribute without its message (numbers and strings may be a writer's omitted default).
    if field in ("t", "g", "sparse_tensor", "tp") and not attr.HasField(field):
        raise InvalidModelError(f"{what} is typed {_attr_type_name(attr.type)} but holds no value")
    stray = [kind for kind in populated if kind != attr.type]
    if stray:
        raise InvalidModelError(
            f"{what} is typed {_attr_type_name(attr.type)} but holds a {_attr_type_name(stray[0])} value"
        )
    for text in ([attr.s] if attr.type == AttributeProto.STRING else attr.strings):
        try:
            text.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidModelError(f"{what}: the string {text[:40]!r} is not valid UTF-8") from None
    if attr.HasField("t"):
        _check_tensor(attr.t, what)
    for tensor in attr.tensors:
        _check_tensor(tensor, what)
    if attr.HasField("sparse_tensor") or attr.sparse_tensors:
        raise InvalidModelError(f"{what}: sparse tensors are not supported; store it dense")
    for sub in (*([attr.g] if attr.HasField("g") else []), *attr.graphs):
        if not sub.output:
            raise InvalidModelError(f"{what}: the subgraph has no outputs")
        _check_graph(sub, opsets, prefix, scope, top=False)


def _check_schema(
    node: onnx.NodeProto, domain: str, opsets: Mapping[str, int], where: str, known: Mapping[str, int]
) -> None:
    """Attributes typed as the op's ONNX schema at the model's opset says, required ones
    present, no more inputs or outputs than the schema allows, and inputs of known element
    type (initializers, Constants, graph inputs) that must be integers (shapes, axes, indices) of
    an integer type."""
    opset = opsets.get(domain, opsets.get("", 1) if domain == "" else None)
    if opset is None or opset < 1:
        return
    try:
        schema = defs.get_schema(node.op_type, opset, domain)
    except (defs.SchemaError, RuntimeError, TypeError, ValueError):
        return  # an op ONNX does not know: the importer reports it if it has no rule
    where = f"{where.rstrip(')')}, opset {opset})"
    given = {a.name: a for a in node.attribute}
    for name, spec in schema.attributes.items():
        attr = given.get(name)
        if attr is None:
            if spec.required:
                raise InvalidModelError(f"{where}: attribute '{name}' is required at this opset")
            continue
        want: int = cast(Any, spec.type).value  # a pybind enum; its stub has no int conversion
        if want != AttributeProto.UNDEFINED and attr.type != want:
            raise InvalidModelError(
                f"{where}: attribute '{name}' must be {_attr_type_name(want)}, the model gives "
                f"{_attr_type_name(attr.type)}"
            )
    value = given.get("value")
    if node.op_type == "ConstantOfShape" and value is not None and value.HasField("t"):
        count = element_count(value.t.dims)
        if count != 1:
            raise InvalidModelError(f"{where}: attribute 'value' must be a one-element tensor, it has {count}")
    if node.op_type == "Constant" and len(node.attribute) != 1:
        raise InvalidModelError(f"{where} must have exactly one value attribute, it has {len(node.attribute)}")
    if len(node.input) > schema.max_input:
        raise InvalidModelError(f"{where} has {len(node.input)} inputs; the op takes at most {schema.max_input}")
    if len(node.input) < schema.min_input:
        raise InvalidModelError(f"{where} has {len(node.input)} inputs; the op needs at least {schema.min_input}")
    if len(node.output) > schema.max_output:
        raise InvalidModelError(
            f"{where} has {len(node.output)} outputs; the op has at most {schema.max_output}"
        )
    if not schema.inputs:
        return
    allowed_by = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    for i, name in enumerate(node.input):
        if not name or name not in known:
            continue
        formal = schema.inputs[min(i, len(schema.inputs) - 1)]
        allowed = allowed_by.get(formal.type_str, {formal.type_str})
        given = f"tensor({type_name(known[name]).lower()})"
        # Only index-like inputs (shapes, axes, indices, counts), which rules read as Python ints;
        # data inputs may take more types than the schema lists (legacy models that run here).
        if given not in allowed and allowed <= _INTEGER_TENSORS:
            raise InvalidModelError(
                f"{where}: input {i} '{name}' ({formal.name}) is {type_name(known[name])}, which the op "
                f"does not take at this opset"
            )
