"""Hostile ONNX files (issue 17): `tpu-xdsl transform` refuses each malformed model with one line
naming the tensor, node or attribute (exit 2), never a traceback or an internal error, and
leaves nothing in the output folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tpu_xdsl.tools.tpu_xdsl import main


@pytest.fixture(autouse=True)
def _one_gib_limit(monkeypatch):
    """The per-tensor limit of a small machine, whatever this one has."""
    monkeypatch.setenv("TPU_XDSL_MAX_TENSOR_BYTES", "1G")


ONES = np.ones((1, 1, 3, 3), np.float32)
W = np.arange(216, dtype=np.float32).reshape(8, 3, 3, 3) / 216


def _info(name: str, elem_type: int = TensorProto.FLOAT, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, shape)


def _model(nodes, inputs=None, outputs=None, initializers=(), opset=13) -> onnx.ModelProto:
    inputs = inputs if inputs is not None else [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])]
    outputs = outputs if outputs is not None else [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _conv(**attrs) -> onnx.ModelProto:
    """x [1,3,6,6] -> Conv(w [8,3,3,3]) -> y."""
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], **attrs}
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", **attrs)
    return _model([node], initializers=[numpy_helper.from_array(W, "w")])


def _run(tmp_path: Path, model: onnx.ModelProto | bytes, *extra: str) -> tuple[int, Path]:
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    path = folder / "m.onnx"
    path.write_bytes(model if isinstance(model, bytes) else model.SerializeToString())
    rc = main(["transform", "--model-name", "m", "--model-def", str(path), "-o", str(out / "m.mlir"), *extra])
    return rc, out


def _refused(tmp_path, capfd, model, *words: str, extra: tuple[str, ...] = ()) -> str:
    rc, out = _run(tmp_path, model, *extra)
    err = capfd.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for word in words:
        assert word in lines[0], lines[0]
    assert list(out.iterdir()) == []
    return lines[0]


def test_the_plain_model_imports(tmp_path, capfd):
    rc, out = _run(tmp_path, _conv())
    assert rc == 0, capfd.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["m.mlir", "m_weights.npz"]


# -- initializers --------------------------------------------------------------------------


def _with_weight(mutate: Callable[[TensorProto], None]) -> onnx.ModelProto:
    model = _conv()
    mutate(model.graph.initializer[0])
    return model


def _set_dims(dims):
    def mutate(t):
        del t.dims[:]
        t.dims.extend(dims)
    return mutate


def _set(field, value):
    return lambda t: setattr(t, field, value)


@pytest.mark.parametrize(
    "mutate, words",
    [
        (_set_dims([8, 3, 3, 4]), ["initializer 'w'", "dims [8, 3, 3, 4]", "216"]),  # a 4-bit flip in dims
        (_set_dims([-8, 3, 3, 3]), ["initializer 'w'", "negative"]),
        (lambda t: setattr(t, "raw_data", t.raw_data + b"\0"), ["initializer 'w'", "raw_data", "multiple"]),
        (_set_dims([1 << 30, 1 << 30]), ["initializer 'w'", "over the limit"]),
        (_set("data_type", 999), ["initializer 'w'", "element type 999", "not supported"]),
        (_set("data_type", 0), ["initializer 'w'", "UNDEFINED", "not supported"]),
        (_set("data_type", TensorProto.FLOAT8E4M3FN), ["initializer 'w'", "FLOAT8E4M3FN", "not supported"]),
        (_set("data_type", TensorProto.INT4), ["initializer 'w'", "INT4", "not supported"]),
        (_set("data_type", TensorProto.UINT4), ["initializer 'w'", "UINT4", "not supported"]),
        (_set("data_type", TensorProto.FLOAT4E2M1), ["initializer 'w'", "FLOAT4E2M1", "not supported"]),
    ],
    ids=["dims-vs-data", "negative-dim", "raw-not-multiple", "huge-dims", "type-999", "type-0", "float8", "int4",
         "uint4", "float4"],
)
def test_malformed_initializer(tmp_path, capfd, mutate, words):
    _refused(tmp_path, capfd, _with_weight(mutate), *words)


def test_input_of_unsupported_element_type(tmp_path, capfd):
    model = _conv()
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.FLOAT8E5M2
    _refused(tmp_path, capfd, model, "input 'x'", "FLOAT8E5M2", "not supported")


# -- sizes of what folding would materialize -------------------------------------------------


def _constant_of_shape(shape, **attrs) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Constant", [], ["s"], name="shape", value=numpy_helper.from_array(np.array(shape, np.int64))),
        helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill", **attrs),
    ]
    return _model(nodes, inputs=[])


@pytest.mark.parametrize(
    "model, words",
    [
        (_constant_of_shape([32768, 32768]), ["node 'fill'", "32768x32768", "over the limit"]),
        (_constant_of_shape([10**12]), ["node 'fill'", "over the limit"]),
        (_constant_of_shape([2, -3]), ["node 'fill'", "negative"]),
        (_constant_of_shape([2], value=[1, 2]), ["node 'fill'", "attribute 'value' must be TENSOR", "INTS"]),
        (
            _constant_of_shape([2], value=numpy_helper.from_array(np.ones(3, np.float32))),
            ["node 'fill'", "'value'", "one-element"],
        ),
    ],
    ids=["32768x32768", "1e12", "negative", "list-value", "three-values"],
)
def test_constant_of_shape(tmp_path, capfd, model, words):
    _refused(tmp_path, capfd, model, *words)


def _grow(op: str, data: np.ndarray, second: np.ndarray, **attrs) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(data, "d"), numpy_helper.from_array(second, "s")]
    return _model([helper.make_node(op, ["d", "s"], ["y"], name="grow", **attrs)], inputs=[], initializers=inits)


@pytest.mark.parametrize(
    "model",
    [
        _grow("Expand", np.ones(1, np.float32), np.array([1 << 20, 1 << 20], np.int64)),
        _grow("Tile", np.ones((2, 2), np.float32), np.array([1 << 20, 1 << 20], np.int64)),
        _grow("Add", np.ones((100000, 1), np.float32), np.ones((1, 100000), np.float32)),
        _grow("MatMul", np.ones((100000, 1), np.float32), np.ones((1, 100000), np.float32)),
        _grow("Gather", np.ones((1, 100000), np.float32), np.zeros(100000, np.int64)),
        _grow("Pad", np.ones((2, 2), np.float32), np.array([0, 0, 10**6, 10**6], np.int64)),
        # Not in the table of growing ops: ONNX shape inference sizes it.
        _grow("ConvTranspose", ONES, ONES, strides=[99999, 99999]),
    ],
    ids=["expand", "tile", "broadcast", "matmul", "gather", "pad", "conv-transpose"],
)
def test_folding_is_sized_before_it_allocates(tmp_path, capfd, model):
    _refused(tmp_path, capfd, model, "node 'grow'", "over the limit")


# -- external data ---------------------------------------------------------------------------


def _external(tmp_path: Path, **entries: str) -> onnx.ModelProto:
    """The conv model with w's 864 bytes in model/w.bin, its external_data entries replaced."""
    (tmp_path / "model").mkdir(exist_ok=True)
    (tmp_path / "model" / "w.bin").write_bytes(W.tobytes())
    model = _conv()
    tensor = model.graph.initializer[0]
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in {"location": "w.bin", **entries}.items():
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return model


