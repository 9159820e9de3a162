"""The TOSA stage: hand-written TOSA modules compiled and run by IREE (`export.iree`), the
results against numpy computed by hand; the compile cache; feeds checked by name, shape and
dtype; `tpu-xdsl run` on a .tosa.mlir with and without IREE; `compare`, `report` and
`debug` with a TOSA stage beside a TOP module of the same model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.test_cli_int8_errors import assert_fails_cleanly, run
from tpu_xdsl.export import iree

# A 3x3 convolution of 2 channels into 3 (NCHW at the boundary, NHWC inside, OHWI weights),
# plus a per-channel constant, then flattened: the shape of what the export writes.
W = (np.arange(54, dtype=np.float32) / 10 - 2.7).reshape(3, 3, 3, 2)  # O, KH, KW, I
BIAS = np.array([0.5, -1.0, 2.0], np.float32)
SHIFT = np.array([1.0, 2.0, 3.0], np.float32)

CONV = f"""builtin.module attributes {{module.name = "tiny_conv", module.state = "TOSA_F32"}} {{
  func.func @main(%arg0: tensor<1x2x4x4xf32> {{tpu.name = "image"}}) -> (tensor<1x3x4x4xf32> {{tpu.name = "shifted"}}, tensor<1x48xf32> {{tpu.name = "flat"}}) {{
    %w = "tosa.const"() <{{values = dense<"0x{W.tobytes().hex().upper()}"> : tensor<3x3x3x2xf32>}}> : () -> tensor<3x3x3x2xf32>
    %b = "tosa.const"() <{{values = dense<[0.5, -1.0, 2.0]> : tensor<3xf32>}}> : () -> tensor<3xf32>
    %z = "tosa.const"() <{{values = dense<0.0> : tensor<1xf32>}}> : () -> tensor<1xf32>
    %nhwc = "tosa.transpose"(%arg0) <{{perms = array<i32: 0, 2, 3, 1>}}> : (tensor<1x2x4x4xf32>) -> tensor<1x4x4x2xf32>
    %conv = "tosa.conv2d"(%nhwc, %w, %b, %z, %z) <{{acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>}}> : (tensor<1x4x4x2xf32>, tensor<3x3x3x2xf32>, tensor<3xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x3xf32>
    %nchw = "tosa.transpose"(%conv) <{{perms = array<i32: 0, 3, 1, 2>}}> : (tensor<1x4x4x3xf32>) -> tensor<1x3x4x4xf32>
    %c = "tosa.const"() <{{values = dense<[[[[1.0]], [[2.0]], [[3.0]]]]> : tensor<1x3x1x1xf32>}}> : () -> tensor<1x3x1x1xf32>
    %sum = "tosa.add"(%nchw, %c) : (tensor<1x3x4x4xf32>, tensor<1x3x1x1xf32>) -> tensor<1x3x4x4xf32>
    %shape = "tosa.const_shape"() <{{values = dense<[1, 48]> : tensor<2xindex>}}> : () -> !tosa.shape<2>
    %flat = "tosa.reshape"(%sum, %shape) : (tensor<1x3x4x4xf32>, !tosa.shape<2>) -> tensor<1x48xf32>
    func.return %sum, %flat : tensor<1x3x4x4xf32>, tensor<1x48xf32>
  }}
}}
"""

ADD = """builtin.module attributes {module.name = "tiny_add", module.state = "TOSA_F32"} {
  func.func @main(%arg0: tensor<2x3xf32> {tpu.name = "a"}, %arg1: tensor<2x3xf32> {tpu.name = "b"}) -> (tensor<2x3xf32> {tpu.name = "c"}) {
    %0 = "tosa.add"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    func.return %0 : tensor<2x3xf32>
  }
}
"""

# The same model in TOP, as transform writes it (no weights: nothing to load).
ADD_TOP = """builtin.module attributes {module.name = "tiny_add", module.state = "TOP_F32", module.chip = "ALL"} {
  func.func @main(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %a = "top.input"(%arg0) {names = ["a"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %b = "top.input"(%arg1) {names = ["b"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %c = "top.add"(%a, %b) {names = ["c"]} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    func.return %c : tensor<2x3xf32>
  }
}
"""

# No tpu.name anywhere: the input matches by position, the result is output0.
UNNAMED = """builtin.module attributes {module.name = "unnamed", module.state = "TOSA_F32"} {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "tosa.add"(%arg0, %arg0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    func.return %0 : tensor<4xf32>
  }
}
"""

# TOSA has no f64 add (IREE's profile check refuses it at 3:10, the op).
F64_ADD = ADD.replace("f32", "f64")

IMAGE = (np.arange(32, dtype=np.float32) / 8 - 2).reshape(1, 2, 4, 4)


def conv_by_hand(x: np.ndarray) -> np.ndarray:
    """The CONV module's `shifted`: a zero-padded 3x3 correlation summed over kernel taps."""
    padded = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))  # C, H+2, W+2
    out = np.zeros((3, 4, 4), np.float64)
    for o in range(3):
        for kh in range(3):
            for kw in range(3):
                for i in range(2):
                    out[o] += W[o, kh, kw, i] * padded[i, kh:kh + 4, kw:kw + 4]
        out[o] += BIAS[o] + SHIFT[o]
    return out[None].astype(np.float32)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A cache folder of the test's own: the counts of compiles start from nothing."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("TPU_XDSL_CACHE", str(folder))
    return folder / "iree"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_conv_transpose_add_reshape_match_numpy(tmp_path, cache):
    model = write(tmp_path, "conv.tosa.mlir", CONV)
    outputs = iree.run_tosa(model, {"image": IMAGE})
    assert list(outputs) == ["shifted", "flat"]
    expected = conv_by_hand(IMAGE)
    np.testing.assert_allclose(outputs["shifted"], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outputs["flat"], expected.reshape(1, 48), rtol=1e-5, atol=1e-5)
    assert outputs["flat"].dtype == np.float32


def test_the_second_compile_is_read_from_the_cache(cache):
    before = iree.compile_count
    first = iree.compile_tosa(ADD, "add.tosa.mlir")
    stamp = first.stat().st_mtime_ns
    assert iree.compile_count == before + 1 and first.parent == cache and first.suffix == ".vmfb"
    again = iree.compile_tosa(ADD, "add.tosa.mlir")
    assert again == first and iree.compile_count == before + 1 and again.stat().st_mtime_ns == stamp
    other = iree.compile_tosa(ADD + "\n// another text, another module\n", "add.tosa.mlir")
    assert other != first and iree.compile_count == before + 2
    # renamed into place: no temporary is left beside the modules
    assert sorted(p.name for p in cache.iterdir()) == sorted([first.name, other.name])


def test_an_input_without_a_name_matches_by_position(tmp_path, cache):
    outputs = iree.run_tosa(write(tmp_path, "u.tosa.mlir", UNNAMED), {"whatever": np.arange(4, dtype=np.float32)})
    assert list(outputs) == ["output0"]
    np.testing.assert_array_equal(outputs["output0"], [0.0, 2.0, 4.0, 6.0])


@pytest.mark.parametrize("threads", [1, 2, None])
def test_threads(tmp_path, cache, threads):
    a, b = np.ones((2, 3), np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)
    outputs = iree.run_tosa(write(tmp_path, "add.tosa.mlir", ADD), {"a": a, "b": b}, threads=threads)
    np.testing.assert_array_equal(outputs["c"], a + b)


@pytest.mark.parametrize(
    ("feeds", "fragments"),
    [
        ({"a": np.ones((2, 3), np.float32)}, ["no input 'b' among the feeds (given: a)", "inputs are a, b"]),
        ({"a": np.ones((2, 3), np.float32), "b": np.ones((3, 2), np.float32)},
         ["input 'b' has shape [3, 2]; the module expects [2, 3]"]),
        ({"a": np.ones((2, 3), np.float64), "b": np.ones((2, 3), np.float32)},
         ["input 'a' has dtype float64; the module expects float32"]),
    ],
    ids=["missing", "shape", "dtype"],
)
def test_bad_feeds_are_one_line_errors(tmp_path, cache, feeds, fragments):
    model = write(tmp_path, "add.tosa.mlir", ADD)
    with pytest.raises(iree.IreeInputError) as error:
        iree.run_tosa(model, feeds)
    message = str(error.value)
    assert "\n" not in message and message.startswith(str(model))
    for fragment in fragments:
        assert fragment in message


def test_a_module_iree_rejects_is_one_line_naming_the_file_and_position(cache):
    with pytest.raises(iree.IreeCompileError) as error:
        iree.compile_tosa(F64_ADD, "f64.tosa.mlir")
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("f64.tosa.mlir:3:10: 'tosa.add' op is not profile-aligned"), message
    assert not cache.exists() or not any(cache.iterdir())


# -- tpu-xdsl run --------------------------------------------------------------------------------


def test_run_writes_the_final_outputs_by_name(tmp_path, cache, capsys):
    model = write(tmp_path, "conv.tosa.mlir", CONV)
    np.savez(tmp_path / "x.npz", image=IMAGE)
    code, out, err = run(capsys, "run", model, "--input", tmp_path / "x.npz", "--output", tmp_path / "y.npz")
    assert code == 0, err
    assert "shifted: shape [1, 3, 4, 4] float32" in out and "wrote" in out
    with np.load(tmp_path / "y.npz") as y:
        assert sorted(y.files) == ["flat", "shifted"]
        np.testing.assert_allclose(y["shifted"], conv_by_hand(IMAGE), rtol=1e-5, atol=1e-5)


def test_run_knows_a_tosa_module_by_its_state_too(tmp_path, cache, capsys):
    model = write(tmp_path, "add.mlir", ADD)  # no .tosa.mlir suffix: module.state says TOSA_F32
    np.savez(tmp_path / "x.npz", a=np.ones((2, 3), np.float32), b=np.full((2, 3), 2.0, np.float32))
    code, _, err = run(capsys, "run", model, "--input", tmp_path / "x.npz", "--output", tmp_path / "y.npz")
    assert code == 0, err
    with np.load(tmp_path / "y.npz") as y:
        np.testing.assert_array_equal(y["c"], np.full((2, 3), 3.0, np.float32))


def test_run_refuses_dump_all_on_a_tosa_module(tmp_path, cache, capsys):
    model = write(tmp_path, "add.tosa.mlir", ADD)
    np.savez(tmp_path / "x.npz", a=np.ones((2, 3), np.float32), b=np.ones((2, 3), np.float32))
    assert_fails_cleanly(capsys, (tmp_path,), ["run", model, "--input", tmp_path / "x.npz", "--output",
                                               tmp_path / "y.npz", "--dump-all"],
                         "--dump-all", "final outputs", "TOP or TPU .mlir")


def test_run_of_a_module_iree_rejects_exits_2(tmp_path, cache, capsys):
    model = write(tmp_path, "f64.tosa.mlir", F64_ADD)
    np.savez(tmp_path / "x.npz", a=np.ones((2, 3)), b=np.ones((2, 3)))
    assert_fails_cleanly(capsys, (tmp_path,), ["run", model, "--input", tmp_path / "x.npz", "--output",
                                               tmp_path / "y.npz"],
                         f"{model}:3:10: 'tosa.add' op is not profile-aligned", "IREE cannot compile it")


def test_run_without_iree_says_how_to_install(tmp_path):
    """A fresh interpreter where `import iree` fails, as in the default install."""
    model = write(tmp_path, "add.tosa.mlir", ADD)
    np.savez(tmp_path / "x.npz", a=np.ones((2, 3), np.float32), b=np.ones((2, 3), np.float32))
    blocked = ("import sys; sys.modules['iree'] = None\n"
               "from tpu_xdsl.tools.tpu_xdsl import main\n"
               "sys.exit(main(sys.argv[1:]))")
    result = subprocess.run(
        [sys.executable, "-c", blocked, "run", str(model), "--input", str(tmp_path / "x.npz"),
         "--output", str(tmp_path / "y.npz")],
        check=False, capture_output=True, text=True, env={**os.environ, "TPU_XDSL_CACHE": str(tmp_path / "cache")}, timeout=300,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        "tpu-xdsl: error: IREE is not installed; install the extra: pip install -e '.[tosa]'"
    ]
    assert not (tmp_path / "y.npz").exists()


# -- compare, report, debug ------------------------------------------------------------------------


def test_compare_a_tosa_module_against_expected_outputs(tmp_path, cache, capsys):
    model = write(tmp_path, "conv.tosa.mlir", CONV)
    np.savez(tmp_path / "x.npz", image=IMAGE)
    expected = conv_by_hand(IMAGE)
    np.savez(tmp_path / "expected.npz", shifted=expected, flat=expected.reshape(1, 48))
    code, out, err = run(capsys, "compare", tmp_path / "expected.npz", model, "--input", tmp_path / "x.npz")
    assert code == 0, out + err
    assert "2 tensors compared" in out and "all pass" in out
    np.savez(tmp_path / "wrong.npz", shifted=-expected)
    code, out, _ = run(capsys, "compare", tmp_path / "wrong.npz", model, "--input", tmp_path / "x.npz")
    assert code == 1 and "below tolerance, first: shifted" in out


def test_compare_needs_an_input_to_run_a_stage_file(tmp_path, cache, capsys):
    model = write(tmp_path, "conv.tosa.mlir", CONV)
    np.savez(tmp_path / "expected.npz", shifted=np.zeros((1, 3, 4, 4), np.float32))
    assert_fails_cleanly(capsys, (tmp_path,), ["compare", tmp_path / "expected.npz", model],
                         "conv.tosa.mlir is not an .npz", "--input")


def add_pair(tmp_path: Path) -> tuple[Path, Path, Path]:
    top = write(tmp_path, "add.top.mlir", ADD_TOP)
    tosa = write(tmp_path, "add.tosa.mlir", ADD)
    np.savez(tmp_path / "x.npz", a=np.array([[1, 2, 3], [4, 5, 6]], np.float32),
             b=np.array([[0.5, -1, 0], [2, 2, -6]], np.float32))
    return top, tosa, tmp_path / "x.npz"


def test_compare_top_against_its_tosa_export(tmp_path, cache, capsys):
    top, tosa, x = add_pair(tmp_path)
    code, out, err = run(capsys, "compare", top, tosa, "--input", x, "--verbose")
    assert code == 0, out + err
    assert "1 tensors compared" in out and "(tolerance 0.99999, 0.999); all pass" in out


def test_report_checks_the_tosa_stage_against_top(tmp_path, cache, capsys):
    top, tosa, x = add_pair(tmp_path)
    page = tmp_path / "report.html"
    code, out, err = run(capsys, "report", tosa, top, "--input", x, "-o", page)
    assert code == 0, out + err
    assert "TOSA F32 vs TOP: 1 tensors compared" in out
    assert "TOSA F32" in page.read_text()


def test_report_of_a_tosa_stage_alone_shows_its_outputs(tmp_path, cache, capsys):
    _, tosa, x = add_pair(tmp_path)
    code, out, err = run(capsys, "report", tosa, "--input", x, "-o", tmp_path / "report.html")
    assert code == 0, out + err
    assert "(1 tensors, 1 layers)" in out  # the graph of a stage with final outputs only: each output


def test_debug_runs_the_tosa_stage_whole_beside_the_stepped_top(tmp_path, cache, capsys):
    top, tosa, x = add_pair(tmp_path)
    script = write(tmp_path, "script.txt", "continue\ncompare c\ninfo stages\n")
    code, out, err = run(capsys, "debug", top, tosa, "--input", x, "--script", script)
    assert code == 0, out + err
    assert "TOSA F32: add.tosa.mlir (1 ops, run by IREE, final outputs only)" in out
    assert "vs TOP:" in out and "FAIL" not in out


def test_debug_does_not_step_a_tosa_stage(tmp_path, cache, capsys):
    _, tosa, x = add_pair(tmp_path)
    assert_fails_cleanly(capsys, (tmp_path,), ["debug", tosa, "--input", x, "--script",
                                               write(tmp_path, "s.txt", "continue\n")],
                         "debug steps a TOP or TPU .mlir or a .tpumodel")


def test_debug_stops_where_the_stepped_top_diverges_from_a_tosa_reference(tmp_path, cache, capsys):
    """With no stage before it, the stepped TOP is checked against the TOSA export (here one
    that subtracts where TOP adds): `break diverge` stops at the final output."""
    top, tosa, x = add_pair(tmp_path)
    tosa.write_text(ADD.replace("tosa.add", "tosa.sub"))
    script = write(tmp_path, "script.txt", "break diverge\ncontinue\ninfo stages\n")
    code, out, err = run(capsys, "debug", top, tosa, "--input", x, "--script", script)
    assert code == 0, out + err
    assert "stopped: 'c' diverges from TOSA F32" in out and "(tolerance 0.99999, 0.999)" in out
    assert "final outputs only)  [reference]" in out


# The preprocessing a TOP module records, kept by the export: an image input goes through it.
PREPROCESSED = """builtin.module attributes {module.name = "pre", module.state = "TOSA_F32", module.preprocess = {mean = [10.0, 20.0, 30.0], scale = [0.5, 0.5, 0.5], pixel_format = "bgr", channel_format = "nchw"}} {
  func.func @main(%arg0: tensor<1x3x2x2xf32> {tpu.name = "image"}) -> (tensor<1x3x2x2xf32> {tpu.name = "same"}) {
    %zero = "tosa.const"() <{values = dense<0.0> : tensor<1x3x1x1xf32>}> : () -> tensor<1x3x1x1xf32>
    %0 = "tosa.add"(%arg0, %zero) : (tensor<1x3x2x2xf32>, tensor<1x3x1x1xf32>) -> tensor<1x3x2x2xf32>
    func.return %0 : tensor<1x3x2x2xf32>
  }
}
"""


def test_run_reads_an_image_through_the_preprocessing_the_module_keeps(tmp_path, cache, capsys):
    from PIL import Image

    rgb = np.array([[[0, 50, 100], [200, 150, 250]], [[30, 60, 90], [255, 0, 128]]], np.uint8)  # H, W, RGB
    Image.fromarray(rgb).save(tmp_path / "x.png")
    model = write(tmp_path, "pre.tosa.mlir", PREPROCESSED)
    code, _, err = run(capsys, "run", model, "--input", tmp_path / "x.png", "--output", tmp_path / "y.npz")
    assert code == 0, err
    # BGR order, minus the mean, times the scale, channels first
    expected = ((rgb[:, :, ::-1].astype(np.float32) - [10, 20, 30]) * 0.5).transpose(2, 0, 1)[None]
    with np.load(tmp_path / "y.npz") as y:
        np.testing.assert_array_equal(y["same"], expected)


def test_a_tosa_stage_is_checked_against_the_stage_it_was_exported_from():
    """TOSA from TOP (no module.mode) against TOP though a TPU module is loaded; TOSA from a
    TPU module (its module.mode kept) against it; no other stage takes TOSA as reference."""
    from xdsl.dialects.builtin import ModuleOp, StringAttr

    from tpu_xdsl.inspect.stages import Stage, default_tolerance, reference_of

    def stage(kind: str, **attrs: str) -> Stage:
        module = ModuleOp([])
        module.attributes.update({f"module.{k}": StringAttr(v) for k, v in attrs.items()})
        return Stage(kind, kind, Path(f"m.{kind}"), module)

    onnx, top, tpu = stage("onnx"), stage("top", state="TOP_F32"), stage("tpu", state="TPU_INT8", mode="INT8")
    from_top = stage("tosa", state="TOSA_F32")
    from_tpu = stage("tosa", state="TOSA_INT8", mode="INT8")
    assert reference_of([onnx, top, tpu, from_top], from_top) is top
    assert reference_of([onnx, from_top], from_top) is onnx
    assert reference_of([onnx, top, tpu, from_tpu], from_tpu) is tpu
    assert reference_of([top, tpu, from_tpu], tpu) is top
    assert (from_top.mode, from_tpu.mode) == ("F32", "INT8")
    assert default_tolerance(top, from_top).cosine == 0.99999
    assert default_tolerance(top, from_tpu).cosine == 0.95  # INT8 against float: as the TPU module is checked
