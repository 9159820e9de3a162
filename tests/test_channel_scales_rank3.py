"""Per-channel activation scales on rank-3 tensors: [N, C, L] (1-D convolutions,
detector heads) along axis 1, and features-last [N, L, C] (transformer blocks) along
the last axis.

Each net concatenates or adds channels whose ranges differ by orders of magnitude.
With one scale per tensor the small channels round to a few codes; with one scale
per channel they keep their precision. The expected values are onnxruntime's; the
device model runs each INT8 module and must equal the TPU interpreter bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.test_codegen import compile_and_compare
from tpu_xdsl.backend import slicing
from tpu_xdsl.backend.codegen import codegen
from tpu_xdsl.backend.slicing import OpShape
from tpu_xdsl.calibration.calibrator import Options, calibrate
from tpu_xdsl.calibration.dataset import Dataset
from tpu_xdsl.calibration.table import CalibrationTableError, read_table, write_table
from tpu_xdsl.device.chip import chip_config
from tpu_xdsl.device.isa import Compute, LocalTensor
from tpu_xdsl.device.model_file import load_model, save_model
from tpu_xdsl.device.runtime import real_value, run_model
from tpu_xdsl.device.timing import compute_cycles
from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.dialects.quant_types import qparams_of
from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.interp.runner import ModuleRunner
from tpu_xdsl.ir_io import save_module
from tpu_xdsl.kernels.quant import ChannelQParams
from tpu_xdsl.transforms.import_calibration import import_calibration
from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.transforms.tpu_assign_memory import assign_memory
from tpu_xdsl.weights import attach_weights, weights_of

F = TensorProto.FLOAT


def const(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def model_of(nodes, inputs, outputs, inits) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
        [onnx.ValueInfoProto(name=o) for o in outputs], initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity; 0 when one side is all zeros (every value rounded away)."""
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    norms = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / norms) if norms else 0.0


class Flow:
    """A model imported, calibrated (KL) on `samples` and lowered to INT8 both ways."""

    def __init__(self, model: onnx.ModelProto, folder: Path, samples: list[dict[str, np.ndarray]]):
        self.model = model
        result = import_onnx(model, "m")
        attach_weights(result.module, result.weights)
        canonicalize(result.module)
        self.top = result.module
        mlir = folder / "m.mlir"
        save_module(self.top, mlir, dict(weights_of(self.top)))
        data = folder / "samples"
        data.mkdir()
        for n, feeds in enumerate(samples):
            np.savez(data / f"s{n:02d}.npz", **feeds)
        table = calibrate(mlir, Dataset.from_dir(data, len(samples)), Options(method="kl")).table
        # Through the file: the table's per-channel lines carry their axis.
        write_table(folder / "table", table)
        self.table = read_table(folder / "table")

    def lowered(self, per_tensor: bool):
        tpu = self.top.clone()
        attach_weights(tpu, dict(weights_of(self.top)))
        import_calibration(tpu, self.table, "table")
        report = lower_top_to_tpu(tpu, "INT8", per_tensor_activations=per_tensor)
        assert not report.fallbacks, report.fallbacks
        tpu.verify()  # shape rules: a table per channel of its own axis
        return tpu

    def run(self, per_tensor: bool, feeds) -> dict[str, np.ndarray]:
        tpu = self.lowered(per_tensor)
        return ModuleRunner(tpu, weights_of(tpu)).run(feeds)

    def reference(self, feeds) -> dict[str, np.ndarray]:
        session = ort.InferenceSession(self.model.SerializeToString(), providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(None, feeds)))


def channel_axes(tpu, names: set[str]) -> dict[str, int | None]:
    """The axis of the per-channel scales of the TPU tensors named `names` (None: one scale)."""
    weights = weights_of(tpu)
    found = {}
    for op in main_func(tpu).body.block.ops:
        for name, result in zip(tensor_names(op), op.results):
            if name in names:
                qparams = qparams_of(result.type, weights)
                found[name] = qparams.axis if isinstance(qparams, ChannelQParams) else None
    return found


