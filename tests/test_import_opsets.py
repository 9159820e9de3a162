"""Import is faithful to the model's opset: folding runs each node at the model's own opset,
rules honour attribute-versus-input changes, and small torch networks exported at opsets
9..20 (and converted to the newest) match onnxruntime.

Regression (issue 14): an opset-11/12 `Unsqueeze` with an `axes` attribute could not be
folded (ONNX's reference ran it at the newest opset), the failure was swallowed, and the
Reshape of PyTorch's `x.view(x.size(0), -1)` said "the target shape must be a constant".
"""

from __future__ import annotations

import functools
import io
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.frontend.onnx_model import ImportRuleError, NeedsConstantError
from tpu_xdsl.frontend.reference import run_reference
from tpu_xdsl.interp.compare import Tolerance, compare_tensors
from tpu_xdsl.interp.runner import run_module
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.weights import attach_weights, weights_of

COSINE = 0.99999


def run_top(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    result = import_onnx(model, "m", [list(v.shape) for v in feeds.values()])
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    return run_module(result.module, feeds, weights_of(result.module))


def assert_matches_onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    reference, _ = run_reference(model, feeds, all_tensors=False)
    top = run_top(model, feeds)
    tolerance = Tolerance(COSINE, 0.999)
    for out in model.graph.output:
        row = compare_tensors(out.name, reference[out.name], top[out.name])
        assert row.passes(tolerance), row


# -- folding at the model's opset ----------------------------------------------------------


def flatten_by_shape(opset: int) -> onnx.ModelProto:
    """y = Reshape(x, Concat(Unsqueeze(Shape(x)[0]), [-1])): `x.view(x.size(0), -1)` as
    torch exports it; Unsqueeze's axes are an attribute before opset 13, an input after."""
    if opset < 13:
        unsqueeze = helper.make_node("Unsqueeze", ["batch"], ["batch1"], axes=[0], name="Unsqueeze_3")
        initializers = []
    else:
        unsqueeze = helper.make_node("Unsqueeze", ["batch", "axis0"], ["batch1"], name="Unsqueeze_3")
        initializers = [numpy_helper.from_array(np.array([0], np.int64), "axis0")]
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        unsqueeze,
        helper.make_node("Concat", ["batch1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"], name="Reshape_5"),
    ]
    graph = helper.make_graph(
        nodes,
        "flatten",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(np.array(0, np.int64), "zero"),
            numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
            *initializers,
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=7)


@pytest.mark.parametrize("opset", [9, 11, 12, 13, 17])
def test_shape_subgraph_folds_at_the_models_opset(opset):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    top = run_top(flatten_by_shape(opset), {"x": x})
    np.testing.assert_array_equal(top["y"], x.reshape(2, 12))


def test_a_node_that_cannot_be_folded_is_named_with_the_reason(monkeypatch):
    """When the reference cannot evaluate a node (here made to fail for Unsqueeze, as it did
    for opset-11 Unsqueeze), the Reshape that needs the result names that node and the
    reason, instead of a bare 'must be a constant'."""
    from tpu_xdsl.frontend.folding import FoldError, NodeFolder

    evaluate = NodeFolder.evaluate

    def failing(self, node, feeds, opset=None):
        if node.op_type == "Unsqueeze":
            raise FoldError("RuntimeError: no kernel for this node")
        return evaluate(self, node, feeds, opset)

    monkeypatch.setattr(NodeFolder, "evaluate", failing)
    with pytest.raises(ImportRuleError) as error:
        import_onnx(flatten_by_shape(11), "m", [[2, 3, 4]])
    message = str(error.value)
    assert "node 'Reshape_5' (Reshape, opset 11): the target shape (input 1) must be a constant" in message
    assert "node 'Unsqueeze_3' (Unsqueeze, opset 11) could not be evaluated at import" in message
    assert "RuntimeError: no kernel for this node" in message