def test_external_data_in_bounds_imports(tmp_path, capfd):
    rc, _ = _run(tmp_path, _external(tmp_path, offset="0", length=str(W.nbytes)))
    assert rc == 0, capfd.readouterr().err


@pytest.mark.parametrize(
    "entries, words",
    [
        ({"offset": "-4"}, ["offset -4", "negative"]),
        ({"length": "-1"}, ["length -1", "negative"]),
        ({"offset": "8", "length": str(W.nbytes)}, ["beyond the end", "864 bytes"]),
        ({"length": str(1 << 40)}, ["beyond the end"]),
        ({"location": "missing.bin"}, ["missing", "missing.bin"]),
        ({"location": "../w.bin"}, ["outside the model's folder"]),
        ({"location": "/etc/passwd"}, ["outside the model's folder"]),
        ({"length": "100"}, ["holds 100 bytes", "need 864"]),
    ],
    ids=["negative-offset", "negative-length", "past-end", "huge-length", "missing-file", "dot-dot", "absolute",
         "short"],
)
def test_malformed_external_data(tmp_path, capfd, entries, words):
    _refused(tmp_path, capfd, _external(tmp_path, **entries), "initializer 'w'", "external data", *words)


@pytest.mark.parametrize("bad, words", [(b"\xff", "not valid UTF-8"), (b"\x00", "control character")],
                         ids=["not-utf8", "nul"])
