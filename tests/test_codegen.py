"""Compiled programs reproduce the TPU interpreter: small ONNX graphs, lowered (INT8 in each
scheme, BF16, F16, F32 where the chip has them), addressed (`assign_memory`), compiled
(`codegen`) and run on the device model with every named tensor dumped; each tensor is
compared with the TPU interpreter's on the same lowered module: integer tensors equal,
float tensors to cosine 0.99999 (slicing reorders float sums).

Most graphs run on cv183x (32 lanes of 32 KiB) with inputs large enough that their ops
must be cut into slices (N, H with window halos, C) and double-buffered, or fall back to
one buffer; some tests count the Compute instructions of a layer to prove it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from tests.test_int8 import init, lowered, model_of
from tpu_xdsl.backend.codegen import codegen
from tpu_xdsl.backend.fused_casts import epilogue_casts, prologue_casts
from tpu_xdsl.device.isa import Compute
from tpu_xdsl.device.model_file import TpuModel
from tpu_xdsl.device.runtime import run_model
from tpu_xdsl.dialects.module import input_names, main_func, tensor_names
from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.interp.compare import compare_tensors
from tpu_xdsl.interp.runner import ModuleRunner, TensorCapture, real_values
from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.transforms.tpu_assign_memory import assign_memory
from tpu_xdsl.weights import attach_weights, weights_of

FLOAT_COSINE = 0.99999
RNG = np.random.default_rng(11)


def weight(name: str, shape, scale: float = 0.3) -> onnx.TensorProto:
    return init(name, RNG.standard_normal(shape) * scale)


def ints(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def node(op: str, inputs: list[str], outputs: list[str], **attrs) -> onnx.NodeProto:
    return helper.make_node(op, inputs, outputs, **attrs)


# -- lowering, compiling, comparing -------------------------------------------------------------


def float_lowered(model: onnx.ModelProto, mode: str, chip: str):
    """The TPU module of `model` in a float mode, and a random normal test input."""
    result = import_onnx(model, "m")
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    lower_top_to_tpu(result.module, mode, chip)
    rng = np.random.default_rng(5)
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    return result.module, {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


def lower(model: onnx.ModelProto, scheme: str, chip: str, folder: Path):
    if scheme in SCHEMES:
        _, tpu, feeds, _ = lowered(model, folder, samples=4, chip_name=chip, **SCHEMES[scheme])
        return tpu, feeds
    return float_lowered(model, scheme, chip)


def compile_and_compare(tpu, feeds) -> TpuModel:
    """Compile `tpu`, run it on the device model and compare every named tensor with the
    TPU interpreter's; returns the compiled model."""
    capture = TensorCapture()
    outputs = ModuleRunner(tpu, weights_of(tpu)).run(feeds, [capture])
    reference = {**capture.tensors, **outputs}
    assign_memory(tpu)
    model = codegen(tpu)
    result = run_model(model, feeds, dump_all=True)
    device = {**result.tensors, **result.outputs}
    inputs = set(input_names(tpu))
    # A cast that runs inside the slices of the op reading it never reaches DDR, nor does
    # the result of an op whose cast runs inside its slices.
    ops = list(main_func(tpu).body.block.ops)
    fused = {tensor_names(cast)[0] for cast in prologue_casts(ops).values()}
    fused |= {tensor_names(op)[0] for op in epilogue_casts(ops)}
    missing = set(reference) - set(device) - inputs - fused
    assert not missing, f"the device dumps no {sorted(missing)}"
    for name, expected in reference.items():
        if name in inputs or name in fused:
            continue
        got = device[name]
        assert got.shape == expected.shape and got.dtype == expected.dtype, (name, got.shape, got.dtype, expected.dtype)
        if expected.dtype.kind in "iub":
            assert np.array_equal(got, expected), f"{name}: {int(np.sum(got != expected))} of {got.size} differ"
        else:
            cosine = compare_tensors(name, expected, got).cosine
            assert cosine >= FLOAT_COSINE, f"{name}: cosine {cosine}"
    return model


def computes(model: TpuModel, layer: str) -> int:
    return sum(1 for i in model.instructions if isinstance(i, Compute) and i.layer == layer)


# -- graphs ------------------------------------------------------------------------------------