def test_a_shape_from_a_run_time_input_names_the_input():
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)
    with pytest.raises(NeedsConstantError) as error:
        import_onnx(model, "m", [[2, 6], [2]])
    assert error.value.inputs == ["shape"]
    assert "depends on the run-time input(s) 'shape'" in str(error.value)
    assert "--constant-inputs" in str(error.value)
    # Bound to a constant, the input leaves the module and the shape folds.
    result = import_onnx(model, "m", [[2, 6], [2]], constant_inputs={"shape": [3, 4]})
    assert result.input_names == ["x"]
    assert any("input 'shape' is the constant" in note for note in result.notes)


# -- attribute-versus-input forms, one op at a time -------------------------------------------


def single_node(op: str, opset: int, inputs: dict, attrs: dict, consts: dict, out_count: int = 1):
    names = [*inputs, *consts]
    node = helper.make_node(op, [n for n in names], [f"y{i}" for i in range(out_count)], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for n, v in inputs.items()
        ],
        [onnx.ValueInfoProto(name=f"y{i}") for i in range(out_count)],
        [numpy_helper.from_array(v, n) for n, v in consts.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=7)


X = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
I64 = np.int64

# (op, opset, attributes, constant inputs after x, outputs): the old form (attributes) and
# the new form (inputs) of each op whose signature changed across opsets.
FORMS = [
    ("Unsqueeze", 11, {"axes": [0, 3]}, {}, 1),
    ("Unsqueeze", 13, {}, {"axes": np.array([0, 3], I64)}, 1),
    ("Squeeze", 11, {"axes": [0]}, {}, 1),
    ("ReduceSum", 11, {"axes": [1, 2], "keepdims": 0}, {}, 1),
    ("ReduceSum", 13, {"keepdims": 0}, {"axes": np.array([1, 2], I64)}, 1),
    ("ReduceMean", 17, {"axes": [1]}, {}, 1),
    ("ReduceMean", 18, {}, {"axes": np.array([1], I64)}, 1),
    ("ReduceMax", 18, {"keepdims": 1}, {"axes": np.array([-1], I64)}, 1),
    ("Split", 11, {"axis": 2, "split": [1, 3]}, {}, 2),
    ("Split", 13, {"axis": 2}, {"split": np.array([3, 1], I64)}, 2),
    ("Slice", 9, {"starts": [1, 0], "ends": [3, -1], "axes": [2, 3]}, {}, 1),
    ("Slice", 11, {}, {"starts": np.array([1, 0], I64), "ends": np.array([3, -1], I64),
                       "axes": np.array([2, 3], I64), "steps": np.array([1, 2], I64)}, 1),
    ("Pad", 2, {"pads": [0, 0, 1, 2, 0, 0, 1, 0], "value": 0.5}, {}, 1),
    ("Pad", 11, {"mode": "reflect"}, {"pads": np.array([0, 0, 1, 2, 0, 0, 1, 0], I64)}, 1),
    ("Clip", 6, {"min": -0.5, "max": 0.5}, {}, 1),
    ("Clip", 11, {}, {"min": np.array(-0.5, np.float32), "max": np.array(0.5, np.float32)}, 1),
    ("Upsample", 7, {"scales": [1.0, 1.0, 2.0, 2.0]}, {}, 1),
    ("Upsample", 9, {}, {"scales": np.array([1, 1, 2, 2], np.float32)}, 1),
    ("Resize", 10, {}, {"scales": np.array([1, 1, 2, 2], np.float32)}, 1),
    (
        "Resize",
        11,
        {"mode": "linear"},
        {"roi": np.zeros(0, np.float32), "scales": np.array([1, 1, 2, 2], np.float32)},
        1,
    ),
    ("TopK", 9, {"k": 2, "axis": 3}, {}, 2),
    ("TopK", 11, {"axis": -1}, {"k": np.array([2], I64)}, 2),
    ("Dropout", 7, {"ratio": 0.3}, {}, 1),
    ("Dropout", 12, {}, {"ratio": np.array(0.3, np.float32), "training_mode": np.array(False)}, 1),
]