# -- a detector head: boxes 0..320 and class scores 0..1 in one [1, 4+classes, anchors] ----------

CLASSES = 6


def detector() -> onnx.ModelProto:
    """conv features -> 1x1 convs: boxes sigmoid * 320, class scores sigmoid -> reshape to
    [1, C, anchors] -> Concat on axis 1 (a YOLO-style output), and the same transposed to
    [1, anchors, 4 + classes] (how YOLO exports often end)."""
    rng = np.random.default_rng(11)
    inits = [
        const("w1", rng.normal(0, 0.4, (8, 3, 3, 3)).astype(np.float32)),
        const("b1", rng.normal(0, 0.1, 8).astype(np.float32)),
        const("w2", rng.normal(0, 0.3, (8, 8, 3, 3)).astype(np.float32)),
        const("b2", rng.normal(0, 0.1, 8).astype(np.float32)),
        const("wb", rng.normal(0, 0.6, (4, 8, 1, 1)).astype(np.float32)),
        const("bb", rng.normal(0, 0.3, 4).astype(np.float32)),
        const("wc", rng.normal(0, 0.8, (CLASSES, 8, 1, 1)).astype(np.float32)),
        const("bc", rng.normal(-1.0, 0.5, CLASSES).astype(np.float32)),
        const("image_size", np.float32(320.0)),
        const("box_shape", np.array([1, 4, -1], np.int64)),
        const("cls_shape", np.array([1, CLASSES, -1], np.int64)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["f1"]),
        helper.make_node("Conv", ["f1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["f2"]),
        helper.make_node("Conv", ["f2", "wb", "bb"], ["box_logits"], kernel_shape=[1, 1]),
        helper.make_node("Sigmoid", ["box_logits"], ["box_unit"]),
        helper.make_node("Mul", ["box_unit", "image_size"], ["boxes"]),
        helper.make_node("Conv", ["f2", "wc", "bc"], ["cls_logits"], kernel_shape=[1, 1]),
        helper.make_node("Sigmoid", ["cls_logits"], ["scores"]),
        helper.make_node("Reshape", ["boxes", "box_shape"], ["box_rows"]),
        helper.make_node("Reshape", ["scores", "cls_shape"], ["score_rows"]),
        helper.make_node("Concat", ["box_rows", "score_rows"], ["detections"], axis=1),
        helper.make_node("Transpose", ["detections"], ["anchors"], perm=[0, 2, 1]),
    ]
    return model_of(nodes, [("x", [1, 3, 16, 16])], ["detections", "anchors"], inits)


def images(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.uniform(0, 1, (1, 3, 16, 16)).astype(np.float32)} for _ in range(count)]


def test_detector_head_keeps_its_class_scores(tmp_path):
    flow = Flow(detector(), tmp_path, images(8, 1))
    # The calibration table records the concatenation's ranges per channel along axis 1,
    # and the transposed output's along its last axis.
    assert flow.table.channel_axes.get("detections", 1) == 1
    assert len(flow.table.channels["detections"][0]) == 4 + CLASSES
    assert flow.table.channel_axes["anchors"] == 2
    feeds = images(1, 99)[0]
    expected = flow.reference(feeds)
    per_channel, per_tensor = flow.run(False, feeds), flow.run(True, feeds)
    scores = np.s_[:, 4:, :]
    boxes = np.s_[:, :4, :]
    good = cosine(per_channel["detections"][scores], expected["detections"][scores])
    poor = cosine(per_tensor["detections"][scores], expected["detections"][scores])
    print(f"class scores: per-channel {good:.5f}, per-tensor {poor:.5f}")
    assert good >= 0.99
    assert poor < 0.95 and good - poor > 0.05
    assert cosine(per_channel["detections"][boxes], expected["detections"][boxes]) >= 0.999
    transposed = np.s_[:, :, 4:]
    assert cosine(per_channel["anchors"][transposed], expected["anchors"][transposed]) >= 0.99
    # The scores keep their scales through reshape and concat (axis 1), and the
    # transpose moves them to the last axis; the device equals the interpreter.
    tpu = flow.lowered(False)
    axes = channel_axes(tpu, {"score_rows", "detections_int8", "detections_uint8", "anchors_uint8", "anchors_int8"})
    assert axes.get("score_rows") == 1
    assert 1 in axes.values() and 2 in axes.values(), axes
    compile_and_compare(tpu, feeds)


# -- features-last [N, L, C]: matmul, leaky relu (a table) and add -------------------------------


def transformer_block() -> onnx.ModelProto:
    """h = x @ W1 + b1, g = LeakyRelu(x @ W2), y = h + g: the output columns of W1 and W2
    are scaled by 30 (first half) and 0.3 (second half): outlier features, 100x apart."""
    rng = np.random.default_rng(5)
    columns = np.array([30.0] * 6 + [0.3] * 6, np.float32)
    inits = [
        const("w1", (rng.normal(0, 0.3, (8, 12)) * columns).astype(np.float32)),
        const("b1", (rng.normal(0, 0.1, 12) * columns).astype(np.float32)),
        const("w2", (rng.normal(0, 0.3, (8, 12)) * columns).astype(np.float32)),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["xw1"]),
        helper.make_node("Add", ["xw1", "b1"], ["h"]),
        helper.make_node("MatMul", ["x", "w2"], ["xw2"]),
        helper.make_node("LeakyRelu", ["xw2"], ["g"], alpha=0.1),
        helper.make_node("Add", ["h", "g"], ["y"]),
    ]
    return model_of(nodes, [("x", [1, 16, 8])], ["y"], inits)


