"""LSTM and GRU on the device: compiled to programs that split the layer over the lanes by
hidden unit (weights resident, or streamed from DDR per step when they do not fit), run on
the device model, and compared with the TPU interpreter bit for bit on every stored tensor,
and with onnxruntime on the ONNX graph (built with onnx.helper).

Regressions (issue 14): every LSTM whose weights did not fit one lane failed to compile
("does not fit local memory ... even in the smallest slices"), and an LSTM whose Y_h/Y_c
were unused crashed deploy in the layer-group planner.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tests.test_int8 import lowered
from tpu_xdsl.backend.codegen import CodegenError, codegen
from tpu_xdsl.backend.recurrent import RecurrentShape, plan_recurrent
from tpu_xdsl.device.chip import chip_config
from tpu_xdsl.device.isa import DmaLoad
from tpu_xdsl.device.runtime import run_model
from tpu_xdsl.dialects.module import input_names
from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.interp.compare import compare_tensors
from tpu_xdsl.interp.runner import ModuleRunner, TensorCapture
from tpu_xdsl.tools.tpu_xdsl import main
from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.transforms.tpu_assign_memory import assign_memory
from tpu_xdsl.transforms.tpu_layer_group import layer_group
from tpu_xdsl.weights import attach_weights, weights_of

GATES = {"LSTM": 4, "GRU": 3}


def recurrent_model(
    op: str,
    hidden: int,
    *,
    input_size: int = 24,
    seq: int = 3,
    batch: int = 1,
    direction: str = "forward",
    outputs: tuple[str, ...] = ("Y", "Y_h", "Y_c"),
    initial: bool = False,
    layout: int = 0,
    seed: int = 0,
    **attrs,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One ONNX LSTM/GRU node (weights scaled as a trained layer's, 1/sqrt(hidden)), and a
    test input. `outputs`: the node's output names, "" for an unused one."""
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    gates = GATES[op]
    scale = 1 / np.sqrt(hidden)

    def init(name, shape):
        return numpy_helper.from_array((rng.uniform(-1, 1, shape) * scale).astype(np.float32), name)

    inits = [init("W", [dirs, gates * hidden, input_size]), init("R", [dirs, gates * hidden, hidden]),
             init("B", [dirs, 2 * gates * hidden])]
    x_shape = [batch, seq, input_size] if layout else [seq, batch, input_size]
    state_shape = [batch, dirs, hidden] if layout else [dirs, batch, hidden]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    node_inputs = ["x", "W", "R", "B"]
    if initial:
        node_inputs += ["", "h0"] + (["c0"] if op == "LSTM" else [])
        for name in node_inputs[5:]:
            inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, state_shape))
            feeds[name] = (rng.standard_normal(state_shape) * 0.5).astype(np.float32)
    names = list(outputs[: 3 if op == "LSTM" else 2])
    node = helper.make_node(op, node_inputs, names, hidden_size=hidden, direction=direction, layout=layout, **attrs)
    graph_outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names if n]
    graph = helper.make_graph([node], "rnn", inputs, graph_outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), feeds


def tpu_module(model: onnx.ModelProto, mode: str, chip: str, folder: Path):
    if mode == "INT8":  # calibrated; the recurrent layer falls back to the chip's float mode
        _, tpu, _, _ = lowered(model, folder, samples=4, chip_name=chip)
        return tpu
    result = import_onnx(model, "m")
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    lower_top_to_tpu(result.module, mode, chip)
    return result.module


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.kind == "f" or a.dtype.name == "bfloat16" else a


def device_equals_interpreter(tpu, feeds, groups: bool = True):
    """Compile `tpu` (with layer groups, as deploy does), run it on the device model, and
    check every tensor it stores equals the TPU interpreter's bit for bit; returns the
    compiled model and the device's outputs."""
    capture = TensorCapture()
    outputs = ModuleRunner(tpu, weights_of(tpu)).run(feeds, [capture])
    reference = {**capture.tensors, **outputs}
    if groups:
        layer_group(tpu)
    assign_memory(tpu)
    model = codegen(tpu)
    result = run_model(model, feeds, dump_all=True)
    device = {**result.tensors, **result.outputs}
    checked = 0
    for name, expected in reference.items():
        if name in set(input_names(tpu)) or name not in device:
            continue
        got = device[name]
        assert got.shape == expected.shape and got.dtype == expected.dtype, name
        differ = int(np.sum(bits(got) != bits(expected)))
        assert differ == 0, f"{name}: {differ} of {got.size} elements differ from the interpreter"
        checked += 1
    assert set(result.outputs) == set(outputs)
    assert checked >= len(outputs)
    return model, result.outputs