@pytest.mark.parametrize(("op", "opset", "attrs", "consts", "outputs"), FORMS, ids=[f"{f[0]}-{f[1]}" for f in FORMS])
def test_old_and_new_op_forms_match_onnxruntime(op, opset, attrs, consts, outputs):
    x = X[:1] if op == "Squeeze" else X
    model = single_node(op, opset, {"x": x}, attrs, consts, outputs)
    assert_matches_onnxruntime(model, {"x": x})


@pytest.mark.parametrize(
    ("opset", "attrs"),
    [
        (1, {"is_test": 1, "spatial": 1, "consumed_inputs": [0, 0, 0, 1, 1]}),
        (6, {"is_test": 1, "spatial": 1}),
        (7, {"spatial": 1}),
        (9, {}),
        (15, {"training_mode": 0}),
    ],
)
def test_batchnorm_attributes_of_every_opset(opset, attrs):
    """consumed_inputs (opset 1-5), is_test (< 7), spatial (< 9), training_mode (14+);
    the expected values are the inference formula computed here."""
    rng = np.random.default_rng(1)
    c = X.shape[1]
    consts = {
        "scale": rng.uniform(0.5, 1.5, c).astype(np.float32),
        "bias": rng.standard_normal(c).astype(np.float32),
        "mean": rng.standard_normal(c).astype(np.float32),
        "var": rng.uniform(0.5, 2, c).astype(np.float32),
    }
    model = single_node("BatchNormalization", opset, {"x": X}, {**attrs, "epsilon": 1e-3}, consts)
    expected = (X - consts["mean"][:, None, None]) / np.sqrt(consts["var"][:, None, None] + 1e-3)
    expected = expected * consts["scale"][:, None, None] + consts["bias"][:, None, None]
    np.testing.assert_allclose(run_top(model, {"x": X})["y0"], expected, rtol=1e-5, atol=1e-5)


# -- small torch networks exported at each opset ------------------------------------------------

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional


class ConvNet(nn.Module):
    """conv/bn/pool, then both `flatten` and `x.view(x.size(0), -1)` into linear layers."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 10)
        self.fc2 = nn.Linear(8 * 2 * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        x = F.relu(self.conv2(x))
        a = self.fc(torch.flatten(x, 1))
        pooled = F.avg_pool2d(x, 2)
        b = self.fc2(pooled.view(pooled.size(0), -1))
        return a + b


class Upsampler(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        x = self.conv(x)
        nearest = F.interpolate(x, scale_factor=2, mode="nearest")
        linear = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        return torch.clamp(nearest + linear, -1.0, 1.0)


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 12, batch_first=True)
        self.fc = nn.Linear(12, 3)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y[:, -1])


class Attention(nn.Module):
    """One pre-norm self-attention block with two heads; head split by `view` on sizes."""

    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.size(0), x.size(1), x.size(2)
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = torch.matmul(q, k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        mixed = torch.matmul(torch.softmax(scores, dim=-1), v)
        return x + self.out(mixed.transpose(1, 2).reshape(b, t, d))


NETS = {
    "convnet": (ConvNet, (2, 3, 16, 16)),
    "upsample": (Upsampler, (1, 3, 6, 6)),
    "lstm": (Recurrent, (1, 5, 6)),
    "attention": (Attention, (1, 5, 16)),
}
OPSETS = [9, 11, 12, 13, 15, 17, 20]


def export(net_name: str, opset: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    cls, shape = NETS[net_name]
    torch.manual_seed(0)
    module = cls().eval()
    x = torch.randn(*shape)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # A dynamic batch keeps the Shape -> Gather -> Unsqueeze -> Concat chains of `view`.
        torch.onnx.export(
            module, (x,), buffer, opset_version=opset, dynamo=False, input_names=["x"], output_names=["y"],
            dynamic_axes={"x": {0: "batch"}},
        )
    return onnx.load_from_string(buffer.getvalue()), {"x": x.numpy()}


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("net_name", list(NETS))
def test_torch_export_at_opset_matches_onnxruntime(net_name, opset):
    model, feeds = export(net_name, opset)
    assert model.opset_import[0].version == opset
    assert_matches_onnxruntime(model, feeds)


@pytest.mark.parametrize("net_name", ["convnet", "attention"])
def test_dynamo_export_at_opset_18_matches_onnxruntime(net_name):
    """torch's dynamo exporter (opset 18+) writes other patterns than the legacy one."""
    cls, shape = NETS[net_name]
    torch.manual_seed(0)
    module = cls().eval()
    x = torch.randn(*shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, (x,), dynamo=True, opset_version=18, input_names=["x"], output_names=["y"])
    model = program.model_proto
    assert model.opset_import[0].version == 18
    assert_matches_onnxruntime(model, {"x": x.numpy()})