def test_features_last_columns_keep_their_scales(tmp_path):
    rng = np.random.default_rng(2)
    samples = [{"x": rng.standard_normal((1, 16, 8)).astype(np.float32)} for _ in range(8)]
    flow = Flow(transformer_block(), tmp_path, samples)
    assert flow.table.channel_axes["y"] == 2 and len(flow.table.channels["y"][0]) == 12
    feeds = {"x": rng.standard_normal((1, 16, 8)).astype(np.float32)}
    expected = flow.reference(feeds)["y"]
    per_channel, per_tensor = flow.run(False, feeds)["y"], flow.run(True, feeds)["y"]
    small = np.s_[:, :, 6:]
    good, poor = cosine(per_channel[small], expected[small]), cosine(per_tensor[small], expected[small])
    print(f"small columns: per-channel {good:.5f}, per-tensor {poor:.5f}")
    assert good >= 0.99
    assert poor < 0.9 and good - poor > 0.05
    assert cosine(per_channel, expected) >= 0.999
    tpu = flow.lowered(False)
    # The matmuls requantize per column, the table and the add work along the last axis.
    assert channel_axes(tpu, {"h", "g", "y_int8"}) == {"h": 2, "g": 2, "y_int8": 2}
    kinds = {op.name: op.attributes.get("channel_axis") for op in main_func(tpu).body.block.ops}
    assert kinds["tpu.add"] is not None and kinds["tpu.lut"] is not None
    compile_and_compare(tpu, feeds)