def conv(x_shape, w_shape, out: str = "y", relu: bool = False, bias: bool = True, **attrs) -> onnx.ModelProto:
    inits = [weight("w", w_shape)] + ([weight("b", [w_shape[0]], 0.1)] if bias else [])
    nodes = [node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["c" if relu else out], **attrs)]
    if relu:
        nodes.append(node("Relu", ["c"], [out]))
    return model_of(nodes, [("x", x_shape)], out, inits)


GRAPHS = {
    # windows: H slices with halos, pads moved to the slice edges
    "conv3x3_pad1_bias_relu": conv([1, 16, 128, 128], [16, 16, 3, 3], relu=True, kernel_shape=[3, 3],
                                   pads=[1, 1, 1, 1]),
    "conv_stride2": conv([1, 16, 255, 128], [16, 16, 3, 3], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 2]),
    "conv_dilation2": conv([1, 8, 160, 160], [8, 8, 3, 3], bias=False, kernel_shape=[3, 3], dilations=[2, 2],
                           pads=[2, 2, 2, 2]),
    "conv_grouped": conv([1, 8, 128, 128], [16, 4, 3, 3], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=2),
    "conv_depthwise": conv([1, 64, 96, 96], [64, 1, 3, 3], relu=True, kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                           group=64),
    "conv_1x1": conv([1, 96, 80, 80], [80, 96, 1, 1], kernel_shape=[1, 1]),
    "deconv_stride2": model_of(
        [node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1])],
        [("x", [1, 8, 96, 96])], "y", [weight("w", [8, 4, 4, 4]), weight("b", [4], 0.1)],
    ),
    # grouped: filter [C, OC / group, ...], not cut along channels (the filter box once took the
    # output channels' box, twice the filter's width: a program that read past it)
    "deconv_grouped": model_of(
        [node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1],
              group=2)],
        [("x", [1, 8, 32, 32])], "y", [weight("w", [8, 3, 4, 4]), weight("b", [6], 0.1)],
    ),
    "deconv_depthwise": model_of(
        [node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1],
              group=8)],
        [("x", [1, 8, 32, 32])], "y", [weight("w", [8, 1, 4, 4])],
    ),
    # constant int64 indices (torch's index_select and gather on a buffer), stored as int32
    "gather_constant_indices": model_of(
        [node("Gather", ["x", "idx"], ["g"], axis=1), node("GatherElements", ["x", "gidx"], ["e"], axis=2),
         node("ReduceSum", ["e", "axes"], ["s"], keepdims=1), node("Add", ["g", "s"], ["y"])],
        [("x", [1, 8, 32])], "y",
        [ints("idx", [5, 0, 7, -6, 2]), ints("gidx", np.random.default_rng(5).integers(0, 32, (1, 8, 32))),
         ints("axes", [1])],
    ),
    # masks (bool, held as int8 0 and 1) and indices (int64, held as int32) between float ops
    "masks_and_indices": model_of(
        [node("Greater", ["x", "half"], ["m"]), node("Where", ["m", "x", "zero"], ["w"]),
         node("Less", ["x", "minus"], ["l"]), node("Not", ["l"], ["nl"]), node("Cast", ["nl"], ["f"], to=1),
         node("Mul", ["x", "f"], ["xf"]), node("Add", ["w", "xf"], ["y"]),
         node("ArgMax", ["y"], ["a"], axis=2, keepdims=0),
         node("TopK", ["y", "k"], ["values", "indices"], axis=-1)],
        [("x", [1, 8, 32])], ["y", "a", "values", "indices"],
        [init("half", np.float32(0.5)), init("zero", np.float32(0.0)), init("minus", np.float32(-1.0)),
         ints("k", [3])],
    ),
    "cumsum": model_of(
        [node("CumSum", ["x", "axis"], ["c"], exclusive=1), node("CumSum", ["c", "axis0"], ["y"], reverse=1)],
        [("x", [2, 8, 32])], "y", [ints("axis", 2), ints("axis0", 0)],
    ),
    "matmul_weight": model_of(
        [node("MatMul", ["x", "w"], ["m"]), node("Add", ["m", "b"], ["y"])],
        [("x", [8, 128, 1024])], "y", [weight("w", [1024, 256], 0.05), weight("b", [256], 0.1)],
    ),
    "matmul_activations_batched": model_of(
        [node("MatMul", ["x", "z"], ["y"])], [("x", [2, 4, 96, 64]), ("z", [2, 4, 64, 80])], "y", [],
    ),
    "squeeze_excite_add_sub": model_of(
        [node("GlobalAveragePool", ["x"], ["g"]), node("HardSigmoid", ["g"], ["h"]), node("Mul", ["x", "h"], ["m"]),
         node("Add", ["m", "x"], ["s"]), node("Sub", ["s", "g"], ["y"])],
        [("x", [1, 40, 112, 112])], "y", [],
    ),
    "lut_per_channel_rows": model_of(
        [node("Sigmoid", ["x"], ["s"]), node("HardSwish", ["s"], ["y"])], [("x", [1, 80, 1, 6000])], "y", [],
    ),
    "max_pool_ceil": model_of(
        [node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 0, 0], ceil_mode=1)],
        [("x", [1, 16, 255, 160])], "y", [],
    ),
    "avg_pool_exclude_pad": model_of(
        [node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
              count_include_pad=0)],
        [("x", [1, 16, 96, 96])], "y", [],
    ),
    "avg_pool_global_reduce_mean": model_of(
        [node("AveragePool", ["x"], ["a"], kernel_shape=[2, 2], strides=[2, 2]),
         node("GlobalAveragePool", ["a"], ["g"]), node("ReduceMean", ["x"], ["y"], axes=[2], keepdims=1),
         node("Add", ["y", "g"], ["z"])],
        [("x", [1, 16, 192, 192])], "z", [], opset=13,
    ),
    "concat": model_of(
        [node("Relu", ["x"], ["r"]), node("Sigmoid", ["z"], ["s"]), node("Concat", ["x", "r", "s"], ["c"], axis=1),
         node("Concat", ["c", "c"], ["y"], axis=2)],
        [("x", [1, 8, 64, 64]), ("z", [1, 8, 64, 64])], "y", [],
    ),
    "softmax_layer_norm": model_of(
        [node("Softmax", ["x"], ["s"], axis=-1),
         node("LayerNormalization", ["s", "g", "b"], ["y"], axis=-1, epsilon=1e-5)],
        [("x", [2, 96, 640])], "y", [weight("g", [640], 1.0), weight("b", [640], 0.1)],
    ),
    "resize_nearest": model_of(
        [node("Resize", ["x", "", "scales"], ["y"], mode="nearest")],
        [("x", [1, 40, 48, 24])], "y", [init("scales", [1, 1, 2, 3])], opset=13,
    ),
    "upsample_nearest": model_of(
        [node("Upsample", ["x", "scales"], ["y"], mode="nearest")],
        [("x", [1, 40, 24, 48])], "y", [init("scales", [1, 1, 3, 2])], opset=9,
    ),
    "reorders": model_of(
        [node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]), node("Reshape", ["t", "shape"], ["r"]),
         node("Slice", ["r", "starts", "ends", "axes", "steps"], ["s"]),
         node("Split", ["s", "split"], ["a", "b"], axis=1), node("Unsqueeze", ["a", "ax0"], ["u"]),
         node("Squeeze", ["u", "ax0"], ["q"]), node("Flatten", ["b"], ["f"], axis=1),
         node("Reshape", ["q", "shape2"], ["p"]), node("Concat", ["p", "f"], ["y"], axis=1)],
        [("x", [1, 8, 24, 24])], "y",
        [ints("shape", [1, 576, 8]), ints("starts", [2, 1]), ints("ends", [570, 8]), ints("axes", [1, 2]),
         ints("steps", [3, 2]), ints("split", [100, 90]), ints("ax0", [0]), ints("shape2", [1, 400])],
        opset=13,
    ),
    "pad_tile_expand_depth2space": model_of(
        [node("Pad", ["x", "pads"], ["p"], mode="constant"), node("Tile", ["p", "reps"], ["t"]),
         node("Expand", ["t", "eshape"], ["e"]), node("DepthToSpace", ["e"], ["y"], blocksize=2, mode="DCR")],
        [("x", [1, 8, 20, 20])], "y",
        [ints("pads", [0, 0, 1, 2, 0, 0, 3, 0]), ints("reps", [1, 2, 1, 1]), ints("eshape", [2, 16, 24, 22])],
        opset=13,
    ),
}

