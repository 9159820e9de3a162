"""INT8: quantization parameters and integer kernels by hand, and every INT8 pattern family
end to end (ONNX graph -> TOP -> calibration -> INT8 TPU -> TPU interpreter).

End-to-end expectations come from the TOP interpreter (itself checked against
onnxruntime): the INT8 result, dequantized, must stay close to it, and every
INT8 op must equal its TOP op applied to the op's own dequantized inputs and
requantized, to within the rounding of its weights (one or two codes).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.interpreter import Interpreter

from tpu_xdsl.calibration.calibrator import Options, calibrate
from tpu_xdsl.calibration.dataset import Dataset
from tpu_xdsl.dialects.attr_values import op_attrs
from tpu_xdsl.dialects.module import tensor_names
from tpu_xdsl.dialects.quant_types import is_quantized, qparams_of
from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.interp.compare import compare_tensors
from tpu_xdsl.interp.runner import ModuleRunner, TensorCapture, real_values
from tpu_xdsl.interp.top_interpreter import result_specs
from tpu_xdsl.ir_io import save_module
from tpu_xdsl.kernels import ResultSpec, load_all
from tpu_xdsl.kernels.int8 import INT8_KERNELS
from tpu_xdsl.kernels.quant import (
    QParams,
    activation_qparams,
    quantize_bias,
    quantize_multipliers,
    weight_scales,
)
from tpu_xdsl.transforms.import_calibration import import_calibration
from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.weights import attach_weights, weights_of

F = TensorProto.FLOAT
KERNELS = load_all()


# -- quantization parameters by hand -----------------------------------------------------------


def test_activation_scales_from_thresholds():
    # Symmetric: S = T / 128 in int8; a tensor that is never negative uses uint8, T / 256.
    assert activation_qparams(4.0, -1.0, 3.0, asymmetric=False) == QParams(0.03125, 0, np.int8)
    assert activation_qparams(4.0, 0.0, 3.0, asymmetric=False) == QParams(0.015625, 0, np.uint8)
    # Asymmetric: uint8 over [max(min, -T), min(max, T)], widened to hold 0:
    # [-1, 4] -> S = 5 / 255, zero point round(1 / S) = round(51) = 51.
    q = activation_qparams(4.0, -1.0, 6.0, asymmetric=True)
    assert q.dtype == np.uint8 and q.zero_point == 51 and q.scale == pytest.approx(5 / 255)
    # [0.5, 2] holds no 0: [0, 2], zero point 0.
    assert activation_qparams(2.0, 0.5, 2.0, asymmetric=True) == QParams(2 / 255, 0, np.uint8)


def test_quantize_dequantize_saturate_and_round_half_away_from_zero():
    q = QParams(0.5, 3, np.uint8)
    codes = q.quantize(np.array([0.25, -0.25, 1.0, -10.0, 1000.0, np.inf, np.nan]))
    # 0.25 / 0.5 = 0.5 -> 1 (+3), -0.5 -> -1 (+3), 2 (+3), -20 -> 0 (saturated), 255, 255, 0 (+3)
    assert codes.tolist() == [4, 2, 5, 0, 255, 255, 3]
    np.testing.assert_array_equal(q.dequantize(codes[:3]), [0.5, -0.5, 1.0])
    assert q.quantized_value(0.0) == 3


def test_shared_shift_multipliers_and_weight_scales():
    multipliers, shift = quantize_multipliers([0.5, 0.125, -0.25])
    assert shift == 31 and multipliers == [2**30, 2**28, -(2**29)]
    w = np.array([[2.0, -1.0], [0.0, 0.0], [0.5, 0.25]])
    scales = weight_scales(w, axis=0)
    # max|w| / 127 per row; the all-zero row borrows the largest scale.
    np.testing.assert_allclose(scales, [2 / 127, 2 / 127, 0.5 / 127])
    # A floor raises a scale where a bias would not fit int32 (and the zero row follows).
    np.testing.assert_allclose(weight_scales(w, axis=0, floor=np.array([0.0, 0.0, 1.0])), [2 / 127, 1.0, 1.0])
    bias = quantize_bias(np.array([1.0, -3.0e9]), np.array([0.25, 1.0]))
    assert bias.tolist() == [4, -(2**31 - 1)]


# -- integer kernels by hand -------------------------------------------------------------------


def run_int8(kind: str, inputs, attrs, shape, dtype=np.int8):
    (out,) = INT8_KERNELS[kind](inputs, attrs, [ResultSpec(tuple(shape), np.dtype(dtype))])
    return out


def test_conv_accumulates_exactly_then_requantizes_per_channel():
    x = np.array([[[[100, -128]], [[127, 3]]]], np.int8)  # [1, 2, 1, 2]
    w = np.array([[[[127]], [[-64]]], [[[127]], [[64]]]], np.int8)  # [2, 2, 1, 1]
    b = np.array([2032, -4064], np.int32)
    attrs = {"kernel_shape": [1, 1], "multiplier": [2**30, 2**30], "rshift": [36, 38]}
    out = run_int8("conv", [x, w, b], attrs, (1, 2, 1, 2))
    # channel 0 (2^30 / 2^36 = 1/64): 100*127 - 127*64 + 2032 = 6604 -> 103.2 -> 103;
    #            -128*127 - 3*64 + 2032 = -14416 -> -225.25 -> -128 (saturated).
    # channel 1 (1/256): 100*127 + 127*64 - 4064 = 16764 -> 65.48 -> 65;
    #            -128*127 + 3*64 - 4064 = -20128 -> -78.625 -> -79.
    assert out.tolist() == [[[[103, -128]], [[65, -79]]]]
    relu = run_int8("conv", [x, w, b], {**attrs, "do_relu": True}, (1, 2, 1, 2))
    assert relu.tolist() == [[[[103, 0]], [[65, 0]]]]


def test_conv_with_input_zero_point_pads_with_real_zero():
    # uint8 input with zero point 10: the padded border is real 0, i.e. code 10.
    x = np.full((1, 1, 2, 2), 12, np.uint8)  # every value is real 2 (in units of the scale)
    w = np.ones((1, 1, 3, 3), np.int8)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "multiplier": [1], "rshift": [0],
             "input_zero_points": [10]}
    out = run_int8("conv", [x, w, None], attrs, (1, 1, 2, 2), np.int8)
    assert out.tolist() == [[[[8, 8], [8, 8]]]]  # each output sees 4 inputs of 2


def test_add_mul_and_sub_rescale_with_zero_points():
    a = np.array([10, -20, 127], np.int8)
    b = np.array([40, 0, 255], np.uint8)
    attrs = {"multiplier": [2**30, 2**28], "rshift": [31], "input_zero_points": [0, 128], "output_zero_point": 5}
    # (a * 0.5 + (b - 128) * 0.125) + 5: 5 - 11 + 5 = -1, -10 - 16 + 5 = -21, 63.5 + 15.875 + 5 = 84.375
    assert run_int8("add", [a, b], attrs, (3,)).tolist() == [-1, -21, 84]
    sub = {**attrs, "multiplier": [2**30, -(2**28)]}
    assert run_int8("sub", [a, b], sub, (3,)).tolist() == [21, 11, 53]
    mul = {"multiplier": [2**30], "rshift": [35], "input_zero_points": [0, 128]}
    # a * (b - 128) / 32: -27.5 -> -28, 80 -> 80, 127*127/32 = 504 -> 127
    assert run_int8("mul", [a, b], mul, (3,)).tolist() == [-28, 80, 127]


def test_lut_indexes_by_the_input_byte():
    table = np.arange(256, dtype=np.int16).astype(np.uint8)[::-1].copy()  # entry i = 255 - i
    x = np.array([0, 1, -1, -128, 127], np.int8)
    # bytes 0, 1, 255, 128, 127
    assert run_int8("lut", [x, table], {}, (5,), np.uint8).tolist() == [255, 254, 0, 127, 128]


def test_pooling_and_concat():
    x = np.array([[[[-128, -100], [-90, -120]]]], np.int8)
    pad = {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    # padding is the smallest code: it never wins over real values
    out = run_int8("max_pool", [x], pad, (1, 1, 2, 2))
    assert out.tolist() == [[[[-128, -100], [-90, -120]]]]
    avg = {"kernel_shape": [2, 2], "multiplier": [2**30], "rshift": [32]}  # sum / 4
    assert run_int8("avg_pool", [x], avg, (1, 1, 1, 1)).tolist() == [[[[-110]]]]  # -438 / 4 = -109.5
    parts = [np.array([[100, -100]], np.int8), np.array([[7, 200]], np.uint8)]
    attrs = {"axis": 1, "multiplier": [2**30, 2**30], "rshift": [31, 30], "input_zero_points": [0, 100]}
    assert run_int8("concat", parts, attrs, (1, 4)).tolist() == [[50, -50, -93, 100]]


def test_cast_quantizes_and_dequantizes():
    x = np.array([0.3, -0.3, 0.25, -0.25, 100.0], np.float32)
    q = run_int8("cast", [x], {"scale": 0.1, "zero_point": 0}, (5,), np.int8)
    assert q.tolist() == [3, -3, 3, -3, 127]  # 2.5 rounds away from zero
    real = run_int8("cast", [np.array([3, 130], np.uint8)], {"scale": 0.5, "zero_point": 128}, (2,), np.float32)
    np.testing.assert_array_equal(real, [-62.5, 1.0])


# -- pattern families end to end ---------------------------------------------------------------


def init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array, np.float32), name)


def model_of(nodes, inputs, output: str | list[str], inits, opset: int = 17) -> onnx.ModelProto:
    outputs = [output] if isinstance(output, str) else output
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
        [onnx.ValueInfoProto(name=o) for o in outputs], initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def lowered(model: onnx.ModelProto, folder: Path, samples: int = 32, **lowering):
    """TOP module and its INT8 TPU lowering, calibrated (KL) on random normal samples."""
    result = import_onnx(model, "m")
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    mlir = folder / "m.mlir"
    save_module(result.module, mlir, dict(weights_of(result.module)))
    rng = np.random.default_rng(7)
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    data = folder / "samples"
    data.mkdir(exist_ok=True)
    for n in range(samples):
        np.savez(data / f"s{n:02d}.npz", **{k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()})
    table = calibrate(mlir, Dataset.from_dir(data, samples), Options(method="kl")).table
    tpu = result.module.clone()
    attach_weights(tpu, dict(weights_of(result.module)))
    import_calibration(tpu, table, "table")
    fallbacks = lower_top_to_tpu(tpu, "INT8", **lowering).fallbacks
    test_input = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    return result.module, tpu, test_input, fallbacks


class _Values(Interpreter.Listener):
    def __init__(self):
        self.values = {}

    def did_interpret_op(self, op, results):
        for result, value in zip(op.results, results):
            self.values[result] = value


def check_ops_against_top(top, tpu, feeds, max_codes: int) -> int:
    """Each INT8 op equals its TOP op on its dequantized inputs, requantized (+-max_codes);
    TOP ops fused into the op (absent from the TPU module) are computed on the way.
    Returns how many ops were checked."""
    top_ops = {tensor_names(o)[0]: o for o in top.walk() if o.name.startswith("top.") and tensor_names(o)}
    tpu_names = {n for o in tpu.walk() for n in tensor_names(o)}
    seen = _Values()
    weights = weights_of(tpu)
    ModuleRunner(tpu, weights).run(feeds, [seen])

    def reference_inputs(source, data):
        inputs = []
        for value in source.operands:
            owner = value.owner
            if owner.name == "top.weight":
                inputs.append(np.asarray(weights_of(top)[tensor_names(owner)[0]]))
            elif owner.name == "top.none":
                inputs.append(None)
            elif tensor_names(owner)[0] not in tpu_names:  # fused into the op being checked
                (fused,) = KERNELS[owner.name[4:]](reference_inputs(owner, data), op_attrs(owner), result_specs(owner))
                inputs.append(np.asarray(fused))
            else:
                tpu_value = next(data)
                inputs.append(qparams_of(tpu_value.type, weights).dequantize(seen.values[tpu_value]))
        return inputs

    checked = 0
    for op in tpu.walk():
        out = qparams_of(op.results[0].type, weights) if op.results else None
        if not op.name.startswith("tpu.") or op.name in ("tpu.cast", "tpu.requant") or out is None:
            continue
        name = tensor_names(op)[0]
        # An output's INT8 value has a derived name (NAME_int8); its cast back to f32 has NAME.
        source = top_ops[name if name in top_ops else name.rsplit("_", 1)[0]]
        data = iter(v for v in op.operands if is_quantized(v.type) and v.owner.name != "top.weight")
        inputs = reference_inputs(source, data)
        (expected,) = KERNELS[source.name[4:]](inputs, op_attrs(source), result_specs(source))
        codes = out.quantize(np.asarray(expected, np.float64)).astype(np.int64)
        got = np.asarray(seen.values[op.results[0]]).astype(np.int64)
        assert np.abs(codes - got).max() <= max_codes, f"{op.name} {tensor_names(op)}"
        checked += 1
    return checked


def end_to_end(top, tpu, feeds, min_cosine: float) -> dict[str, float]:
    """Cosine of every TPU tensor (dequantized) against TOP; all at least `min_cosine`."""
    reference, ours = TensorCapture(), TensorCapture()
    ModuleRunner(top, weights_of(top)).run(feeds, [reference])
    ModuleRunner(tpu, weights_of(tpu)).run(feeds, [ours])
    real = real_values(tpu, ours.tensors)
    cosines = {k: compare_tensors(k, reference.tensors[k], v).cosine for k, v in real.items() if k in reference.tensors}
    worst = min(cosines, key=cosines.get)
    assert cosines[worst] >= min_cosine, f"{worst}: cosine {cosines[worst]}"
    return cosines


RNG = np.random.default_rng(3)


def conv_block(activation: str | None):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    out = "c"
    if activation:
        nodes.append(helper.make_node(activation, ["c"], ["y"]))
        out = "y"
    inits = [init("w", RNG.standard_normal((8, 4, 3, 3)) * 0.3), init("b", RNG.standard_normal(8) * 0.1)]
    return model_of(nodes, [("x", [1, 4, 8, 8])], out, inits)


FAMILIES = {
    "conv": conv_block(None),
    "conv_relu": conv_block("Relu"),
    "conv_lut_sigmoid": conv_block("Sigmoid"),
    "conv_lut_hardswish": conv_block("HardSwish"),
    "depthwise_stride2": model_of(
        [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], group=4)],
        [("x", [1, 4, 8, 8])], "y", [init("w", RNG.standard_normal((4, 1, 3, 3)))],
    ),
    "deconv": model_of(
        [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
        [("x", [1, 4, 4, 4])], "y", [init("w", RNG.standard_normal((4, 3, 2, 2))), init("b", RNG.standard_normal(3))],
    ),
    "matmul_weight": model_of(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
        [("x", [2, 16])], "y", [init("w", RNG.standard_normal((16, 6))), init("b", RNG.standard_normal(6))],
    ),
    "matmul_activations": model_of(
        [helper.make_node("MatMul", ["x", "z"], ["y"])], [("x", [1, 3, 5, 8]), ("z", [1, 3, 8, 4])], "y", [],
    ),
    "add_mul_sub": model_of(
        [helper.make_node("Add", ["x", "z"], ["s"]), helper.make_node("Mul", ["s", "x"], ["p"]),
         helper.make_node("Sub", ["p", "z"], ["y"])],
        [("x", [1, 4, 6, 6]), ("z", [1, 4, 6, 6])], "y", [],
    ),
    "squeeze_excite": model_of(
        [helper.make_node("GlobalAveragePool", ["x"], ["g"]), helper.make_node("HardSigmoid", ["g"], ["h"]),
         helper.make_node("Mul", ["x", "h"], ["y"])],
        [("x", [1, 6, 5, 5])], "y", [],
    ),
    "scalar_constants_as_lut": model_of(
        [helper.make_node("Mul", ["x", "k"], ["m"]), helper.make_node("Add", ["m", "c"], ["y"])],
        [("x", [1, 4, 6, 6])], "y", [init("k", [0.75]), init("c", [0.5])],
    ),
    "concat_pool": model_of(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Concat", ["x", "r"], ["c"], axis=1),
         helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
         helper.make_node("AveragePool", ["p"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
        [("x", [1, 4, 8, 8])], "y", [],
    ),
    "data_movement": model_of(
        [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
         helper.make_node("Reshape", ["t", "shape"], ["r"]), helper.make_node("ReduceMean", ["r"], ["y"], axes=[1])],
        [("x", [1, 4, 6, 6])], "y", [numpy_helper.from_array(np.array([1, 36, 4], np.int64), "shape")], opset=13,
    ),
}


SCHEMES = {
    "channels": {},  # the default: symmetric, per-channel activation scales
    "per_tensor": {"per_tensor_activations": True},
    "asym": {"asymmetric": True},
}


@pytest.mark.parametrize("scheme", list(SCHEMES))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_int8_family_matches_top(family, scheme, tmp_path):
    top, tpu, feeds, fallbacks = lowered(FAMILIES[family], tmp_path, **SCHEMES[scheme])
    assert not fallbacks, fallbacks
    text = str(tpu)
    assert "ui8" in text if scheme == "asym" else "xi8" in text or "xui8" in text
    if scheme == "channels" and family not in ("matmul_activations", "data_movement"):
        assert "#tpu.channel_uniform" in text
    # weights quantized per channel make convs and matmuls differ by up to 2 codes
    assert check_ops_against_top(top, tpu, feeds, max_codes=2) >= 1
    end_to_end(top, tpu, feeds, min_cosine=0.99)


def test_softmax_falls_back_to_f32_between_casts(tmp_path):
    model = model_of(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Softmax", ["m"], ["s"], axis=-1),
         helper.make_node("MatMul", ["s", "v"], ["y"])],
        [("x", [2, 8])], "y", [init("w", RNG.standard_normal((8, 8))), init("v", RNG.standard_normal((8, 3)))],
    )
    top, tpu, feeds, fallbacks = lowered(model, tmp_path)
    reasons = [(f.name, f.op, f.mode, f.reason) for f in fallbacks]
    assert reasons == [("s", "top.softmax", "F32", "no INT8 implementation")]
    text = str(tpu)
    assert '"tpu.softmax"' in text and 'names = ["m_float32"]' in text and 'names = ["s_uint8"]' in text
    end_to_end(top, tpu, feeds, min_cosine=0.99)


def test_quantize_table_runs_one_op_in_f16(tmp_path):
    model = conv_block("Relu")
    table = tmp_path / "qtable"
    table.write_text("# op mode\ny F16\n")
    top, tpu, feeds, _fallbacks = lowered(model, tmp_path, qtable=str(table))
    conv = next(op for op in tpu.walk() if op.name == "tpu.conv")
    assert "f16" in str(conv.results[0].type)
    end_to_end(top, tpu, feeds, min_cosine=0.999)


def test_data_movement_between_float_ops_of_the_table_stays_float(tmp_path):
    """A detector head: boxes (0..300) and scores (0..1) from two convs the quantize table puts
    in F16, reshaped and concatenated. The reshapes and the concat are exact on INT8 codes,
    so the table never names them; in INT8 they would round both parts to one scale and the
    scores to a few codes. They move the F16 values instead (no cast to INT8 in between),
    and the output is what the all-F16 ops give."""
    model = model_of(
        [
            helper.make_node("Conv", ["x", "wb"], ["b"], kernel_shape=[1, 1]),
            helper.make_node("Mul", ["b", "k"], ["boxes"]),
            helper.make_node("Conv", ["x", "ws"], ["s"], kernel_shape=[1, 1]),
            helper.make_node("Sigmoid", ["s"], ["scores"]),
            helper.make_node("Reshape", ["boxes", "flat_b"], ["rb"]),
            helper.make_node("Reshape", ["scores", "flat_s"], ["rs"]),
            helper.make_node("Concat", ["rb", "rs"], ["y"], axis=1),
        ],
        [("x", [1, 4, 5, 5])],
        "y",
        [init("wb", RNG.standard_normal((4, 4, 1, 1))), init("k", [300.0]),
         init("ws", RNG.standard_normal((3, 4, 1, 1))),
         helper.make_tensor("flat_b", onnx.TensorProto.INT64, [3], [1, 4, 25]),
         helper.make_tensor("flat_s", onnx.TensorProto.INT64, [3], [1, 3, 25])],
    )
    table = tmp_path / "qtable"
    table.write_text("boxes F16\nscores F16\n")
    top, tpu, feeds, _ = lowered(model, tmp_path, qtable=str(table), per_tensor_activations=True)
    moved = {op.name: op for op in tpu.walk() if op.name in ("tpu.reshape", "tpu.concat")}
    assert set(moved) == {"tpu.reshape", "tpu.concat"}
    assert all("f16" in str(op.results[0].type) for op in moved.values()), [str(op) for op in moved.values()]
    requantized = [op for op in tpu.walk() if op.name == "tpu.cast" and is_quantized(op.results[0].type)
                   and "f16" in str(op.operands[0].type)]
    assert not requantized
    ours = ModuleRunner(tpu, weights_of(tpu)).run(feeds)["y"]
    want = ModuleRunner(top, weights_of(top)).run(feeds)["y"]
    assert compare_tensors("scores", want[:, 4:], ours[:, 4:]).cosine >= 0.999
    assert compare_tensors("y", want, ours).cosine >= 0.999


def test_a_bf16_model_moves_data_between_f32_ops_in_f32(tmp_path):
    """A BF16 model whose quantize table puts two ops in F32 (what search-qtable --mode BF16
    writes): the reshape between them, and the reshape of the model's input the first one
    reads, move F32 values. In bf16 they rounded what both ops keep in F32, and a search
    with every op in F32 could not reach the all-F32 output (magika: 0.99970, not 1)."""
    model = model_of(
        [
            helper.make_node("Reshape", ["x", "flat"], ["r0"]),
            helper.make_node("Mul", ["r0", "k"], ["a"]),
            helper.make_node("Reshape", ["a", "cube"], ["r"]),
            helper.make_node("Mul", ["r", "g"], ["y"]),
        ],
        [("x", [2, 3, 4])],
        "y",
        [init("k", [1.0 + 2.0 ** -12]), init("g", RNG.standard_normal((1, 3, 4)) + 3.0),
         helper.make_tensor("flat", onnx.TensorProto.INT64, [2], [2, 12]),
         helper.make_tensor("cube", onnx.TensorProto.INT64, [3], [2, 3, 4])],
    )
    result = import_onnx(model, "m")
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    tpu = result.module.clone()
    attach_weights(tpu, dict(weights_of(result.module)))
    lower_top_to_tpu(tpu, "BF16", qtable={"a": "F32", "y": "F32"})
    moved = [str(op.results[0].type) for op in tpu.walk() if op.name == "tpu.reshape"]
    assert len(moved) == 2 and all("xf32>" in t for t in moved), moved
    assert not [op for op in tpu.walk() if op.name == "tpu.cast" and "bf16" in str(op.results[0].type)]
    feeds = {"x": RNG.standard_normal((2, 3, 4)).astype(np.float32)}
    ours = ModuleRunner(tpu, weights_of(tpu)).run(feeds)["y"]
    want = ModuleRunner(result.module, weights_of(result.module)).run(feeds)["y"]
    np.testing.assert_array_equal(ours, want)  # every op in F32: the F32 model's output, bit for bit


def test_a_float_result_read_by_an_int8_op_is_quantized_per_channel(tmp_path):
    """Mixed precision: the quantize table puts a conv whose two output channels differ
    100x in range in F16; the INT8 conv reading it quantizes it per channel, as an INT8
    producer would have given it. One scale for the tensor (the KL threshold of the large
    channel) would leave the small channel a few codes, and the output that reads it
    would be noise."""
    w1 = RNG.standard_normal((2, 4, 1, 1)) * np.array([40.0, 0.4]).reshape(2, 1, 1, 1)
    model = model_of(
        [
            helper.make_node("Conv", ["x", "w1"], ["a"], kernel_shape=[1, 1]),
            helper.make_node("Conv", ["a", "w2"], ["y"], kernel_shape=[1, 1]),
        ],
        [("x", [1, 4, 5, 5])],
        "y",
        [init("w1", w1), init("w2", np.array([[1.0, 0.0], [0.0, 100.0]]).reshape(2, 2, 1, 1))],
    )
    table = tmp_path / "qtable"
    table.write_text("a F16\n")
    top, tpu, feeds, _ = lowered(model, tmp_path, qtable=str(table))
    (cast,) = [op for op in tpu.walk() if op.name == "tpu.cast" and is_quantized(op.results[0].type)
               and "f16" in str(op.operands[0].type)]
    scales = qparams_of(cast.results[0].type, weights_of(tpu)).scales
    assert scales.shape == (2,) and scales[0] > 50 * scales[1]
    ours = ModuleRunner(tpu, weights_of(tpu)).run(feeds)["y"]
    want = ModuleRunner(top, weights_of(top)).run(feeds)["y"]
    assert compare_tensors("y", want[:, 1], ours[:, 1]).cosine >= 0.999


def test_quant_input_and_output_keep_int8_at_the_boundary(tmp_path):
    _top, tpu, feeds, _ = lowered(conv_block("Relu"), tmp_path, quant_input=True, quant_output=True)
    main = next(op for op in tpu.walk() if op.name == "func.func")
    signature = str(main.function_type)
    assert "xi8" in signature and "xui8" in signature, signature
    # float test data is quantized by the runner as the chip's runtime would
    out = ModuleRunner(tpu, weights_of(tpu)).run(feeds)
    (value,) = out.values()
    assert value.dtype == np.uint8


def test_a_chain_of_one_tensor_functions_is_one_table(tmp_path):
    """HardSwish, then a learnable scale and bias (PP-LCNet's affine block): one table of
    the composed function, whose inner results are never quantized."""
    inits = [init("w", RNG.standard_normal((4, 4, 1, 1))), init("k", [0.5]), init("c", [0.25])]
    model = model_of(
        [
            helper.make_node("Conv", ["x", "w"], ["c0"], kernel_shape=[1, 1]),
            helper.make_node("HardSwish", ["c0"], ["h"]),
            helper.make_node("Mul", ["h", "k"], ["m"]),
            helper.make_node("Add", ["m", "c"], ["y"]),
        ],
        [("x", [1, 4, 4, 4])],
        "y",
        inits,
    )
    top, tpu, feeds, _ = lowered(model, tmp_path, per_tensor_activations=True)
    luts = [op for op in tpu.walk() if op.name == "tpu.lut"]
    assert [tensor_names(op) for op in luts] == [["y_uint8"]]  # the output y is its cast to f32
    assert not {"h", "m"} & {n for op in tpu.walk() for n in tensor_names(op)}
    conv, (lut,) = next(op for op in tpu.walk() if op.name == "tpu.conv"), luts
    si = qparams_of(conv.results[0].type)
    so = qparams_of(lut.results[0].type)
    codes = np.arange(256, dtype=np.uint8).view(si.dtype).astype(np.float64)
    x = codes * si.scale
    hard_swish = x * np.clip(x + 3, 0, 6) / 6
    expected = np.clip(np.sign(hard_swish * 0.5 + 0.25) * np.floor(np.abs((hard_swish * 0.5 + 0.25) / so.scale) + 0.5),
                       np.iinfo(so.dtype).min, np.iinfo(so.dtype).max)
    table = np.asarray(weights_of(tpu)[tensor_names(lut.operands[1].owner)[0]]).astype(np.int64)
    assert np.abs(table - expected).max() <= 1  # f32 evaluation may land across a rounding edge
    assert np.mean(table == expected) > 0.98
    end_to_end(top, tpu, feeds, min_cosine=0.99)


@pytest.mark.parametrize("mask_value", [-1e4, -np.inf, float(np.finfo(np.float32).min)])
def test_an_attention_mask_add_runs_in_float_instead_of_losing_the_scores(mask_value, tmp_path):
    """softmax(q k^T + mask) v with a causal mask as exporters write it (a hand-written -1e4;
    TorchScript's -inf; the dynamo exporter's -FLT_MAX): the sum's INT8 scale is set by the
    mask, one step of it is larger than every score, so in INT8 the scores round to zero (the
    softmax sees the mask alone) or, for -inf, no scale exists at all. The add runs in float,
    said with the reason, and the output stays close to onnxruntime's."""
    t, d = 8, 16
    mask = np.triu(np.full((t, t), mask_value, np.float32), 1)
    model = model_of(
        [helper.make_node("MatMul", ["q", "wk"], ["k"]), helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
         helper.make_node("MatMul", ["q", "kt"], ["scores"]), helper.make_node("Add", ["scores", "mask"], ["masked"]),
         helper.make_node("Softmax", ["masked"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "q"], ["y"])],
        [("q", [1, t, d])], "y", [init("wk", np.random.default_rng(3).standard_normal((d, d)) * 0.3),
                                  init("mask", mask)],
    )
    _, tpu, feeds, fallbacks = lowered(model, tmp_path)
    (add,) = [f for f in fallbacks if f.op == "top.add"]
    reason = "holds infinities or NaNs" if np.isinf(mask_value) else "is below one step of the sum's INT8 codes"
    assert add.name == "masked" and reason in add.reason, add
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, feeds)
    actual = real_values(tpu, ModuleRunner(tpu, weights_of(tpu)).run(feeds))["y"]
    assert compare_tensors("y", expected, actual).cosine >= 0.99