def test_features_last_int8_output_keeps_its_axis_in_the_model_file(tmp_path):
    """With quant_output the model's output stays INT8 with scales along its last axis;
    the .tpumodel records the axis, so the runtime's real values match onnxruntime."""
    rng = np.random.default_rng(2)
    samples = [{"x": rng.standard_normal((1, 16, 8)).astype(np.float32)} for _ in range(8)]
    flow = Flow(transformer_block(), tmp_path, samples)
    feeds = {"x": rng.standard_normal((1, 16, 8)).astype(np.float32)}
    tpu = flow.top.clone()
    attach_weights(tpu, dict(weights_of(flow.top)))
    import_calibration(tpu, flow.table, "table")
    lower_top_to_tpu(tpu, "INT8", quant_output=True)
    assign_memory(tpu)
    save_model(codegen(tpu), tmp_path / "m.tpumodel")
    model = load_model(tmp_path / "m.tpumodel")
    (output,) = model.outputs
    assert output.channel_axis == 2 and len(output.scales) == 12
    codes = run_model(model, feeds).outputs[output.name]
    assert codes.dtype == np.int8
    expected = flow.reference(feeds)["y"]
    assert cosine(real_value(output, codes), expected) >= 0.999


# -- a 1-D convolution net [N, C, L] -------------------------------------------------------------


def conv1d_net() -> onnx.ModelProto:
    """Conv1d (4 -> 8, output channels scaled by 40 and 0.2) -> ReLU -> MaxPool1d:
    output [1, 8, 16]."""
    rng = np.random.default_rng(4)
    gains = np.array([40.0] * 4 + [0.2] * 4, np.float32)
    inits = [
        const("w1", (rng.normal(0, 0.4, (8, 4, 3)) * gains[:, None, None]).astype(np.float32)),
        const("b1", (rng.normal(0, 0.1, 8) * gains).astype(np.float32)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3], pads=[1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["y"], kernel_shape=[2], strides=[2]),
    ]
    return model_of(nodes, [("x", [1, 4, 32])], ["y"], inits)


def test_conv1d_small_channels_keep_their_scales(tmp_path):
    rng = np.random.default_rng(6)
    samples = [{"x": rng.standard_normal((1, 4, 32)).astype(np.float32)} for _ in range(8)]
    flow = Flow(conv1d_net(), tmp_path, samples)
    assert flow.table.channel_axes.get("y", 1) == 1 and len(flow.table.channels["y"][0]) == 8
    feeds = {"x": rng.standard_normal((1, 4, 32)).astype(np.float32)}
    expected = flow.reference(feeds)["y"]
    per_channel, per_tensor = flow.run(False, feeds)["y"], flow.run(True, feeds)["y"]
    small = np.s_[:, 4:, :]
    good, poor = cosine(per_channel[small], expected[small]), cosine(per_tensor[small], expected[small])
    print(f"small channels: per-channel {good:.5f}, per-tensor {poor:.5f}")
    assert good >= 0.99
    assert poor < 0.9 and good - poor > 0.05
    tpu = flow.lowered(False)
    # The convolution (its ReLU fused: named r1) and the pool's codes keep axis-1 scales.
    assert set(channel_axes(tpu, {"c1", "r1", "y_uint8", "y_int8"}).values()) == {1}
    compile_and_compare(tpu, feeds)


# -- the channel-axis rule and the table ----------------------------------------------------------


def test_channel_axis_follows_the_tensor(tmp_path):
    """Features-last after a layer norm and a projection, through a reshape that keeps the
    last dimension; a transpose moves the features to axis 1; attention scores (a matmul
    of two activations) and what follows a conv are [N, C, ...]."""
    rng = np.random.default_rng(9)
    inits = [
        const("gamma", rng.uniform(0.5, 2, 6).astype(np.float32)),
        const("beta", rng.normal(0, 1, 6).astype(np.float32)),
        const("w", rng.normal(0, 1, (6, 5)).astype(np.float32)),
        const("shape4", np.array([1, 2, 2, 5], np.int64)),
    ]
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], axis=-1),
        helper.make_node("MatMul", ["ln", "w"], ["h"]),
        helper.make_node("Sigmoid", ["h"], ["gate"]),
        helper.make_node("Reshape", ["gate", "shape4"], ["heads"]),
        helper.make_node("Transpose", ["h"], ["t"], perm=[0, 2, 1]),
        helper.make_node("Relu", ["t"], ["r"]),
        helper.make_node("MatMul", ["h", "t"], ["scores"]),
    ]
    model = model_of(nodes, [("x", [1, 4, 6])], ["heads", "r", "scores"], inits)
    samples = [{"x": rng.standard_normal((1, 4, 6)).astype(np.float32)} for _ in range(3)]
    table = Flow(model, tmp_path, samples).table
    axes = {name: table.channel_axes.get(name, 1) for name in table.channels}
    assert axes == {"x": 1, "ln": 2, "h": 2, "gate": 2, "heads": 3, "t": 1, "r": 1, "scores": 1}
    lines = (tmp_path / "table").read_text().splitlines()
    assert any(line.startswith("#channel:3 heads 5 ") for line in lines)
    assert any(line.startswith("#channel t 5 ") for line in lines)