SCHEMES = {
    "INT8": {},  # symmetric, per-channel activation scales (the default)
    "INT8_per_tensor": {"per_tensor_activations": True},
    "INT8_asym": {"asymmetric": True},
}


@pytest.mark.parametrize("scheme", ["INT8", "INT8_per_tensor", "INT8_asym", "BF16"])
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_cv183x_reproduces_the_interpreter(graph, scheme, tmp_path):
    tpu, feeds = lower(GRAPHS[graph], scheme, "cv183x", tmp_path)
    compile_and_compare(tpu, feeds)


@pytest.mark.parametrize("scheme", ["INT8", "F32", "F16"])
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_bm1684x_reproduces_the_interpreter(graph, scheme, tmp_path):
    tpu, feeds = lower(GRAPHS[graph], scheme, "bm1684x", tmp_path)
    compile_and_compare(tpu, feeds)


@pytest.mark.parametrize(
    ("op", "mode", "chip", "shape"),
    [("Softmax", "BF16", "cv183x", [1, 40, 18385]), ("Softmax", "F32", "bm1684x", [2, 3, 70001]),
     ("LogSoftmax", "BF16", "cv183x", [1, 8, 20000])],
)
def test_a_softmax_longer_than_a_lane_is_cut_along_its_axis(op, mode, chip, shape, tmp_path):
    """PP-OCRv5's recognizer ends in a softmax over 18,385 classes: one bf16 row is 36.8 KB,
    more than a cv183x lane (32 KiB). Its rows are read in parts: the max, the sum of
    exp(x - max), then exp(x - max) / sum per part; the device equals the interpreter
    within the float tolerance, the largest error a few units in the last place."""
    model = model_of([node(op, ["x"], ["y"], axis=-1)], [("x", shape)], "y", [], opset=13)
    tpu, _ = lower(model, mode, chip, tmp_path)
    feeds = {"x": (np.random.default_rng(3).standard_normal(shape) * 4).astype(np.float32)}
    compiled = compile_and_compare(tpu, feeds)
    kinds = [i.kind for i in compiled.instructions if isinstance(i, Compute)]
    last = {"div"} if op == "Softmax" else {"log", "sub"}
    assert not {"softmax", "log_softmax"} & set(kinds) and {"reduce", "exp", "max", "add"} | last <= set(kinds)
    expected = ModuleRunner(tpu, weights_of(tpu)).run(feeds)["y"].astype(np.float64)
    got = run_model(compiled, feeds).outputs["y"].astype(np.float64)
    ulp = 2.0 ** (-7 if mode == "BF16" else -23)
    assert np.max(np.abs(got - expected) / np.maximum(np.abs(expected), 1e-30)) <= 4 * ulp
    probabilities = got if op == "Softmax" else np.exp(got)
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, rtol=1e-2 if mode == "BF16" else 1e-5)


