"""ONNX mutants: byte-level (bits flipped, bytes overwritten, the file cut or stretched) and
structured (a field of the ModelProto given a wrong value, type, count or name), each a
deterministic function of its seed and index."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from tests.fuzz.seeds import Seed

# A placeholder name spliced into the serialized bytes as invalid UTF-8 of the same length.
_NOT_UTF8_MARK = b"NOTUTF8X"
_NOT_UTF8 = b"\xff\xfe\x80bad\xc3\x28"


def byte_mutant(original: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One of: flip bits, overwrite bytes, truncate, insert, duplicate a run, zero a run."""
    data = bytearray(original)
    n = len(data)
    kind = rng.choice(["flip", "flip", "flip", "overwrite", "truncate", "insert", "duplicate", "zero"])
    at = rng.randrange(n)
    if kind == "flip":
        count = rng.choice([1, 1, 2, 4, 8])
        spots = sorted(rng.randrange(n) for _ in range(count))
        for spot in spots:
            data[spot] ^= 1 << rng.randrange(8)
        return bytes(data), f"flip {count} bit(s) at {spots[:3]}"
    if kind == "overwrite":
        length = rng.choice([1, 2, 4, 8])
        value = bytes(rng.choice([0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)]) for _ in range(length))
        data[at:at + length] = value
        return bytes(data), f"overwrite {length} byte(s) at {at}"
    if kind == "truncate":
        return bytes(data[:at]), f"truncate at {at} of {n}"
    if kind == "insert":
        extra = bytes(rng.randrange(256) for _ in range(rng.choice([1, 3, 16])))
        return bytes(data[:at] + extra + data[at:]), f"insert {len(extra)} byte(s) at {at}"
    if kind == "duplicate":
        length = rng.choice([2, 8, 64])
        return bytes(data[:at] + data[at:at + length] + data[at:]), f"duplicate {length} bytes at {at}"
    length = rng.choice([1, 4, 16, 64])
    data[at:at + length] = bytes(len(data[at:at + length]))
    return bytes(data), f"zero {length} bytes at {at}"


# Structured mutations: each takes (model, rng, extra files) and returns a description; it
# changes the model in place and may add files (name -> bytes) beside it.
Mutation = Callable[[onnx.ModelProto, random.Random, dict[str, bytes]], str]


def _node(model, rng) -> onnx.NodeProto:
    return rng.choice(model.graph.node)


def _attribute(model, rng) -> tuple[onnx.NodeProto, AttributeProto] | tuple[None, None]:
    """A node that has attributes, and one of them."""
    nodes = [n for n in model.graph.node if n.attribute]
    if not nodes:
        return None, None
    n = rng.choice(nodes)
    return n, rng.choice(n.attribute)


def init_dims(model, rng, files):
    t = rng.choice(model.graph.initializer)
    how = rng.choice(["+1", "-1", "zero", "negative", "huge", "add", "drop", "flip"])
    dims = list(t.dims)
    i = rng.randrange(len(dims)) if dims else 0
    if how in ("+1", "-1", "zero", "negative", "huge", "flip") and dims:
        dims[i] = {"+1": dims[i] + 1, "-1": dims[i] - 1, "zero": 0, "negative": -dims[i] - 1,
                   "huge": 1 << rng.choice([31, 40, 50, 62]), "flip": dims[i] ^ (1 << rng.randrange(4))}[how]
    elif how == "add":
        dims.insert(i, rng.choice([1, 2, 1 << 20]))
    elif dims:
        dims.pop(i)
    del t.dims[:]
    t.dims.extend(dims)
    return f"initializer {t.name} dims {how} -> {dims}"


def init_dtype(model, rng, files):
    t = rng.choice(model.graph.initializer)
    value = rng.choice([0, 999, -1, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE, TensorProto.INT8,
                        TensorProto.STRING, TensorProto.BOOL, TensorProto.COMPLEX64, 17, 18, 19, 20, 21, 22, 23])
    t.data_type = value
    return f"initializer {t.name} data_type {value}"


def init_data(model, rng, files):
    t = rng.choice(model.graph.initializer)
    how = rng.choice(["cut", "extend", "to-floats", "empty"])
    if how in ("cut", "extend") and t.raw_data:
        t.raw_data = t.raw_data[:-rng.choice([1, 3, 4])] if how == "cut" else t.raw_data + b"\x00" * rng.choice([1, 4])
    elif how == "to-floats":
        array = numpy_helper.to_array(t).ravel()
        t.ClearField("raw_data")
        t.float_data.extend(float(v) for v in array[: max(len(array) - 1, 0)])
    else:
        t.ClearField("raw_data")
    return f"initializer {t.name} data {how}"


