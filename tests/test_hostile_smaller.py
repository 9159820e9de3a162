"""The smaller hostile cases of issue 17: compare of strings and of transposed tensors, inputs
of the wrong name or dtype, a calibration threshold of 1e38, all-NaN calibration samples, a
quantize table naming an unknown op, and the resource bounds of the flags."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_cli_int8_errors import Top, assert_fails_cleanly, calibrated_top, run
from tests.test_cli_transform import small_cnn
from tpu_xdsl.interp.compare import compare_tensors


@pytest.fixture(scope="module")
def top(tmp_path_factory) -> Top:
    folder = tmp_path_factory.mktemp("top")
    return calibrated_top(folder, small_cnn(folder / "m.onnx"), "m")


def test_compare_same_name_transposed_shapes_fails(tmp_path, capsys):
    """(2,3) against (3,2): the same size, not the same tensor; [1,6] against [6] is."""
    a = np.arange(6, dtype=np.float32)
    np.savez(tmp_path / "r.npz", t=a.reshape(2, 3), s=a.reshape(1, 6))
    np.savez(tmp_path / "a.npz", t=a.reshape(3, 2), s=a)
    code, out, _ = run(capsys, "compare", tmp_path / "r.npz", tmp_path / "a.npz")
    assert code == 1
    assert "shape [3, 2] vs reference [2, 3]" in out
    assert compare_tensors("s", a.reshape(1, 6), a).cosine == 1.0


def test_compare_string_tensors_equal_or_not(tmp_path, capsys):
    np.savez(tmp_path / "r.npz", labels=np.array(["cat", "dog"]), x=np.ones(3, np.float32))
    np.savez(tmp_path / "same.npz", labels=np.array(["cat", "dog"]), x=np.ones(3, np.float32))
    np.savez(tmp_path / "other.npz", labels=np.array(["cat", "cow"]), x=np.ones(3, np.float32))
    code, out, err = run(capsys, "compare", tmp_path / "r.npz", tmp_path / "same.npz")
    assert code == 0 and "internal error" not in err
    code, out, err = run(capsys, "compare", tmp_path / "r.npz", tmp_path / "other.npz")
    assert code == 1 and "not numbers, and not equal" in out


def test_single_input_npz_with_another_name_is_refused(top, tmp_path, capsys):
    np.savez(tmp_path / "x.npz", pixels=np.zeros((1, 3, 8, 8), np.float32))
    assert_fails_cleanly(capsys, (top.folder, tmp_path), ["run", top.mlir, "--input", tmp_path / "x.npz",
                                                           "--output", tmp_path / "y.npz"],
                         "missing input(s) image", "given: pixels")


def test_float64_input_for_a_float32_model_is_refused(top, tmp_path, capsys):
    np.savez(tmp_path / "x.npz", image=np.zeros((1, 3, 8, 8), np.float64))
    assert_fails_cleanly(capsys, (top.folder, tmp_path), ["run", top.mlir, "--input", tmp_path / "x.npz",
                                                           "--output", tmp_path / "y.npz"],
                         "input 'image' has dtype float64", "float32")


def test_float64_input_is_refused_by_the_device_too(top, tmp_path, capsys):
    model = tmp_path / "m.tpumodel"
    code, _, err = run(capsys, "deploy", top.mlir, "--quantize", "F16", "-o", model)
    assert code == 0, err
    np.savez(tmp_path / "x.npz", image=np.zeros((1, 3, 8, 8), np.float64))
    assert_fails_cleanly(capsys, (top.folder, tmp_path), ["run", model, "--input", tmp_path / "x.npz",
                                                           "--output", tmp_path / "y.npz"],
                         "input 'image' has dtype float64")


def test_threshold_1e38_deploys_and_saturates(top, tmp_path, capsys):
    """A threshold far from its neighbours' makes a rescale factor past the 31-bit multiplier:
    it saturates as the chip would (an honest, bad model), never an internal error."""
    lines = top.table.read_text().splitlines()
    big = [" ".join([ln.split()[0], "1e38", ln.split()[2], "1e38"]) if ln.startswith("relu ") else ln for ln in lines]
    assert big != lines
    (tmp_path / "big.cal").write_text("\n".join(big) + "\n")
    code, _, err = run(capsys, "deploy", top.mlir, "--quantize", "INT8", "--calibration-table",
                         tmp_path / "big.cal", "--test-input", top.x, "--test-reference", top.reference,
                         "-o", tmp_path / "d.mlir")
    assert code == 1, err  # the comparison fails: relu's scale is absurd
    assert "internal error" not in err and "Traceback" not in err


def test_all_nan_samples_are_refused(top, tmp_path, capsys):
    data = tmp_path / "nan"
    data.mkdir()
    for i in range(2):
        np.savez(data / f"s{i}.npz", image=np.full((1, 3, 8, 8), np.nan, np.float32))
    assert_fails_cleanly(capsys, (top.folder, tmp_path), ["calibrate", top.mlir, "--dataset", data, "-o",
                                                           tmp_path / "t.cal"],
                         "s0.npz", "NaN or infinite", "finite data")


def test_quantize_table_unknown_op_is_said_before_the_missing_calibration_table(top, tmp_path, capsys):
    (tmp_path / "q.txt").write_text("nosuchop F16\n")
    assert_fails_cleanly(capsys, (top.folder, tmp_path), ["deploy", top.mlir, "--quantize", "INT8",
                                                           "--quantize-table", tmp_path / "q.txt",
                                                           "-o", tmp_path / "d.mlir"],
                         "no op named 'nosuchop'")


def test_histogram_bins_are_bounded(top, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    np.savez(data / "s0.npz", image=np.zeros((1, 3, 8, 8), np.float32))
    assert_fails_cleanly(capsys, (top.folder, tmp_path), ["calibrate", top.mlir, "--dataset", data,
                                                           "--histogram-bins", "1000000000", "-o", tmp_path / "t.cal"],
                         "--histogram-bins 1000000000", "65536")


def test_resize_dims_are_bounded(tmp_path, capsys):
    model = small_cnn(tmp_path / "m.onnx")
    assert_fails_cleanly(capsys, (tmp_path,), ["transform", "--model-def", model, "--model-name", "m",
                                               "--resize-dims", "60000,60000", "-o", tmp_path / "m.mlir"],
                         "--resize-dims", "at most 16384")


def test_an_image_past_pillows_pixel_limit_is_refused(top, tmp_path, capsys, monkeypatch):
    """A decompression bomb: Pillow's warning (past its limit) is an error here, not a stray line."""
    from PIL import Image

    Image.new("RGB", (64, 64)).save(tmp_path / "big.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    assert_fails_cleanly(capsys, (top.folder, tmp_path), ["run", top.mlir, "--input", tmp_path / "big.png",
                                                           "--output", tmp_path / "y.npz"],
                         "big.png", "too large to decode safely")


