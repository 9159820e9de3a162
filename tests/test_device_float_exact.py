"""The device model equals the TPU interpreter bit for bit in the float modes, with
layer groups slicing tensors along H, on a small SiLU-heavy detector-style net.

The device runs a grouped conv one slice (a few output rows) at a time, the
interpreter on the whole tensor. A float32 BLAS GEMM orders its sums by the shape of
the call (blocking, edge kernels), so the two rounded differently (a YOLOv8n in BF16:
every stored tensor differed, 30 below cosine 0.99999, and deploy exited 1). The
subprocesses pin OpenBLAS to its Haswell kernels, as the project's machines do, where
the shape dependence shows on every conv; the kernels must not depend on it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

SIZE = 128  # enough rows that the groups run in several steps on both chips


def detector(path: Path) -> Path:
    """conv+SiLU stem, a residual conv+SiLU, a stride-2 conv+SiLU upsampled back and
    concatenated with the residual, a 1x1 conv+SiLU, and two heads (boxes, scores)."""
    rng = np.random.default_rng(0)
    inits: list[onnx.TensorProto] = []

    def conv(name: str, x: str, cin: int, cout: int, k: int, stride: int = 1, silu: bool = True) -> list:
        w = rng.standard_normal((cout, cin, k, k)).astype(np.float32) * np.float32(1.5 / np.sqrt(cin * k * k))
        b = rng.standard_normal(cout).astype(np.float32) * np.float32(0.2)
        inits.extend([numpy_helper.from_array(w, f"{name}.w"), numpy_helper.from_array(b, f"{name}.b")])
        out = f"{name}.conv" if silu else name
        nodes = [helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [out], kernel_shape=[k, k],
                                  strides=[stride, stride], pads=[k // 2] * 4)]
        if silu:  # as PyTorch exports SiLU
            nodes += [helper.make_node("Sigmoid", [out], [f"{name}.sig"]),
                      helper.make_node("Mul", [out, f"{name}.sig"], [name])]
        return nodes

    nodes = [
        *conv("stem", "images", 3, 16, 3),
        *conv("block", "stem", 16, 16, 3),
        helper.make_node("Add", ["block", "stem"], ["residual"]),
        *conv("down", "residual", 16, 32, 3, stride=2),
        helper.make_node("Resize", ["down", "", "up.scales"], ["up"], mode="nearest"),
        helper.make_node("Concat", ["up", "residual"], ["merged"], axis=1),
        *conv("neck", "merged", 48, 16, 1),
        *conv("boxes", "neck", 16, 4, 1, silu=False),
        *conv("logits", "neck", 16, 2, 1, silu=False),
        helper.make_node("Sigmoid", ["logits"], ["scores"]),
    ]
    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "up.scales"))
    graph = helper.make_graph(
        nodes, "detector",
        [helper.make_tensor_value_info("images", onnx.TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("boxes", onnx.TensorProto.FLOAT, [1, 4, SIZE, SIZE]),
         helper.make_tensor_value_info("scores", onnx.TensorProto.FLOAT, [1, 2, SIZE, SIZE])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def tpu_xdsl(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENBLAS_CORETYPE": "Haswell"}
    return subprocess.run([sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", *args],
                          check=False, capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def top(tmp_path_factory):
    folder = tmp_path_factory.mktemp("detector")
    x = np.random.default_rng(1).uniform(0, 1, (1, 3, SIZE, SIZE)).astype(np.float32)
    np.savez(folder / "x.npz", images=x)
    r = tpu_xdsl("transform", "--model-def", str(detector(folder / "det.onnx")), "--model-name", "det",
                 "--test-input", str(folder / "x.npz"), "--test-result", str(folder / "top.npz"),
                 "-o", str(folder / "det.mlir"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    return folder


@pytest.mark.parametrize(("mode", "chip"), [("F16", "bm1684x"), ("BF16", "cv183x")])
def test_grouped_device_equals_the_interpreter_bit_for_bit(top, mode, chip):
    out = top / f"det_{mode}_{chip}.tpumodel"
    r = tpu_xdsl("deploy", str(top / "det.mlir"), "--quantize", mode, "--chip", chip,
                 "--test-input", str(top / "x.npz"), "--test-reference", str(top / "top.npz"), "-o", str(out))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    # The layer groups run in more steps than there are groups: some are sliced.
    groups, steps = map(int, re.search(r"(\d+) groups hold .*\((\d+) steps\)", r.stdout).groups())
    assert 1 <= groups < steps, r.stdout
    device_check = r.stdout.split("TPU interpreter (reference) vs device model", 1)[1]
    assert "integer tensors equal, all pass" in device_check, device_check

    device_npz, interp_npz = top / f"device_{mode}_{chip}.npz", top / f"interp_{mode}_{chip}.npz"
    for model, dump in ((out, device_npz), (out.with_suffix(".mlir"), interp_npz)):
        r = tpu_xdsl("run", str(model), "--input", str(top / "x.npz"), "--output", str(dump), "--dump-all")
        assert r.returncode == 0, r.stderr
    with np.load(device_npz) as device, np.load(interp_npz) as interp:
        stored = sorted(set(device.files) & set(interp.files))
        assert {"boxes", "scores"} <= set(stored), stored
        # Group outputs in the mode's own type too, not only the f32 outputs (the upsample
        # and the concat run inside groups, so the neck is what leaves one in the mode).
        low = [name for name in stored if device[name].dtype != np.float32]
        assert low, stored
        for name in stored:
            assert device[name].dtype == interp[name].dtype, name
            np.testing.assert_array_equal(device[name].view(np.uint8), interp[name].view(np.uint8), err_msg=name)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_gemm_sums_in_float64_unless_asked_for_float32(dtype):
    """A GEMM kernel sees its float operands widened to float64 (the order-free sums the
    device check relies on); within `gemm_sums_in_float32` (search-qtable's candidate runs)
    in float32, the chip's accumulator, and in float64 again after it."""
    import ml_dtypes  # noqa: F401  (bfloat16 by name)

    from tpu_xdsl.kernels import ResultSpec
    from tpu_xdsl.kernels.tpu import gemm_sums_in_float32, in_f32

    seen: list[tuple[str, str]] = []

    def gemm(inputs, attrs, results):
        seen.append((str(inputs[0].dtype), str(results[0].dtype)))
        return [inputs[0] @ inputs[1]]

    kernel = in_f32(gemm, "matmul")
    a = np.ones((2, 3), dtype)
    spec = [ResultSpec((2, 2), np.dtype(dtype))]
    kernel([a, np.ones((3, 2), dtype)], {}, spec)
    with gemm_sums_in_float32():
        kernel([a, np.ones((3, 2), dtype)], {}, spec)
    kernel([a, np.ones((3, 2), dtype)], {}, spec)
    assert seen == [("float64", "float64"), ("float32", "float32"), ("float64", "float64")]
    elementwise = in_f32(gemm, "add")  # not a GEMM: f16/bf16 in float32, float32 as it is
    seen.clear()
    elementwise([a, np.ones((3, 2), dtype)], {}, spec)
    assert seen == [("float32", "float32")]