@pytest.mark.parametrize("scheme", ["F32", "INT8"])
def test_masks_and_indices_equal_onnxruntime(scheme, tmp_path):
    """A mask (Greater, Where, Not, Cast) and indices (ArgMax, TopK) as a TPU module holds them,
    int8 0/1 and int32: the indices onnxruntime gives, exactly, also where INT8 data feeds
    them (the integer ops run in float, said as fallbacks)."""
    import onnxruntime

    model = GRAPHS["masks_and_indices"]
    tpu, feeds = lower(model, scheme, "bm1684x", tmp_path)
    names = ["y", "a", "values", "indices"]
    expected = dict(zip(names, onnxruntime.InferenceSession(model.SerializeToString(),
                                                            providers=["CPUExecutionProvider"]).run(names, feeds)))
    actual = real_values(tpu, ModuleRunner(tpu, weights_of(tpu)).run(feeds))
    assert actual["a"].dtype == actual["indices"].dtype == np.int32
    if scheme == "F32":
        for name in names:
            np.testing.assert_array_equal(actual[name], expected[name])
    else:
        assert compare_tensors("y", expected["y"], actual["y"]).cosine >= 0.99
        # INT8 rounding may swap near-equal values; the largest, well apart, stay
        assert np.mean(actual["a"] == expected["a"]) >= 0.75
