"""`tpu-xdsl export N.mlir --to tosa`: a TOP module as TOSA that IREE compiles and runs, checked
against onnxruntime (the model's own runtime) and the TOP interpreter; bad input is one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from tests.test_cli_transform import assert_user_error, small_cnn, tpu_xdsl


def _transform(tmp_path: Path, **kwargs) -> Path:
    model = small_cnn(tmp_path / "m.onnx", **kwargs)
    done = tpu_xdsl("transform", "--model-def", str(model), "--model-name", "small", "--input-shapes", "[[1,3,8,8]]",
                    "-o", str(tmp_path / "small.mlir"))
    assert done.returncode == 0, done.stderr
    return tmp_path / "small.mlir"


def test_export_runs_in_iree_as_onnxruntime_runs_the_model(tmp_path):
    mlir = _transform(tmp_path)
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "x.npz", image=x)
    done = tpu_xdsl("export", str(mlir), "--to", "tosa", "-o", str(tmp_path / "small.tosa.mlir"),
                    "--check", str(tmp_path / "x.npz"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "TOSA F32 (IREE) vs TOP" in done.stdout and "all pass" in done.stdout
    text = (tmp_path / "small.tosa.mlir").read_text()
    assert 'module.state = "TOSA_F32"' in text and '{tpu.name = "image"}' in text and '{tpu.name = "prob"}' in text
    assert "top." not in text.replace("module.", "")
    done = tpu_xdsl("run", str(tmp_path / "small.tosa.mlir"), "--input", str(tmp_path / "x.npz"),
                    "--output", str(tmp_path / "y.npz"))
    assert done.returncode == 0, done.stderr
    (expected,) = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"image": x})
    with np.load(tmp_path / "y.npz") as y:
        got = y["prob"]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_check_fails_with_exit_1_when_an_output_is_off(tmp_path):
    """The check can fail: the export of a model whose conv weights are doubled, run against the
    original TOP module, is outside the tolerance (exit 1, as every failed compare)."""
    mlir = _transform(tmp_path)
    np.savez(tmp_path / "x.npz", image=np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32))
    other = tmp_path / "other"
    other.mkdir()
    mlir2 = _transform(other)
    weights = dict(np.load(other / "small_weights.npz"))
    name = next(k for k, v in weights.items() if v.ndim == 4)
    weights[name] = weights[name] * 2
    np.savez(other / "small_weights.npz", **weights)
    done = tpu_xdsl("export", str(mlir2), "--to", "tosa", "-o", str(other / "small.tosa.mlir"))
    assert done.returncode == 0, done.stderr
    done = tpu_xdsl("compare", str(mlir), str(other / "small.tosa.mlir"), "--input", str(tmp_path / "x.npz"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL" in done.stdout


def test_ops_without_a_tosa_form_are_all_named_in_one_line(tmp_path):
    """TopK and GridSample have no TOSA form (docs/tosa.md says why); the error names every
    such op of the module at once and writes nothing."""
    from tpu_xdsl.export.convert_top_to_tosa import unsupported_ops
    from tpu_xdsl.ir_io import read_module

    model = small_cnn(tmp_path / "m.onnx", opset=16, dynamic_batch=False)
    graph = onnx.load(model)
    k = onnx.numpy_helper.from_array(np.array([2], np.int64), "k")
    grid = onnx.numpy_helper.from_array(np.zeros((1, 4, 4, 2), np.float32), "grid")
    graph.graph.initializer.extend([k, grid])
    graph.graph.node.extend([helper.make_node("TopK", ["prob", "k"], ["top", "index"]),
                             helper.make_node("GridSample", ["image", "grid"], ["sampled"])])
    graph.graph.output.extend([helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None)
                               for n in ("top", "sampled")])
    onnx.save(graph, model)
    done = tpu_xdsl("transform", "--model-def", str(model), "--model-name", "small", "-o", str(tmp_path / "s.mlir"))
    assert done.returncode == 0, done.stderr
    missing = unsupported_ops(read_module(tmp_path / "s.mlir"))
    assert missing, "TopK and GridSample export now: pick ops that do not"
    out = tmp_path / "s.tosa.mlir"
    done = tpu_xdsl("export", str(tmp_path / "s.mlir"), "--to", "tosa", "-o", str(out))
    assert_user_error(done, "cannot export to TOSA", *missing)
    assert not out.exists()


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    mlir = _transform(tmp_path)
    out = tmp_path / "small.tosa.mlir"
    assert_user_error(tpu_xdsl("export", str(mlir), "--to", "tosa", "-o", str(mlir)), "would destroy that input")
    assert_user_error(tpu_xdsl("export", str(tmp_path / "missing.mlir"), "--to", "tosa", "-o", str(out)),
                      "missing.mlir")
    assert_user_error(tpu_xdsl("export", str(mlir), "--to", "tosa", "-o", str(tmp_path / "x.txt")),
                      "give a .tosa.mlir file name")
    assert_user_error(tpu_xdsl("export", str(mlir), "--to", "linalg", "-o", str(out)), "--to")
    assert not out.exists()


def test_deploy_export_tosa_int8_half_up_equals_the_interpreter_bit_for_bit(tmp_path):
    """deploy --round-mode half_up --export-tosa: the TPU module's TOSA form, run by IREE, gives
    the TPU interpreter's INT8 final outputs exactly; the .tosa.mlir sits beside the outputs.
    (conv -> relu -> flatten -> matmul: every op INT8, the output a dequantized code.)"""
    from tests.test_cli_int8_errors import calibrated_top, int8_head_model

    top = calibrated_top(tmp_path, int8_head_model(tmp_path / "m.onnx"), "m")
    done = tpu_xdsl("deploy", str(top.mlir), "--quantize", "INT8", "--calibration-table", str(top.table),
                    "--round-mode", "half_up", "--export-tosa", "--test-input", str(top.x),
                    "--test-reference", str(top.reference), "--tolerance", "0.5,-1", "-o", str(tmp_path / "q.tpumodel"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert "TPU interpreter INT8 (reference) vs TOSA (IREE)" in done.stdout
    assert "INT8 rounding half up: 1 of 1 INT8 outputs equal bit for bit" in done.stdout
    text = (tmp_path / "q.tosa.mlir").read_text()
    assert 'module.state = "TOSA_INT8"' in text and '"tosa.rescale"' in text and '"tosa.conv2d"' in text


def test_deploy_export_tosa_f16(tmp_path):
    from tests.test_cli_int8_errors import calibrated_top

    top = calibrated_top(tmp_path, small_cnn(tmp_path / "m.onnx", dynamic_batch=False), "m")
    done = tpu_xdsl("deploy", str(top.mlir), "--quantize", "F16", "--export-tosa", "--test-input", str(top.x),
                    "--test-reference", str(top.reference), "-o", str(tmp_path / "h.mlir"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert "TPU interpreter F16 (reference) vs TOSA (IREE)" in done.stdout and "all pass" in done.stdout
    assert 'module.state = "TOSA_F16"' in (tmp_path / "h.tosa.mlir").read_text()


def test_deploy_export_tosa_never_overwrites_an_input(tmp_path):
    """The derived h.tosa.mlir is an output like the others: it cannot be the TOP module."""
    from tests.test_cli_int8_errors import calibrated_top

    top = calibrated_top(tmp_path, small_cnn(tmp_path / "m.onnx", dynamic_batch=False), "m")
    before = top.mlir.read_bytes()
    tosa_named = tmp_path / "t.tosa.mlir"
    tosa_named.write_bytes(before)
    done = tpu_xdsl("deploy", str(tosa_named), "--quantize", "F16", "--export-tosa", "-o", str(tmp_path / "t.mlir"))
    assert_user_error(done, "t.tosa.mlir")
    assert tosa_named.read_bytes() == before and not (tmp_path / "t.mlir").exists()


def test_export_of_what_deploy_wrote_for_the_device_in_bf16(tmp_path):
    """The N_bf16.mlir deploy writes beside a .tpumodel, as a user finds it: layer groups
    inside, bfloat16 weights in its .npz as raw 2-byte records. export reads both and the
    TOSA form, run by IREE, matches the TPU interpreter."""
    from tests.test_cli_int8_errors import calibrated_top

    top = calibrated_top(tmp_path, small_cnn(tmp_path / "m.onnx", dynamic_batch=False), "m")
    done = tpu_xdsl("deploy", str(top.mlir), "--quantize", "BF16", "-o", str(tmp_path / "m_bf16.tpumodel"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    tpu = tmp_path / "m_bf16.mlir"
    assert '"tpu.group"' in tpu.read_text()
    with np.load(tmp_path / "m_bf16_weights.npz") as weights:
        assert any(array.dtype.kind == "V" for array in weights.values())
    done = tpu_xdsl("export", str(tpu), "--to", "tosa", "-o", str(tmp_path / "m_bf16.tosa.mlir"),
                    "--check", str(top.x))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert "all pass" in done.stdout
    assert 'module.state = "TOSA_BF16"' in (tmp_path / "m_bf16.tosa.mlir").read_text()