def external_data(model, rng, files):
    t = rng.choice(model.graph.initializer)
    raw = numpy_helper.to_array(t).tobytes()
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    how = rng.choice(["ok", "negative-offset", "negative-length", "past-end", "missing", "escape", "absolute",
                      "huge-length", "directory"])
    location, offset, length = "weights.bin", 0, len(raw)
    files[location] = raw
    if how == "negative-offset":
        offset = -8
    elif how == "negative-length":
        length = -4
    elif how == "past-end":
        offset = len(raw) - 2
    elif how == "missing":
        location = "absent.bin"
    elif how == "escape":
        location = "../outside.bin"
    elif how == "absolute":
        location = "/etc/passwd"
    elif how == "huge-length":
        length = 1 << 40
    elif how == "directory":
        location = "."
    entries = {"location": location, "offset": str(offset), "length": str(length)}
    for key, value in entries.items():
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return f"initializer {t.name} external data {how}"


def attr_type(model, rng, files):
    n, a = _attribute(model, rng)
    if n is None or a is None:
        return "no attribute"
    to = rng.choice(["int", "ints", "float", "floats", "string", "bad-string", "tensor", "none"])
    for f in ("i", "f", "s", "t", "g"):
        a.ClearField(f)
    for f in ("ints", "floats", "strings", "tensors", "graphs"):
        a.ClearField(f)
    if to == "int":
        a.type, a.i = AttributeProto.INT, rng.choice([0, 1, -1, 3, 1 << 40])
    elif to == "ints":
        a.type = AttributeProto.INTS
        a.ints.extend(rng.choice([[], [1], [0, 1, 2, 3], [-5, 1 << 40]]))
    elif to == "float":
        a.type, a.f = AttributeProto.FLOAT, rng.choice([0.5, float("nan"), float("inf"), 3.0])
    elif to == "floats":
        a.type = AttributeProto.FLOATS
        a.floats.extend([1.5, 2.5])
    elif to == "string":
        a.type, a.s = AttributeProto.STRING, b"abc"
    elif to == "bad-string":
        a.type, a.s = AttributeProto.STRING, _NOT_UTF8
    elif to == "tensor":
        a.type = AttributeProto.TENSOR
        a.t.CopyFrom(numpy_helper.from_array(np.array([1.0, 2.0], np.float32)))
    else:
        a.type = AttributeProto.UNDEFINED
    return f"{n.op_type} {n.name} attribute {a.name} as {to}"


def attr_value(model, rng, files):
    n, a = _attribute(model, rng)
    if n is None or a is None:
        return "no attribute"
    if a.type == AttributeProto.INT:
        a.i = rng.choice([0, -1, -100, 7, 1 << 31, 1 << 62, -(1 << 62)])
        return f"{n.op_type} {n.name} {a.name}={a.i}"
    if a.type == AttributeProto.INTS:
        values = list(a.ints)
        how = rng.choice(["zero", "negative", "huge", "drop", "add", "empty"])
        if how == "empty" or not values:
            values = []
        elif how == "drop":
            values.pop()
        elif how == "add":
            values.append(rng.choice([0, 1, 99]))
        else:
            values[rng.randrange(len(values))] = {"zero": 0, "negative": -3, "huge": 1 << 40}[how]
        del a.ints[:]
        a.ints.extend(values)
        return f"{n.op_type} {n.name} {a.name}={values}"
    if a.type == AttributeProto.FLOAT:
        a.f = rng.choice([0.0, -1.0, float("nan"), float("inf"), 1e38])
        return f"{n.op_type} {n.name} {a.name}={a.f}"
    if a.type == AttributeProto.STRING:
        a.s = rng.choice([b"", b"XYZ", _NOT_UTF8])
        return f"{n.op_type} {n.name} {a.name}={a.s!r}"
    if a.type == AttributeProto.TENSOR:
        a.t.CopyFrom(numpy_helper.from_array(rng.choice(
            [np.zeros((0,), np.float32), np.ones((2, 2), np.float32), np.array(["s"], dtype=object)])))
        return f"{n.op_type} {n.name} {a.name} tensor changed"
    return f"{n.op_type} {n.name} {a.name} kept"