def onnxruntime_outputs(model: onnx.ModelProto, feeds) -> dict[str, np.ndarray]:
    """onnxruntime's outputs; ONNX's reference evaluator for layout 1 (batch first), which
    onnxruntime's CPU RNNs refuse."""
    names = [o.name for o in model.graph.output]
    if any(a.name == "layout" and a.i == 1 for n in model.graph.node for a in n.attribute):
        return dict(zip(names, ReferenceEvaluator(model).run(names, feeds), strict=True))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(names, session.run(names, feeds), strict=True))


def matches_onnxruntime(model, feeds, device_outputs, min_cosine: float) -> None:
    expected = onnxruntime_outputs(model, feeds)
    for name, want in expected.items():
        got = next(v for k, v in device_outputs.items() if k == name or k.startswith(f"{name}_"))
        got = np.asarray(got, np.float32)
        assert got.shape == want.shape, name
        cosine = compare_tensors(name, want, got).cosine
        assert cosine >= min_cosine, f"{name}: cosine {cosine} against onnxruntime"


# -- the matrix -----------------------------------------------------------------------------------

MODES = {"bm1684x": ["F32", "F16", "BF16", "INT8"], "cv183x": ["BF16", "INT8"]}
COSINE = {"F32": 0.99999, "F16": 0.999, "BF16": 0.99, "INT8": 0.99}
CASES = [
    # op, hidden, direction, outputs, initial states, extra attributes
    ("LSTM", 96, "forward", ("Y", "Y_h", "Y_c"), False, {}),
    ("LSTM", 128, "bidirectional", ("Y", "", ""), True, {}),
    ("LSTM", 80, "reverse", ("", "Y_h", "Y_c"), True, {"layout": 1}),
    ("GRU", 96, "bidirectional", ("Y", "Y_h"), True, {}),
    ("GRU", 72, "reverse", ("", "Y_h"), False, {"linear_before_reset": 1}),
]


@pytest.mark.parametrize("chip,mode", [(c, m) for c, modes in MODES.items() for m in modes])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{c[1]}-{c[2]}-{'+'.join(o or '_' for o in c[3])}")
def test_recurrent_layer_on_device_equals_interpreter(case, chip, mode, tmp_path):
    op, hidden, direction, outputs, initial, attrs = case
    layout = attrs.pop("layout", 0) if "layout" in attrs else 0
    model, feeds = recurrent_model(op, hidden, direction=direction, outputs=outputs, initial=initial, layout=layout,
                                   batch=2, **attrs)
    tpu = tpu_module(model, mode, chip, tmp_path)
    _, device = device_equals_interpreter(tpu, feeds)
    matches_onnxruntime(model, feeds, device, COSINE[mode])


@pytest.mark.parametrize("op,chip,mode,r_resident", [
    # R is kept when it fits alone (F16's 128 KiB per lane, a GRU's 192 KiB of F32 on
    # bm1684x); an F32 LSTM's 256 KiB per lane and anything on cv183x are streamed per step.
    ("LSTM", "bm1684x", "F32", False), ("LSTM", "bm1684x", "F16", True), ("LSTM", "cv183x", "BF16", False),
    ("GRU", "bm1684x", "F32", True), ("GRU", "cv183x", "BF16", False),
])
def test_weights_too_large_for_lane_memory_stream_per_step(op, chip, mode, r_resident, tmp_path):
    """Hidden and input 1024: W and R (8 or 16 MiB each) cannot stay in lane memory; they are
    streamed from DDR in blocks of units, W once, R once per step, and the DMA counts it."""
    seq = 2
    model, feeds = recurrent_model(op, 1024, input_size=1024, seq=seq, outputs=("Y", "Y_h", "Y_c")[: GATES[op] - 1])
    tpu = tpu_module(model, mode, chip, tmp_path)
    compiled, device = device_equals_interpreter(tpu, feeds, groups=False)
    matches_onnxruntime(model, feeds, device, COSINE[mode])
    dtype = "float32" if mode == "F32" else "float16" if mode == "F16" else "bfloat16"
    passes = ((0, 4),) if op == "LSTM" else ((0, 2), (2, 1))
    plan = plan_recurrent(chip_config(chip), RecurrentShape(GATES[op], 1024, 1024, 1, seq, dtype, dtype, passes))
    assert not plan.w_resident and plan.r_resident == r_resident
    matrix_bytes = GATES[op] * 1024 * 1024 * (4 if mode == "F32" else 2)
    loaded = sum(i.dst.nbytes for i in compiled.instructions if isinstance(i, DmaLoad))
    assert loaded >= matrix_bytes * (1 + (1 if plan.r_resident else seq))