def test_table_channel_axis_is_checked(tmp_path):
    path = tmp_path / "table"
    path.write_text("# op_name threshold min max\nh 1.0 -1.0 1.0\n#channel:0 h 1 -1.0 1.0\n")
    with pytest.raises(CalibrationTableError, match=r":3: expected '#channel name .*AXIS 1 or more"):
        read_table(path)


def test_device_slices_cut_per_channel_vectors_along_their_axis():
    """A slice of a features-last op gets the multipliers and table rows of its own
    features, and a slice along the rows all of them (here rows and features are
    equally many, so only the axis tells them apart)."""
    shape = (1, 4, 4)
    requant = OpShape("requant", {"multiplier": [10, 11, 12, 13], "rshift": [1, 2, 3, 4], "axis": 2},
                      (shape,), (False,), (shape,))
    features = slicing.plan(requant, ((0, 1), (0, 4), (1, 2)))
    assert features.attrs["multiplier"] == [11, 12] and features.attrs["rshift"] == [2, 3]
    rows = slicing.plan(requant, ((0, 1), (1, 2), (0, 4)))
    assert rows.attrs["multiplier"] == [10, 11, 12, 13]
    add = OpShape("add", {"multiplier": [1, 2, 3, 4, 5, 6, 7, 8], "rshift": [3], "channel_axis": 2},
                  (shape, shape), (False, False), (shape,))
    assert slicing.plan(add, ((0, 1), (0, 4), (2, 2))).attrs["multiplier"] == [3, 4, 7, 8]
    assert slicing.plan(add, ((0, 1), (2, 2), (0, 4))).attrs["multiplier"] == [1, 2, 3, 4, 5, 6, 7, 8]
    # A concat along the rows with a multiplier per input and feature: each input's block.
    concat = OpShape("concat", {"axis": 1, "channel_axis": 2, "multiplier": [1, 2, 3, 4, 5, 6, 7, 8],
                                "rshift": [9, 9, 9, 9, 8, 8, 8, 8]},
                     ((1, 2, 4), (1, 2, 4)), (False, False), (shape,))
    cut = slicing.plan(concat, ((0, 1), (0, 4), (1, 2)))
    assert cut.attrs["multiplier"] == [2, 3, 6, 7] and cut.attrs["rshift"] == [9, 9, 8, 8]
    assert cut.operands == [((0, 1), (0, 2), (1, 2)), ((0, 1), (0, 2), (1, 2))]
    lut = OpShape("lut", {"channel_axis": 2}, (shape, (4, 256)), (False, True), (shape,))
    assert slicing.plan(lut, ((0, 1), (0, 4), (2, 2))).operands[1] == ((2, 2), (0, 256))
    assert slicing.plan(lut, ((0, 1), (2, 2), (0, 4))).operands[1] == ((0, 4), (0, 256))