def test_external_location_not_a_name_beside_an_output(tmp_path, capfd, bad, words):
    """With an output already in the model's folder, transform reads the model's data file names
    before loading it (so as not to write over one): a name that is no file name is left to the load."""
    model = _external(tmp_path, location="LOCX")
    path = tmp_path / "model" / "m.onnx"
    path.write_bytes(model.SerializeToString().replace(b"LOCX", b"LO" + bad + b"X"))
    (tmp_path / "model" / "m.mlir").write_text("old")
    rc = main(["transform", "--model-name", "m", "--model-def", str(path), "-o", str(tmp_path / "model" / "m.mlir")])
    lines = capfd.readouterr().err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, lines
    assert "initializer 'w'" in lines[0] and "external data 'location'" in lines[0] and words in lines[0]
    assert (tmp_path / "model" / "m.mlir").read_text() == "old"


# -- attributes ------------------------------------------------------------------------------


def _transpose(**attrs) -> onnx.ModelProto:
    return _model([helper.make_node("Transpose", ["x"], ["y"], name="tr", **attrs)])


def _concat(**attrs) -> onnx.ModelProto:
    return _model([helper.make_node("Concat", ["x", "x"], ["y"], name="cat", **attrs)])


def _duplicated_group() -> onnx.ModelProto:
    model = _conv(group=1)
    model.graph.node[0].attribute.append(helper.make_attribute("group", 2))
    return model


def _non_utf8_auto_pad() -> bytes:
    model = _conv()
    model.graph.node[0].attribute.append(helper.make_attribute("auto_pad", b"NOTSEX"))
    return model.SerializeToString().replace(b"NOTSEX", b"NOTS\xffX")


@pytest.mark.parametrize(
    "model, words",
    [
        (_transpose(perm=3), ["node 'tr'", "'perm' must be INTS", "INT"]),
        (_conv(kernel_shape=3.0), ["node 'conv'", "'kernel_shape' must be INTS", "FLOAT"]),
        (_concat(axis=[1]), ["node 'cat'", "'axis' must be INT", "INTS"]),
        (_duplicated_group(), ["node 'conv'", "'group' is given twice"]),
        (_non_utf8_auto_pad(), ["node 'conv'", "'auto_pad'", "UTF-8"]),
        (
            _model([helper.make_node("TopK", ["x"], ["y", "i"], name="topk")], opset=9),
            ["node 'topk'", "opset 9", "'k' is required"],
        ),
    ],
    ids=["perm-int", "kernel-float", "axis-list", "duplicate", "string-not-utf8", "topk9-without-k"],
)
def test_malformed_attribute(tmp_path, capfd, model, words):
    _refused(tmp_path, capfd, model, *words)


def test_attribute_kind_outside_onnx_domain(tmp_path, capfd):
    """No ONNX schema types com.microsoft's QGemm: the rule's accessor checks what it asks for."""
    consts = {"sa": np.float32(0.1), "za": np.uint8(0), "b": np.ones((3, 4), np.uint8), "sb": np.float32(0.1),
              "zb": np.uint8(0)}
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()]
    node = helper.make_node("QGemm", ["x", "sa", "za", "b", "sb", "zb"], ["y"], name="qg", domain="com.microsoft",
                            transB=[1])
    model = _model([node], inputs=[_info("x", TensorProto.UINT8, [2, 3])], initializers=inits)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    _refused(tmp_path, capfd, model, "node 'qg'", "attribute 'transB' must be an int", "a list")


def test_rule_fault_names_the_node(tmp_path, capfd):
    """A Range whose start is not a scalar fails in the rule's arithmetic: one line naming the node."""
    bounds = {"start": np.arange(6, dtype=np.int64), "limit": np.array(10), "delta": np.array(1)}
    inits = [numpy_helper.from_array(v, k) for k, v in bounds.items()]
    node = helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="range")
    model = _model([node], inputs=[], initializers=inits)
    _refused(tmp_path, capfd, model, "node 'range' (Range, opset 13)", "ONNX's shape inference refuses it")


def test_rule_fault_on_a_node_onnx_accepts_is_an_internal_error(tmp_path, capfd, monkeypatch):
    """A rule that fails on a valid node is tpu-xdsl's fault: exit 3, never a user error."""
    from tpu_xdsl.frontend import registry

    registry.load_all()

    def broken(ctx):
        raise ValueError("a bug in the Relu rule")

    monkeypatch.setitem(registry.RULES, "Relu", [registry.RuleEntry(1, None, broken)])
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    onnx.save(_model([node], inputs=[_info("x", shape=[1, 3, 4, 4])]), tmp_path / "m.onnx")
    code = main(["transform", "--model-name", "m", "--model-def", str(tmp_path / "m.onnx"),
                 "-o", str(tmp_path / "out.mlir")])
    err = capfd.readouterr().err
    assert code == 3, err
    assert "internal error: ValueError: a bug in the Relu rule" in err