BIG_EXPAND = """builtin.module attributes {module.name = "m", module.state = "TOP_F32", module.chip = "ALL"} {
  func.func @main(%0: tensor<1x1xf32>) -> tensor<1000000x1000000xf32> {
    %1 = "top.input"(%0) {names = ["x"]} : (tensor<1x1xf32>) -> tensor<1x1xf32>
    %2 = "top.expand"(%1) {shape = [1000000 : i64, 1000000 : i64], names = ["e"]} : """ \
    """(tensor<1x1xf32>) -> tensor<1000000x1000000xf32>
    func.return %2 : tensor<1000000x1000000xf32>
  }
}
"""


@pytest.mark.parametrize("limit", [None, "1M"])
def test_a_module_declaring_a_huge_tensor_is_refused_before_it_runs(tmp_path, capsys, limit):
    """run of an Expand to [1e6, 1e6] asked numpy for 3.6 TiB; now the limit refuses it by name."""
    (tmp_path / "big.mlir").write_text(BIG_EXPAND)
    np.savez(tmp_path / "x.npz", x=np.ones((1, 1), np.float32))
    flags = ["--max-tensor-bytes", limit] if limit else []
    line = assert_fails_cleanly(capsys, (tmp_path,), [*flags, "run", tmp_path / "big.mlir", "--input",
                                                      tmp_path / "x.npz", "--output", tmp_path / "y.npz"],
                                "top.expand 'e'", "3.6 TiB", "--max-tensor-bytes")
    assert ("1.0 MiB" in line) == bool(limit)


def test_max_tensor_bytes_flag_is_checked(tmp_path, capsys):
    assert_fails_cleanly(capsys, (tmp_path,), ["--max-tensor-bytes", "lots", "list-ops"],
                         "--max-tensor-bytes 'lots'", "e.g. 4G")


def test_an_unnamed_array_feeds_a_single_input_model(top, tmp_path, capsys):
    """np.savez(f, x) names its array arr_0: no name, like an .npy, so it is the one input."""
    np.savez(tmp_path / "x.npz", np.zeros((1, 3, 8, 8), np.float32))
    code, _, err = run(capsys, "run", top.mlir, "--input", tmp_path / "x.npz", "--output", tmp_path / "y.npz")
    assert code == 0, err


def _npy_named_npz(path):
    np.save(path.with_suffix(".npy"), np.ones((1, 3, 8, 8), np.float32))
    path.with_suffix(".npy").rename(path)