def two_level_detector() -> onnx.ModelProto:
    """Two feature levels (16x16 and 8x8), each with its box and class heads joined on
    axis 1, reshaped to [1, 4 + classes, anchors] and joined along the anchors (axis 2),
    as YOLO heads join their levels."""
    rng = np.random.default_rng(12)
    inits = [
        const("w1", rng.normal(0, 0.4, (8, 3, 3, 3)).astype(np.float32)),
        const("w2", rng.normal(0, 0.3, (8, 8, 3, 3)).astype(np.float32)),
        const("image_size", np.float32(320.0)),
        const("rows", np.array([1, 4 + CLASSES, -1], np.int64)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["f1"]),
        helper.make_node("Conv", ["f1", "w2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["f2"]),
    ]
    for level, features in (("a", "f1"), ("b", "f2")):
        inits += [
            const(f"wb_{level}", rng.normal(0, 0.6, (4, 8, 1, 1)).astype(np.float32)),
            const(f"wc_{level}", rng.normal(0, 0.8, (CLASSES, 8, 1, 1)).astype(np.float32)),
            const(f"bc_{level}", rng.normal(-1.0, 0.5, CLASSES).astype(np.float32)),
        ]
        nodes += [
            helper.make_node("Conv", [features, f"wb_{level}"], [f"box_logits_{level}"], kernel_shape=[1, 1]),
            helper.make_node("Sigmoid", [f"box_logits_{level}"], [f"box_unit_{level}"]),
            helper.make_node("Mul", [f"box_unit_{level}", "image_size"], [f"boxes_{level}"]),
            helper.make_node(
                "Conv", [features, f"wc_{level}", f"bc_{level}"], [f"cls_logits_{level}"], kernel_shape=[1, 1]
            ),
            helper.make_node("Sigmoid", [f"cls_logits_{level}"], [f"scores_{level}"]),
            helper.make_node("Concat", [f"boxes_{level}", f"scores_{level}"], [f"head_{level}"], axis=1),
            helper.make_node("Reshape", [f"head_{level}", "rows"], [f"rows_{level}"]),
        ]
    nodes.append(helper.make_node("Concat", ["rows_a", "rows_b"], ["detections"], axis=2))
    return model_of(nodes, [("x", [1, 3, 16, 16])], ["detections"], inits)


def test_levels_joined_along_the_anchors_keep_channel_scales(tmp_path):
    flow = Flow(two_level_detector(), tmp_path, images(8, 3))
    feeds = images(1, 98)[0]
    expected = flow.reference(feeds)["detections"]
    per_channel, per_tensor = flow.run(False, feeds)["detections"], flow.run(True, feeds)["detections"]
    scores = np.s_[:, 4:, :]
    good, poor = cosine(per_channel[scores], expected[scores]), cosine(per_tensor[scores], expected[scores])
    print(f"two levels, class scores: per-channel {good:.5f}, per-tensor {poor:.5f}")
    assert good >= 0.99
    assert poor < 0.95 and good - poor > 0.05
    tpu = flow.lowered(False)
    (concat,) = [
        op for op in main_func(tpu).body.block.ops if op.name == "tpu.concat" and "detections" in tensor_names(op)[0]
    ]
    # One multiplier per input and channel: each level's channels to the output's scales.
    assert len(concat.attributes["multiplier"].data) == 2 * (4 + CLASSES)
    # The concatenation takes its inputs per channel: no conversion of them to one scale
    # is left behind, unused, for the device to run (nudenet's head had three).
    unused = [tensor_names(op) for op in main_func(tpu).body.block.ops
              if op.name.startswith("tpu.") and all(r.first_use is None for r in op.results)]
    assert not unused, unused
    compile_and_compare(tpu, feeds)


def test_last_axis_factors_cost_one_more_pass():
    """bm1684x: an INT8 add of [1, 16, 12] codes is ceil(16 / 64) x ceil(12 / 64) = 1 cycle
    a pass, 2 passes, plus the 64-cycle issue latency; along the last axis its 2 x 12
    multipliers are read as a vector inside each lane: one pass more."""
    chip = chip_config("bm1684x")
    codes = LocalTensor(0, "int8", (1, 16, 1, 12), (1, 16, 12))
    attrs = {"multiplier": list(range(1, 25)), "rshift": [8]}
    along_rows = Compute(0, "add", (codes, codes), (codes,), attrs)
    along_features = Compute(1, "add", (codes, codes), (codes,), {**attrs, "channel_axis": 2})
    assert compute_cycles(chip, along_rows) == 64 + 2
    assert compute_cycles(chip, along_features) == 64 + 3


# -- a slice or split along the channels keeps their scales (silero's STFT front end) ------------


def stft_front_end() -> onnx.ModelProto:
    """A strided conv1d of 16 output channels whose first 8 are 100x the last 8 (the real and
    imaginary parts of a filter bank differ as much), cut along the channels by a Slice (the
    last 8, and along L too) and by a Split (4 + 12), then magnitudes: a^2 + b^2."""
    rng = np.random.default_rng(3)
    w = rng.normal(0, 1, (16, 1, 8)).astype(np.float32)
    w[:8] *= 10
    w[8:] *= 0.1
    inits = [const("w", w), const("starts", np.array([8, 1], np.int64)), const("ends", np.array([16, 8], np.int64)),
             const("axes", np.array([1, 2], np.int64)), const("sizes", np.array([4, 12], np.int64))]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["spectrum"], kernel_shape=[8], strides=[4]),
        helper.make_node("Slice", ["spectrum", "starts", "ends", "axes"], ["small"]),
        helper.make_node("Split", ["spectrum", "sizes"], ["head", "tail"], axis=1),
        helper.make_node("Mul", ["small", "small"], ["small_power"]),
        helper.make_node("Mul", ["tail", "tail"], ["tail_power"]),
    ]
    return model_of(nodes, [("x", [2, 1, 64])], ["small_power", "head", "tail_power"], inits)