def test_split_keeps_weights_resident_when_they_fit_and_streams_otherwise():
    chip = chip_config("bm1684x")

    def shape(hidden, dtype):
        return RecurrentShape(4, hidden, hidden, 1, 16, dtype, dtype, ((0, 4),))

    small = plan_recurrent(chip, shape(128, "float32"))
    assert small.w_resident and small.r_resident and small.steps == 16
    # 4*512 rows of 512 f32 values = 4 MiB of W and R: 64 KiB per lane each, still resident
    assert plan_recurrent(chip, shape(512, "float32")).r_resident
    large = plan_recurrent(chip, shape(1024, "float32"))  # 16 MiB each: 256 KiB per lane
    assert not large.w_resident and large.units % chip.npu_num == 0 and large.lane_bytes <= chip.lmem_bytes


def test_layer_too_large_even_streamed_is_a_one_line_error(tmp_path):
    """cv183x's 32 KiB lanes cannot hold one block of 32 units of a hidden-1024 LSTM over
    2048 inputs at batch 8 (W and R rows alone take 24 KiB): an error naming the layer and
    what to change, not a crash."""
    model, _ = recurrent_model("LSTM", 1024, input_size=2048, seq=1, batch=8, outputs=("Y", "", ""))
    tpu = tpu_module(model, "BF16", "cv183x", tmp_path)
    assign_memory(tpu)
    with pytest.raises(CodegenError, match=r"'tpu.lstm' \(Y.*batch 8.*smaller batch"):
        codegen(tpu)


def test_silero_sized_lstm_compiles_in_every_mode(tmp_path):
    """The failure as reported: hidden 128, input 128, initial states given (silero VAD's
    decoder), 'does not fit local memory ... even in the smallest slices' in F32."""
    model, feeds = recurrent_model("LSTM", 128, input_size=128, seq=4, initial=True)
    for chip, modes in MODES.items():
        for mode in modes:
            tpu = tpu_module(model, mode, chip, tmp_path)
            _, device = device_equals_interpreter(tpu, feeds)
            matches_onnxruntime(model, feeds, device, COSINE[mode])


def test_deploy_lstm_with_unused_state_outputs(tmp_path, capsys):
    """deploy of an LSTM whose Y_h and Y_c are unused crashed (AssertionError in
    group_plan.value_shape, and without layer groups a DDR address asked of a none result);
    now it writes the device model and checks it against the interpreter."""
    model, feeds = recurrent_model("LSTM", 64, seq=5, outputs=("Y", "", ""))
    onnx.save(model, tmp_path / "lstm.onnx")
    np.savez(tmp_path / "in.npz", **feeds)
    code = main(["transform", "--model-def", str(tmp_path / "lstm.onnx"), "--model-name", "lstm",
                 "--test-input", str(tmp_path / "in.npz"), "--test-result", str(tmp_path / "top.npz"),
                 "-o", str(tmp_path / "lstm.mlir")])
    assert code == 0, capsys.readouterr().err
    for layer_groups in ([], ["--disable-layer-group"]):
        out = tmp_path / f"lstm_f16_{len(layer_groups)}.tpumodel"
        code = main(["deploy", str(tmp_path / "lstm.mlir"), "--quantize", "F16", "--test-input",
                     str(tmp_path / "in.npz"), "--test-reference", str(tmp_path / "top.npz"), *layer_groups,
                     "-o", str(out)])
        assert code == 0, capsys.readouterr().err
        assert out.is_file()