def attr_dup_or_drop(model, rng, files):
    n, a = _attribute(model, rng)
    if n is None or a is None:
        return "no attribute"
    if rng.random() < 0.5:
        n.attribute.add().CopyFrom(a)
        return f"{n.op_type} {n.name} attribute {a.name} twice"
    n.attribute.remove(a)
    return f"{n.op_type} {n.name} attribute {a.name} removed"


def node_edges(model, rng, files):
    n = _node(model, rng)
    how = rng.choice(["no-outputs", "extra-output", "output-clash", "drop-input", "extra-input", "unknown-input",
                      "empty-input", "self-loop"])
    if how == "no-outputs":
        del n.output[:]
    elif how == "extra-output":
        n.output.append("extra_out")
    elif how == "output-clash":
        other = rng.choice(model.graph.node)
        if other.output:
            n.output[0] = other.output[0]
    elif how == "drop-input" and n.input:
        n.input.pop()
    elif how == "extra-input":
        n.input.append(rng.choice([i.name for i in model.graph.initializer] or ["x"]))
    elif how == "unknown-input" and n.input:
        n.input[0] = "nowhere"
    elif how == "empty-input" and n.input:
        n.input[rng.randrange(len(n.input))] = ""
    elif how == "self-loop" and n.input and n.output:
        n.input[0] = n.output[0]
    return f"{n.op_type} {n.name} {how}"


def node_type(model, rng, files):
    n = _node(model, rng)
    how = rng.choice(["op", "op", "domain", "garbage"])
    if how == "op":
        n.op_type = rng.choice(["Conv", "Relu", "Reshape", "TopK", "Gemm", "Concat", "Resize", "Loop", "If",
                                "Einsum", "Pad", "Split", "Where", "LSTM", "QuantizeLinear", "NonMaxSuppression"])
    elif how == "domain":
        n.domain = rng.choice(["com.microsoft", "ai.onnx.ml", "unknown.domain"])
    else:
        n.op_type = "Frobnicate"
    return f"node {n.name} -> {n.domain or ''}::{n.op_type}"


def node_order(model, rng, files):
    nodes = list(model.graph.node)
    how = rng.choice(["swap", "delete", "duplicate", "reverse"])
    i, j = rng.randrange(len(nodes)), rng.randrange(len(nodes))
    if how == "swap":
        nodes[i], nodes[j] = nodes[j], nodes[i]
    elif how == "delete":
        nodes.pop(i)
    elif how == "duplicate":
        nodes.insert(j, nodes[i])
    else:
        nodes.reverse()
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return f"nodes {how} {i},{j}"


def graph_io(model, rng, files):
    g = model.graph
    how = rng.choice(["no-outputs", "output-twice", "unknown-output", "input-twice", "input-dtype", "input-dims",
                      "output-is-input", "no-inputs", "value-info-conflict", "output-dtype"])
    if how == "no-outputs":
        del g.output[:]
    elif how == "output-twice":
        g.output.add().CopyFrom(g.output[0])
    elif how == "unknown-output":
        g.output[0].name = "nothing"
    elif how == "input-twice":
        g.input.add().CopyFrom(g.input[0])
    elif how == "input-dtype":
        g.input[0].type.tensor_type.elem_type = rng.choice([0, 999, TensorProto.STRING, TensorProto.INT8, 23])
    elif how == "input-dims":
        dims = g.input[0].type.tensor_type.shape.dim
        if dims:
            d = dims[rng.randrange(len(dims))]
            choice = rng.choice([-1, 0, 1 << 40, "sym"])
            if choice == "sym":
                d.dim_param = "n"
            else:
                d.dim_value = choice
    elif how == "output-is-input":
        g.output[0].name = g.input[0].name
    elif how == "no-inputs":
        del g.input[:]
    elif how == "value-info-conflict":
        n = rng.choice(list(g.node))
        if n.output:
            g.value_info.append(helper.make_tensor_value_info(n.output[0], TensorProto.INT32, [7, 7, 7]))
    else:
        g.output[0].type.tensor_type.elem_type = TensorProto.INT64
    return f"graph {how}"


def opset(model, rng, files):
    how = rng.choice(["version", "version", "none", "domain", "ir"])
    if how == "version":
        model.opset_import[0].version = rng.choice([1, 6, 7, 9, 10, 12, 18, 21, 25, 999, -1])
        return f"opset {model.opset_import[0].version}"
    if how == "none":
        del model.opset_import[:]
    elif how == "domain":
        model.opset_import.append(helper.make_opsetid("unknown.domain", 1))
    else:
        model.ir_version = rng.choice([0, 1, 3, 99, -1])
    return f"opset {how}"