def _operands(op: str, shapes: dict[str, list[int]], opset: int = 13, **attrs) -> onnx.ModelProto:
    """`op` on x [1, 3, 4, 4] and constant operands of the given shapes."""
    inits = [numpy_helper.from_array(np.ones(shape, np.int64 if name == "i" else np.float32), name)
             for name, shape in shapes.items()]
    node = helper.make_node(op, ["x", *shapes], ["y"], name="n", **attrs)
    return _model([node], inputs=[_info("x", shape=[1, 3, 4, 4])], initializers=inits, opset=opset)


@pytest.mark.parametrize(
    "model, words",
    [
        (_operands("InstanceNormalization", {"s": [4], "b": [3]}), ["scale (input 1) has shape [4]", "1-D of 3"]),
        (_operands("BatchNormalization", {"s": [3], "b": [3], "m": [3, 1], "v": [3]}), ["mean (input 3)"]),
        (_operands("LayerNormalization", {"s": [2, 4], "b": [4]}, 17, axis=-1), ["scale (input 1) [2, 4]"]),
        (_operands("GroupNormalization", {"s": [3], "b": [3]}, 18, num_groups=10**9), ["num_groups = 1000000000"]),
        (_operands("ScatterND", {"i": [1, 2], "u": [3, 3]}), ["indices [1, 2] and updates [3, 3]"]),
    ],
    ids=["instance-norm", "batch-norm", "layer-norm", "group-norm", "scatter-nd"],
)
def test_inconsistent_operand_shapes(tmp_path, capfd, model, words):
    """Operands whose shapes the spec forbids are refused by the rule, before a kernel broadcasts them."""
    _refused(tmp_path, capfd, model, "node 'n'", *words)


def test_global_pool_without_spatial_dims(tmp_path, capfd):
    model = _model([helper.make_node("GlobalLpPool", ["x"], ["y"], name="n")], inputs=[_info("x", shape=[2, 3])])
    _refused(tmp_path, capfd, model, "node 'n' (GlobalLpPool", "no spatial dims")


# -- names -----------------------------------------------------------------------------------


def _renamed(name: str, bad: bytes = b"\xff") -> bytes:
    """The conv model (node named 'conv', tensors 'x', 'w', 'y') with `name` made invalid UTF-8
    (or holding the byte `bad`)."""
    model = _conv()
    marker = {"x": "XXXXXX", "w": "WWWWWW", "y": "YYYYYY", "conv": "CCCCCC"}[name]
    data = model.SerializeToString()
    placed = onnx.ModelProto.FromString(data)
    for node in placed.graph.node:
        node.name = marker if node.name == name else node.name
        node.input[:] = [marker if n == name else n for n in node.input]
        node.output[:] = [marker if n == name else n for n in node.output]
    for info in (*placed.graph.input, *placed.graph.output, *placed.graph.initializer):
        info.name = marker if info.name == name else info.name
    return placed.SerializeToString().replace(marker.encode(), marker[:3].encode() + bad + marker[4:].encode())


@pytest.mark.parametrize("name", ["x", "w", "y", "conv"], ids=["input", "initializer", "output", "node"])
def test_name_not_utf8(tmp_path, capfd, name):
    _refused(tmp_path, capfd, _renamed(name), "not valid UTF-8")


@pytest.mark.parametrize("name", ["w", "conv"], ids=["initializer", "node"])
def test_name_with_a_newline(tmp_path, capfd, name):
    """A newline in a name would split the one-line error and the .mlir that names it."""
    _refused(tmp_path, capfd, _renamed(name, b"\n"), "control character")


def test_opset_below_one(tmp_path, capfd):
    model = _conv()
    model.opset_import[0].version = -1
    _refused(tmp_path, capfd, model, "opset version -1")


# -- nodes and the graph ---------------------------------------------------------------------


def _two_output_constant() -> onnx.ModelProto:
    value = numpy_helper.from_array(np.ones(2, np.float32))
    return _model([helper.make_node("Constant", [], ["y", "z"], name="c", value=value)], inputs=[])


def _graph_with(change: Callable[[onnx.GraphProto], None]) -> onnx.ModelProto:
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="relu")])
    change(model.graph)
    return model