def test_slice_and_split_along_the_channels_keep_their_scales(tmp_path):
    rng = np.random.default_rng(4)
    samples = [{"x": rng.normal(0, 1, (2, 1, 64)).astype(np.float32)} for _ in range(8)]
    flow = Flow(stft_front_end(), tmp_path, samples)
    tpu = flow.lowered(False)
    weights = weights_of(tpu)
    ops = {name: op for op in main_func(tpu).body.block.ops for name in tensor_names(op)}
    spectrum = qparams_of(ops["spectrum"].results[0].type, weights)
    assert isinstance(spectrum, ChannelQParams)
    small = qparams_of(ops["small"].results[0].type, weights)
    split = ops["tail"]  # its first result is head_int8 (head, an output, is its float cast)
    head, tail = (qparams_of(r.type, weights) for r in split.results)
    # The channels each keeps, with their own scales, and no requantization before the cut.
    assert isinstance(small, ChannelQParams) and np.array_equal(small.scales, spectrum.scales[8:16])
    assert isinstance(head, ChannelQParams) and np.array_equal(head.scales, spectrum.scales[:4])
    assert isinstance(tail, ChannelQParams) and np.array_equal(tail.scales, spectrum.scales[4:])
    assert ops["small"].operands[0] is ops["spectrum"].results[0]
    assert split.name == "tpu.split" and split.operands[0] is ops["spectrum"].results[0]
    feeds = {"x": rng.normal(0, 1, (2, 1, 64)).astype(np.float32)}
    expected = flow.reference(feeds)
    per_channel, per_tensor = flow.run(False, feeds), flow.run(True, feeds)
    good = cosine(per_channel["small_power"], expected["small_power"])
    poor = cosine(per_tensor["small_power"], expected["small_power"])
    print(f"small channels' power: per-channel {good:.5f}, per-tensor {poor:.5f}")
    # Requantized to one scale before the cut (as before this lowering, or TPU-MLIR's per-tensor
    # scheme) the small channels keep ~2 bits: 0.855 and 0.852; with their own scales 0.987.
    assert good >= 0.98 and poor < 0.9
    assert cosine(per_channel["tail_power"], expected["tail_power"]) >= 0.97
    compile_and_compare(tpu, feeds)