def names(model, rng, files):
    """A tensor or node name replaced by invalid UTF-8 (spliced into the bytes later)."""
    g = model.graph
    how = rng.choice(["initializer", "node-output", "node-name", "input"])
    if how == "initializer":
        t = rng.choice(g.initializer)
        old = t.name
        t.name = _NOT_UTF8_MARK.decode()
        for n in g.node:
            for k, v in enumerate(n.input):
                if v == old:
                    n.input[k] = t.name
    elif how == "node-output":
        n = rng.choice([n for n in g.node if n.output])
        old = n.output[0]
        n.output[0] = _NOT_UTF8_MARK.decode()
        for m in g.node:
            for k, v in enumerate(m.input):
                if v == old:
                    m.input[k] = n.output[0]
        for o in g.output:
            if o.name == old:
                o.name = n.output[0]
    elif how == "node-name":
        rng.choice(g.node).name = _NOT_UTF8_MARK.decode()
    else:
        old = g.input[0].name
        g.input[0].name = _NOT_UTF8_MARK.decode()
        for n in g.node:
            for k, v in enumerate(n.input):
                if v == old:
                    n.input[k] = g.input[0].name
    return f"{how} name not UTF-8"


def inject(model, rng, files):
    """A node the audit named: ConstantOfShape huge or negative, a Constant with two outputs,
    an Expand to [1e6, 1e6], TopK without k at opset 9, Tile by a huge count."""
    g = model.graph
    source = g.output[0].name
    how = rng.choice(["cos-huge", "cos-1e12", "cos-negative", "cos-list-value", "constant-two-outputs",
                      "expand-huge", "topk-opset9", "tile-huge", "reshape-huge"])
    out = "injected"
    if how.startswith("cos"):
        shape = {"cos-huge": [32768, 32768], "cos-1e12": [10 ** 12], "cos-negative": [-3, 4],
                 "cos-list-value": [2, 2]}[how]
        value = np.array([1.0, 2.0] if how == "cos-list-value" else [0.5], np.float32)
        g.initializer.append(numpy_helper.from_array(np.array(shape, np.int64), "inj_shape"))
        g.node.append(helper.make_node("ConstantOfShape", ["inj_shape"], [out],
                                       value=numpy_helper.from_array(value)))
    elif how == "constant-two-outputs":
        g.node.append(helper.make_node("Constant", [], [out, "second"],
                                       value=numpy_helper.from_array(np.ones(2, np.float32))))
    elif how == "expand-huge":
        g.initializer.append(numpy_helper.from_array(np.array([10 ** 6, 10 ** 6], np.int64), "inj_shape"))
        g.node.append(helper.make_node("ReduceSum", [source], ["inj_r"], keepdims=0))
        g.node.append(helper.make_node("Expand", ["inj_r", "inj_shape"], [out]))
    elif how == "topk-opset9":
        model.opset_import[0].version = 9
        g.node.append(helper.make_node("TopK", [source], [out, "inj_idx"]))
    elif how == "tile-huge":
        g.initializer.append(numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "inj_rep"))
        g.node.append(helper.make_node("Flatten", [source], ["inj_f"]))
        g.node.append(helper.make_node("Tile", ["inj_f", "inj_rep"], [out]))
    else:
        g.initializer.append(numpy_helper.from_array(np.array([1 << 40, -1], np.int64), "inj_shape"))
        g.node.append(helper.make_node("Reshape", [source, "inj_shape"], [out]))
    g.output.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, None))
    return f"inject {how}"


MUTATIONS: list[Mutation] = [init_dims, init_dtype, init_data, external_data, attr_type, attr_type, attr_value,
                             attr_value, attr_dup_or_drop, node_edges, node_type, node_order, graph_io, opset, names,
                             inject, inject]


def structured_mutant(seed: Seed, rng: random.Random) -> tuple[bytes, dict[str, bytes], str]:
    """The serialized mutant, files to write beside it, and what changed."""
    model = onnx.ModelProto()
    model.CopyFrom(seed.model)
    files: dict[str, bytes] = {}
    mutation = rng.choice(MUTATIONS)
    what = mutation(model, rng, files)
    data = model.SerializeToString()
    if _NOT_UTF8_MARK in data or _NOT_UTF8 in data:
        data = data.replace(_NOT_UTF8_MARK, _NOT_UTF8[: len(_NOT_UTF8_MARK)])
    return data, files, what
