"""Networks trained in the test run (tests/models/trained.py), exported by torch at
several opsets with its TorchScript and dynamo exporters, through transform, F16 and
INT8 deploy to `.tpumodel` and a device run over 64 held-out digits: compared with
onnxruntime on the logits and with the labels."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from tests.models.trained import BATCH, trained
from tests.test_cli_transform import tpu_xdsl
from tpu_xdsl.interp.compare import compare_tensors

# (network, opset, exporter): one of each network and exporter in the default run, the other
# opsets in the slow one. The dynamo exporter writes LayerNormalization and Gelu as ops (opset
# 20), Gemm for linear layers and its own reshape chains. torch's TorchScript exporter writes
# the transformer's scaled_dot_product_attention from opset 14 on (it refuses 13).
SLOW = pytest.mark.slow
EXPORTS = [
    ("cnn", 11, "torchscript"), ("transformer", 17, "torchscript"), ("crnn", 12, "torchscript"),
    ("transformer", 20, "dynamo"),
    pytest.param("cnn", 9, "torchscript", marks=SLOW), pytest.param("cnn", 13, "torchscript", marks=SLOW),
    pytest.param("cnn", 17, "torchscript", marks=SLOW), pytest.param("transformer", 14, "torchscript", marks=SLOW),
    pytest.param("transformer", 15, "torchscript", marks=SLOW), pytest.param("crnn", 15, "torchscript", marks=SLOW),
    pytest.param("crnn", 17, "torchscript", marks=SLOW),
    pytest.param("cnn", 18, "dynamo", marks=SLOW), pytest.param("crnn", 18, "dynamo", marks=SLOW),
    pytest.param("transformer", 18, "dynamo", marks=SLOW), pytest.param("crnn", 20, "dynamo", marks=SLOW),
]


def _run(tpumodel, x_path, out_path) -> np.ndarray:
    r = tpu_xdsl("run", str(tpumodel), "--input", str(x_path), "--output", str(out_path))
    assert r.returncode == 0, r.stderr
    with np.load(out_path) as out:
        assert out.files == ["logits"], "the device's output keeps its ONNX name"
        return out["logits"]


@pytest.mark.parametrize(("net", "opset", "exporter"), EXPORTS)
def test_trained_net_on_the_device(net, opset, exporter, tmp_path):
    model = trained(net)
    onnx_path = tmp_path / f"{net}_op{opset}.onnx"
    model.export(onnx_path, opset, exporter=exporter)
    x, labels = model.test_x[:BATCH], model.test_y[:BATCH]
    np.savez(tmp_path / "x.npz", image=x)
    (expected,) = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"]).run(None, {"image": x})
    float_accuracy = model.accuracy(expected, labels)
    assert float_accuracy >= 0.85, f"{net} trained badly ({float_accuracy:.2f}): the test says nothing"

    r = tpu_xdsl("transform", "--model-def", str(onnx_path), "--model-name", net, "--test-input",
                 str(tmp_path / "x.npz"), "--test-result", str(tmp_path / "top.npz"), "-o", str(tmp_path / "m.mlir"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr

    r = tpu_xdsl("deploy", str(tmp_path / "m.mlir"), "--quantize", "F16", "--test-input", str(tmp_path / "x.npz"),
                 "--test-reference", str(tmp_path / "top.npz"), "-o", str(tmp_path / "m_f16.tpumodel"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    f16 = _run(tmp_path / "m_f16.tpumodel", tmp_path / "x.npz", tmp_path / "f16.npz")
    assert compare_tensors("logits", expected, f16).cosine >= 0.999
    assert np.mean(np.argmax(f16, -1) == np.argmax(expected, -1)) >= 0.99

    samples = tmp_path / "calibration"
    samples.mkdir()
    for i in range(4):  # held-out digits are not calibration data
        np.savez(samples / f"s{i}.npz", image=model.train_x[i * BATCH:(i + 1) * BATCH])
    r = tpu_xdsl("calibrate", str(tmp_path / "m.mlir"), "--dataset", str(samples), "--input-num", "4",
                 "-o", str(tmp_path / "cali_table"))
    assert r.returncode == 0, r.stderr
    r = tpu_xdsl("deploy", str(tmp_path / "m.mlir"), "--quantize", "INT8", "--calibration-table",
                 str(tmp_path / "cali_table"), "--test-input", str(tmp_path / "x.npz"),
                 "--test-reference", str(tmp_path / "top.npz"), "-o", str(tmp_path / "m_int8.tpumodel"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    int8 = _run(tmp_path / "m_int8.tpumodel", tmp_path / "x.npz", tmp_path / "int8.npz")
    assert compare_tensors("logits", expected, int8).cosine >= 0.98
    assert np.mean(np.argmax(int8, -1) == np.argmax(expected, -1)) >= 0.95
    assert model.accuracy(int8, labels) >= float_accuracy - 0.03