@pytest.mark.parametrize("net_name", list(NETS))
def test_converted_to_newest_opset_matches_onnxruntime(net_name):
    """The opset-17 export carried to the newest opset onnx knows (Reduce*/Split/Pad/Resize
    change form on the way) by onnx.version_converter."""
    from onnx import version_converter

    model, feeds = export(net_name, 17)
    newest = onnx.defs.onnx_opset_version()
    converted = version_converter.convert_version(model, newest)
    assert converted.opset_import[0].version == newest
    assert_matches_onnxruntime(converted, feeds)


# -- ONNX's own cases, carried across opsets ---------------------------------------------------

# Ops whose attributes became inputs (or changed meaning) across opsets.
CHANGED_OPS = {
    "Unsqueeze", "Squeeze", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "Split",
    "Slice", "Pad", "Clip", "Upsample", "Resize", "TopK", "Dropout", "BatchNormalization",
}
CONVERTED_OPSETS = [9, 11, 12, 13, 18, 21]


@functools.cache
def _node_cases() -> list:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return collect_testcases(None)


@pytest.mark.slow
@pytest.mark.parametrize("op_type", sorted(CHANGED_OPS))
def test_onnx_cases_converted_to_other_opsets_match_the_reference(op_type):
    """Each ONNX case of an op whose form changed, converted by onnx.version_converter to
    older and newer opsets, imports and equals ONNX's reference run on the converted model."""
    from tests.conformance.expected_failures import reason_for

    cases = [
        case for case in _node_cases()
        if len(case.model.graph.node) == 1 and case.model.graph.node[0].op_type == op_type
        and not reason_for(case.name)
    ]
    assert cases
    for case in cases:
        _check_converted(case)


def _check_converted(case) -> None:
    from onnx import version_converter
    from onnx.reference import ReferenceEvaluator

    from tests.conformance.harness import run_case, to_array

    checked = 0
    for opset in CONVERTED_OPSETS:
        try:
            converted = version_converter.convert_version(case.model, opset)
            onnx.checker.check_model(converted)
            data_sets = [
                (inputs, ReferenceEvaluator(converted).run(None, dict(zip(
                    [i.name for i in converted.graph.input], [to_array(x) for x in inputs]))))
                for inputs, _ in case.data_sets
            ]
        except Exception:  # noqa: BLE001, S112 - not expressible at that opset: nothing to compare
            continue
        if opset < 19 and any(a.name == "mode" and a.s == b"wrap" for a in converted.graph.node[0].attribute):
            continue  # the converter keeps Pad's mode 'wrap', which only opset 19 has
        run_case(converted, data_sets, case.rtol, case.atol)
        checked += 1
    assert checked > 0, f"{case.name}: no opset to convert it to"


def test_model_local_functions_are_inlined():
    """A node calling a model-local function (exporters write modules so) imports as the
    function's body."""
    body = [
        helper.make_node("Mul", ["a", "a"], ["sq"]),
        helper.make_node("Add", ["sq", "a"], ["out"]),
    ]
    function = helper.make_function(
        "local.fns", "SquarePlus", ["a"], ["out"], body, [helper.make_opsetid("", 13)]
    )
    graph = helper.make_graph(
        [helper.make_node("SquarePlus", ["x"], ["y"], domain="local.fns")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(
        graph, functions=[function], ir_version=8,
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("local.fns", 1)],
    )
    x = np.random.default_rng(4).standard_normal((2, 3)).astype(np.float32)
    assert_matches_onnxruntime(model, {"x": x})