@pytest.mark.parametrize(
    "model, words",
    [
        (_model([helper.make_node("Relu", ["x"], [], name="relu"), helper.make_node("Relu", ["x"], ["y"])]),
         ["node 'relu'", "no outputs"]),
        (_two_output_constant(), ["node 'c'", "2 outputs", "at most 1"]),
        (_graph_with(lambda g: g.ClearField("output")), ["no outputs"]),
        (_graph_with(lambda g: g.output.append(g.output[0])), ["graph output 'y'", "listed twice"]),
        (_graph_with(lambda g: g.input.append(g.input[0])), ["graph input 'x'", "listed twice"]),
        (
            _graph_with(lambda g: g.value_info.append(helper.make_tensor_value_info("y", TensorProto.INT64, None))),
            ["'y'", "INT64", "FLOAT", "conflicts"],
        ),
        (
            _model([helper.make_node("Relu", ["x"], ["y"], name=n) for n in "ab"]),
            ["node 'b'", "'y' is already defined"],
        ),
    ],
    ids=["node-without-outputs", "constant-two-outputs", "no-graph-outputs", "output-twice", "input-twice",
         "conflicting-value-info", "output-defined-twice"],
)
def test_malformed_graph(tmp_path, capfd, model, words):
    _refused(tmp_path, capfd, model, *words)


def test_float_shape_input(tmp_path, capfd):
    """A Reshape target of NaNs would reach int(); its element type is refused first."""
    shape = numpy_helper.from_array(np.array([np.nan, 1.0]), "shape")
    model = _model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="rs")], initializers=[shape])
    _refused(tmp_path, capfd, model, "node 'rs'", "input 1 'shape'", "DOUBLE")


def _if(then_outputs: int) -> onnx.ModelProto:
    outputs = [_info(f"t{i}") for i in range(then_outputs)]
    then_branch = helper.make_graph(
        [helper.make_node("Relu", ["x"], [f"t{i}"]) for i in range(then_outputs)], "then", [], outputs
    )
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])], "else", [], [_info("e")]
    )
    cond = numpy_helper.from_array(np.array(True), "c")
    node = helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_branch, else_branch=else_branch)
    return _model([node], initializers=[cond])


def _loop_body_output_unproduced() -> onnx.ModelProto:
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "x"], ["sum"]), helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body",
        [_info("i", TensorProto.INT64, []), _info("cond", TensorProto.BOOL, []), _info("acc")],
        [_info("cond_out", TensorProto.BOOL, []), _info("acc_out")],
    )
    trips = numpy_helper.from_array(np.array(3, np.int64), "n")
    node = helper.make_node("Loop", ["n", "", "x"], ["y"], name="loop", body=body)
    return _model([node], initializers=[trips])


@pytest.mark.parametrize(
    "model, words",
    [
        (_if(2), ["node 'if'", "then_branch has 2 outputs"]),
        (_loop_body_output_unproduced(), ["subgraph 'body' output 'acc_out'", "produced by no node"]),
    ],
    ids=["if-branch-arity", "loop-body-output"],
)
def test_malformed_subgraph(tmp_path, capfd, model, words):
    _refused(tmp_path, capfd, model, *words)


def test_model_onnxruntime_rejects_leaves_no_files(tmp_path, capfd):
    """The importer ignores an unknown attribute; onnxruntime refuses the model before anything is written."""
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="relu", bogus=1)])
    np.savez(tmp_path / "in.npz", x=np.ones((1, 3, 6, 6), np.float32))
    _refused(tmp_path, capfd, model, "onnxruntime", extra=("--test-input", str(tmp_path / "in.npz")))


def test_onnxruntime_failure_is_one_line_on_the_real_stderr(tmp_path, capfd):
    """onnxruntime's own log goes to the process's stderr (file descriptor 2, which capfd sees)."""
    inputs = [_info("x", shape=[2]), _info("i", TensorProto.INT64, [1])]
    model = _model([helper.make_node("Gather", ["x", "i"], ["y"], name="gat")], inputs=inputs)
    np.savez(tmp_path / "in.npz", x=np.ones(2, np.float32), i=np.array([7]))
    _refused(tmp_path, capfd, model, "onnxruntime", "Gather", extra=("--test-input", str(tmp_path / "in.npz")))


# -- bytes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        _conv().SerializeToString()[:-7],
        _conv().SerializeToString()[:40],
        bytes(np.random.default_rng(0).integers(0, 256, 400, dtype=np.uint8)),
        b"\x0a\xff\xff\xff\xff\x0f",
    ],
    ids=["truncated-end", "truncated-start", "random", "huge-length-prefix"],
)
def test_corrupt_bytes(tmp_path, capfd, data):
    _refused(tmp_path, capfd, data, "m.onnx")