def _huge_header(path):
    """An .npy header declaring 2^40 x 3 x 8 x 8 floats over 16 bytes of data."""
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                  "shape": (2**40, 3, 8, 8)})
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("image.npy", header.getvalue() + bytes(16))


def _not_an_array(path):
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("other.txt", "hello")


@pytest.mark.parametrize(("make", "words"), [
    (_npy_named_npz, ("not an .npz archive", "an .npy array: name it .npy")),
    (lambda p: p.write_bytes(b""), ("not an .npz archive (empty)",)),
    (lambda p: p.write_bytes(b"PK\x03\x04"), ("not an .npz archive", "truncated")),
    (_huge_header, ("array 'image'", "768.0 TiB", "--max-tensor-bytes")),
    (_not_an_array, ("member 'other.txt' is not an array",)),
])
def test_hostile_npz_files_are_one_line_errors_everywhere(top, tmp_path, capsys, make, words):
    """np.load raised TypeError, EOFError, BadZipFile, MemoryError or handed back bytes for
    these; every command that reads an .npz now says what is wrong with it."""
    bad = tmp_path / "bad.npz"
    make(bad)
    out = tmp_path / "out"
    out.mkdir()
    commands = [
        ["run", top.mlir, "--input", bad, "--output", out / "y.npz"],
        ["compare", bad, top.reference],
        ["deploy", top.mlir, "--quantize", "F32", "--test-input", top.x, "--test-reference", bad, "-o", out / "d.mlir"],
        ["transform", "--model-def", top.folder / "m.onnx", "--model-name", "m", "--constant-inputs", bad,
         "-o", out / "m.mlir"],
    ]
    for args in commands:
        assert_fails_cleanly(capsys, (top.folder, tmp_path), args, "bad.npz", *words)


def test_jobs_are_bounded(top, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    np.savez(data / "s0.npz", image=np.zeros((1, 3, 8, 8), np.float32))
    for command in (["calibrate", top.mlir], ["search-qtable", top.mlir, "--calibration-table", top.table]):
        args = [*command, "--dataset", data, "--jobs", "2147483648", "-o", tmp_path / "t.txt"]
        assert_fails_cleanly(capsys, (top.folder, tmp_path), args, "--jobs 2147483648", "1 to 256")


def test_search_qtable_says_a_bad_sample_in_one_line(top, tmp_path, capsys):
    """A float64 sample among float32 ones: said by the command, not by a worker's traceback."""
    data = tmp_path / "data"
    data.mkdir()
    np.savez(data / "a.npz", image=np.zeros((1, 3, 8, 8), np.float64))
    np.savez(data / "b.npz", image=np.zeros((1, 3, 8, 8), np.float32))
    assert_fails_cleanly(capsys, (top.folder, tmp_path), ["search-qtable", top.mlir, "--calibration-table", top.table,
                                                           "--dataset", data, "--input-num", "2", "--jobs", "2",
                                                           "-o", tmp_path / "q.txt"],
                         "a.npz", "float64")


def test_compare_values_near_the_float64_limit(tmp_path, capsys):
    """Values of 1e300 overflowed the squares (math domain error, numpy warnings on stderr)."""
    a = np.arange(1, 7, dtype=np.float64)
    np.savez(tmp_path / "r.npz", t=a * 1e300)
    np.savez(tmp_path / "a.npz", t=a * 1e300 * 1.001)
    code, _, err = run(capsys, "compare", tmp_path / "r.npz", tmp_path / "a.npz", "--verbose")
    assert (code, err) == (0, "")
    assert compare_tensors("t", a, a * 1e300).cosine == pytest.approx(1.0)
    assert compare_tensors("t", a * 1e300, a * 1e300 * 1.001).sqnr_db == pytest.approx(60.0, abs=1e-6)


def test_usage_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as stop:
        run(capsys, "report", "--input", "x.npz", "-o", "r.html")
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "required: STAGE_FILE" in err and "--help" in err


def test_an_output_name_too_long_for_the_file_system(top, tmp_path, capsys):
    assert_fails_cleanly(capsys, (top.folder, tmp_path), ["run", top.mlir, "--input", top.x, "--output",
                                                           tmp_path / ("b" * 300 + ".npz")],
                         "cannot be written", "name another file")


@pytest.mark.parametrize(("passes", "words"), [
    ("nosuch", "Unrecognized passes: ['nosuch']"),
    ("canonicalize{x=1}", "not found in expected arguments"),
    (",", "pass pipeline"),
])
def test_tpu_opt_bad_pipeline_is_one_line(top, tmp_path, capsys, passes, words):
    from tpu_xdsl.tools import tpu_opt

    assert tpu_opt.main([str(top.mlir), "-p", passes, "-o", str(tmp_path / "o.mlir")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and f"-p {passes!r}" in err
    assert not (tmp_path / "o.mlir").exists()
