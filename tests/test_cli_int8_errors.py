"""`tpu-xdsl calibrate` and `deploy` (INT8) on bad input: one line naming what is wrong and what to
do, exit code 2, no traceback, nothing written. Also the good INT8 paths those errors guard.

Cases tests/test_calibration.py already covers (an empty or missing dataset folder, a folder of
no usable files, an .npz of the wrong shape, an .npy of the wrong dtype, an unreadable .npz, a
1-channel model fed BGR images, malformed table lines) are not repeated here.

Most commands run in-process through `main` (a crash would fail the test with its exception);
the ones that used to crash run as real subprocesses.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

from tests.test_cli_transform import assert_user_error, small_cnn, tpu_xdsl
from tpu_xdsl.tools.tpu_xdsl import main

# -- helpers ------------------------------------------------------------------------------------


def snapshot(*folders: Path) -> dict[Path, tuple[int, int]]:
    """Every file under `folders` with its size and modification time."""
    found = {}
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file():
                stat = path.stat()
                found[path] = (stat.st_size, stat.st_mtime_ns)
    return found


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def assert_fails_cleanly(capsys, folders: tuple[Path, ...], args: list, *fragments: str) -> str:
    """`args` exits 2 with one line holding every fragment, and no file under `folders` changes."""
    before = snapshot(*folders)
    code, out, err = run(capsys, *args)
    assert code == 2, out + err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tpu-xdsl: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert snapshot(*folders) == before, "an error must leave no file behind"
    return lines[0]


@dataclass(frozen=True)
class Top:
    """A transformed TOP model, its TOP tensors on `x`, and a calibration table of it."""

    folder: Path
    mlir: Path
    x: Path
    reference: Path
    table: Path


def calibrated_top(folder: Path, onnx_path: Path, name: str) -> Top:
    """transform + calibrate (kl, 4 random .npz samples) of a model with one input 'image' [1,3,8,8]."""
    rng = np.random.default_rng(7)
    data = folder / "data"
    data.mkdir()
    for i in range(4):
        np.savez(data / f"s{i}.npz", image=rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    x = folder / "x.npz"
    np.savez(x, image=rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    mlir, reference, table = folder / f"{name}.mlir", folder / f"{name}_top_outputs.npz", folder / f"{name}_cali_table"
    assert main(["transform", "--model-def", str(onnx_path), "--model-name", name, "--input-shapes", "[[1,3,8,8]]",
                 "--test-input", str(x), "--test-result", str(reference), "-o", str(mlir)]) == 0
    assert main(["calibrate", str(mlir), "--dataset", str(data), "--input-num", "4", "-o", str(table)]) == 0
    return Top(folder, mlir, x, reference, table)


@pytest.fixture(scope="module")
def top(tmp_path_factory) -> Top:
    """small_cnn (conv+relu -> flatten -> matmul -> softmax): tensors image, relu, flat, logits, prob."""
    folder = tmp_path_factory.mktemp("top")
    return calibrated_top(folder, small_cnn(folder / "m.onnx"), "m")


def int8_head_model(path: Path) -> Path:
    """conv -> relu -> flatten -> matmul: every op, the output's included, has an INT8 lowering."""
    rng = np.random.default_rng(3)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["image", "w"], ["conv"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["conv"], ["relu"]),
            helper.make_node("Flatten", ["relu"], ["flat"], axis=1),
            helper.make_node("MatMul", ["flat", "fc"], ["logits"]),
        ],
        "int8_head",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 5])],
        [
            numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
            numpy_helper.from_array(rng.standard_normal((4 * 8 * 8, 5)).astype(np.float32), "fc"),
        ],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


# -- calibrate ----------------------------------------------------------------------------------


def calibrate_args(top: Top, folder: Path, *source) -> list:
    return ["calibrate", top.mlir, *source, "-o", folder / "out_cali_table"]


def test_unreadable_dataset_folder(top, tmp_path, capsys):
    data = tmp_path / "locked"
    data.mkdir()
    np.savez(data / "s0.npz", image=np.zeros((1, 3, 8, 8), np.float32))
    data.chmod(0)
    try:
        try:
            os.listdir(data)
        except PermissionError:
            pass
        else:
            pytest.skip(f"chmod 000 does not stop this user (uid {os.geteuid()}) from reading a folder")
        assert_fails_cleanly(
            capsys, (tmp_path, top.folder), calibrate_args(top, tmp_path, "--dataset", data),
            f"--dataset {data}", "cannot read the folder (Permission denied)", "check its permissions",
        )
    finally:
        data.chmod(0o755)


def test_unreadable_dataset_folder_message(top, tmp_path, capsys, monkeypatch):
    """The same error where chmod cannot cause it (root): the folder listing is refused."""
    data = tmp_path / "locked"
    data.mkdir()
    np.savez(data / "s0.npz", image=np.zeros((1, 3, 8, 8), np.float32))
    listdir = os.listdir

    def refuse(path="."):
        if Path(path) == data:
            raise PermissionError(13, "Permission denied", str(path))
        return listdir(path)

    monkeypatch.setattr("tpu_xdsl.calibration.dataset.os.listdir", refuse)
    assert_fails_cleanly(
        capsys, (tmp_path, top.folder), calibrate_args(top, tmp_path, "--dataset", data),
        f"--dataset {data}", "cannot read the folder (Permission denied)", "check its permissions",
    )


def test_folder_of_hidden_files_and_subfolders_only(top, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    np.savez(data / ".hidden.npz", image=np.zeros((1, 3, 8, 8), np.float32))
    (data / "sub.npz").mkdir()
    assert_fails_cleanly(
        capsys, (tmp_path, top.folder), calibrate_args(top, tmp_path, "--dataset", data),
        "none of its 2 entries is usable", "hidden files, subfolders", "put images", ".npz/.npy files in it",
    )


def _truncated_png(path: Path) -> None:
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(path)
    path.write_bytes(path.read_bytes()[:60])


@pytest.mark.parametrize(
    ("name", "write", "reason"),
    [
        ("b.jpg", lambda p: p.write_bytes(b"plain text, not a jpeg"), "cannot identify image file"),
        ("c.jpg", lambda p: p.write_bytes(b"\xff\xd8\xff\xe0 a jpeg header, then nothing"), "Truncated File Read"),
        ("b.png", _truncated_png, "truncated"),
    ],
)
def test_corrupt_image(top, tmp_path, capsys, name, write, reason):
    data = tmp_path / "images"
    data.mkdir()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(data / "a.png")  # a good one first
    write(data / name)
    assert_fails_cleanly(
        capsys, (tmp_path, top.folder), calibrate_args(top, tmp_path, "--dataset", data),
        f"{data / name}: cannot decode image", reason, "use a JPEG/PNG/BMP file",
    )


@pytest.mark.parametrize(
    ("sample", "fragments"),
    [
        ({"image": np.zeros((1, 3, 8, 8), np.int64)}, ["input 'image' has dtype int64, the model expects float32"]),
        ({"image": np.zeros((3, 8, 8), np.float32)}, ["input 'image' has shape [3, 8, 8]", "[1, 3, 8, 8]"]),
        ({"img": np.zeros((1, 3, 8, 8), np.float32), "extra": np.zeros(1)}, ["missing input(s) image"]),
    ],
    ids=["dtype", "rank", "names"],
)
def test_npz_sample_that_does_not_fit(top, tmp_path, capsys, sample, fragments):
    data = tmp_path / "data"
    data.mkdir()
    np.savez(data / "s0.npz", image=np.zeros((1, 3, 8, 8), np.float32))
    np.savez(data / "s1.npz", **sample)
    assert_fails_cleanly(
        capsys, (tmp_path, top.folder), calibrate_args(top, tmp_path, "--dataset", data),
        f"{data / 's1.npz'}: ", *fragments, "give samples with the model inputs' shapes and dtypes",
    )


@pytest.mark.parametrize(
    ("channels", "pixel_format", "image_mode", "fragments"),
    [
        (1, "rgb", "RGB", ["has 1 channel(s)", "pixel format rgb have 3"]),
        (3, "gray", "L", ["has 3 channel(s)", "pixel format gray have 1"]),
        (3, "gray", "RGB", ["has 3 channel(s)", "pixel format gray have 1"]),
    ],
)
def test_images_whose_channels_the_model_cannot_take(tmp_path, capsys, channels, pixel_format, image_mode, fragments):
    from tests.test_calibration import save_top
    from tpu_xdsl.frontend.preprocess import Preprocess

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, 4, 4])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), tmp_path / "m.onnx")
    mlir = save_top(tmp_path / "m.onnx", tmp_path / "m.mlir", Preprocess(pixel_format=pixel_format))
    images = tmp_path / "images"
    images.mkdir()
    Image.new(image_mode, (4, 4)).save(images / "a.png")
    assert_fails_cleanly(
        capsys, (tmp_path,), ["calibrate", mlir, "--dataset", images, "-o", tmp_path / "out_cali_table"],
        f"{images / 'a.png'}: the model input [1, {channels}, 4, 4]", *fragments,
        "give .npz samples or transform the model with a matching --pixel-format",
    )


def test_calibrate_model_that_is_not_a_top_mlir(top, tmp_path, capsys):
    data = top.folder / "data"
    assert_fails_cleanly(
        capsys,
        (tmp_path, top.folder),
        ["calibrate", tmp_path / "nosuch.mlir", "--dataset", data, "-o", tmp_path / "t"],
        "nosuch.mlir: no such file",
        "give the TOP .mlir that tpu-xdsl transform wrote",
    )
    # The .onnx instead of the .mlir used to end in a UnicodeDecodeError traceback.
    before = snapshot(tmp_path, top.folder)
    result = tpu_xdsl("calibrate", str(top.folder / "m.onnx"), "--dataset", str(data), "-o", str(tmp_path / "t"))
    assert_user_error(result, "m.onnx: not a text .mlir file", "not the .onnx", "tpu-xdsl transform")
    assert snapshot(tmp_path, top.folder) == before
    # -o naming the model would replace it with the table.
    assert_fails_cleanly(
        capsys, (tmp_path, top.folder), ["calibrate", top.mlir, "--dataset", data, "-o", top.mlir],
        "would overwrite the model", "name the table m_cali_table",
    )


# -- deploy: bad input --------------------------------------------------------------------------

OTHER_MODEL_TABLE = "# genetated time: x\n###\ninput0 1.0 -1.0 1.0\nconv_1 2.0 -2.0 2.0\nfc_3 5.0 -5.0 5.0\n"
# test_calibration's small_model: relu, flat, logits and prob share names with small_cnn, x and conv do not.
OVERLAPPING_TABLE = "".join(
    f"{name} 2.0 -2.0 2.0\n" for name in ("x", "conv", "relu", "pool", "flat", "mm", "logits", "prob", "twice")
)


def _write(name: str, content: str | bytes):
    def make(folder: Path, top: Top) -> Path:
        path = folder / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
        return path

    return make


def _table(folder: Path, top: Top) -> Path:
    return top.table


def _table_without(*names: str):
    def make(folder: Path, top: Top) -> Path:
        rows = [line for line in top.table.read_text().splitlines() if line.split()[0] not in names]
        (folder / "partial_table").write_text("\n".join(rows) + "\n")
        return folder / "partial_table"

    return make


# Each case: (extra deploy arguments; a str is a flag, a callable(folder, top) writes a file and
# gives its path), the fragments of the error line. The base is `deploy m.mlir --quantize INT8`.
DEPLOY_CASES = {
    "table_of_another_model": (
        ["--calibration-table", _write("other_table", OTHER_MODEL_TABLE)],
        ["other_table has rows for only 0 of the module's 5 tensors", "made for another model",
         "calibrate this one with tpu-xdsl calibrate"],
    ),
    "table_of_another_model_sharing_names": (
        ["--calibration-table", _write("small_cali_table", OVERLAPPING_TABLE)],
        ["tensor 'image'", "has no calibrated range", "use the table made for this model",
         "5 row(s) naming no tensor of this module", "made for another model?"],
    ),
    "table_malformed_line": (
        ["--calibration-table", _write("bad_table", "# genetated time: x\n###\nimage 1.0 -1.0\n")],
        ["bad_table:3: expected 'name threshold min max', got 3 field(s)",
         "make the table again with tpu-xdsl calibrate"],
    ),
    "table_not_text": (
        ["--calibration-table", _write("bin_table", b"\x89PNG\r\n\x1a\n\xff\xfe\x00")],
        ["bin_table: cannot read the calibration table: not a text file", "give the table tpu-xdsl calibrate wrote"],
    ),
    "table_missing": (
        ["--calibration-table", lambda folder, top: folder / "no_table"],
        ["no_table: cannot read the calibration table: No such file or directory"],
    ),
    "table_is_a_folder": (
        ["--calibration-table", lambda folder, top: folder],
        ["cannot read the calibration table: Is a directory"],
    ),
    "table_without_rows": (
        ["--calibration-table", _write("comments_table", "# genetated time: x\n###\n")],
        ["comments_table: no tensor rows", "give the table tpu-xdsl calibrate wrote"],
    ),
    "table_missing_a_needed_row": (
        ["--calibration-table", _table_without("relu")],
        ["tensor 'relu'", "has no calibrated range", "the calibration table has no row for it"],
    ),
    "int8_without_table": (
        [],
        ["INT8 needs a calibration table: give --calibration-table m_cali_table",
         "'tpu-xdsl calibrate", "--dataset DIR -o m_cali_table'", "no silent max-abs fallback"],
    ),
    "qtable_unknown_op": (
        ["--calibration-table", _table, "--quantize-table", _write("q", "# mixed\nrelu F16\nsoftmax F32\n")],
        ["q:3: the module has no op named 'softmax'", "names are the op's output tensor names"],
    ),
    "qtable_misspelled_op": (
        ["--calibration-table", _table, "--quantize-table", _write("q", "rellu F16\n")],
        ["q:1: the module has no op named 'rellu'; did you mean 'relu'?"],
    ),
    "qtable_unknown_mode": (
        ["--calibration-table", _table, "--quantize-table", _write("q", "relu F8\n")],
        ["q:1: unknown mode 'F8' for 'relu'", "choose one of F32, F16, BF16, INT8"],
    ),
    "qtable_mode_the_chip_lacks": (
        ["--chip", "cv183x", "--calibration-table", _table, "--quantize-table", _write("q", "relu F16\n")],
        ["q:1: chip cv183x has no F16 mode for 'relu'", "use one of BF16, INT8"],
    ),
    "qtable_malformed_line": (
        ["--calibration-table", _table, "--quantize-table", _write("q", "relu F16 logits\n")],
        ["q:1: expected 'op_name MODE', got 'relu F16 logits'", "one op name and one mode per line"],
    ),
    "qtable_name_without_mode": (
        ["--calibration-table", _table, "--quantize-table", _write("q", "relu\n")],
        ["q:1: expected 'op_name MODE', got 'relu'"],
    ),
    "qtable_name_twice": (
        ["--calibration-table", _table, "--quantize-table", _write("q", "relu F16\nlogits F32\nrelu F32\n")],
        ["q:3: 'relu' is listed twice (first on line 1)", "keep one line per op"],
    ),
    "qtable_missing": (
        ["--calibration-table", _table, "--quantize-table", lambda folder, top: folder / "no_q"],
        ["no_q: cannot read the quantize table (No such file or directory)", "'op_name MODE' lines"],
    ),
    "qtable_not_text": (
        ["--calibration-table", _table, "--quantize-table", _write("q", b"\xff\xfe\x00\x01")],
        ["q: cannot read the quantize table (not a text file)"],
    ),
    "quant_input_with_a_table_without_the_input": (
        ["--calibration-table", _table_without("image"), "--quant-input"],
        ["--quant-input: calibration table", "has no row for input 'image'", "the table tpu-xdsl calibrate made"],
    ),
    "test_input_without_reference": (
        ["--calibration-table", _table, "--test-input", lambda folder, top: top.x],
        ["--test-input and --test-reference go together: give both or neither"],
    ),
    "test_reference_without_input": (
        ["--calibration-table", _table, "--test-reference", lambda folder, top: top.reference],
        ["--test-input and --test-reference go together: give both or neither"],
    ),
    "test_input_of_the_wrong_shape": (
        ["--calibration-table", _table, "--test-reference", lambda folder, top: top.reference,
         "--test-input", lambda folder, top: _npz(folder / "x_small.npz", np.zeros((1, 3, 4, 4), np.float32))],
        ["--test-input", "x_small.npz: input 'image' has shape [1, 3, 4, 4], the model expects [1, 3, 8, 8]",
         "give the input the TOP module was checked on"],
    ),
    "test_input_of_the_wrong_dtype": (
        ["--calibration-table", _table, "--test-reference", lambda folder, top: top.reference,
         "--test-input", lambda folder, top: _npz(folder / "x_int.npz", np.zeros((1, 3, 8, 8), np.int32))],
        ["x_int.npz: input 'image' has dtype int32, the model expects float32"],
    ),
    "test_input_missing": (
        ["--calibration-table", _table, "--test-reference", lambda folder, top: top.reference,
         "--test-input", lambda folder, top: folder / "no_x.npz"],
        ["no_x.npz: no such input file"],
    ),
    "test_reference_of_another_model": (
        ["--calibration-table", _table, "--test-input", lambda folder, top: top.x,
         "--test-reference", lambda folder, top: _npz(folder / "other_top.npz", np.zeros(3, np.float32), "conv_1")],
        ["--test-reference", "other_top.npz: none of its 1 tensor(s) (conv_1) is a tensor of the module",
         "'tpu-xdsl transform --test-result' wrote for this model"],
    ),
    "test_reference_missing": (
        ["--calibration-table", _table, "--test-input", lambda folder, top: top.x,
         "--test-reference", lambda folder, top: folder / "no_top.npz"],
        ["--test-reference", "no_top.npz: no such file"],
    ),
}


def _npz(path: Path, value: np.ndarray, name: str = "image") -> Path:
    np.savez(path, **{name: value})
    return path


@pytest.mark.parametrize("case", list(DEPLOY_CASES))
def test_deploy_int8_bad_input(top, tmp_path, capsys, case):
    extra, fragments = DEPLOY_CASES[case]
    args = [a(tmp_path, top) if callable(a) else a for a in extra]
    assert_fails_cleanly(
        capsys, (tmp_path, top.folder),
        ["deploy", top.mlir, "--quantize", "INT8", *args, "-o", tmp_path / "m_int8.mlir"], *fragments,
    )


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--quantize", "F16", "--quant-input"],
         ["--quant-input keeps INT8 tensors at the model's boundary and --quantize F16 has none",
          "drop --quant-input or deploy with --quantize INT8"]),
        (["--quantize", "BF16", "--quant-output"], ["--quant-output", "--quantize BF16 has none"]),
        (["--quantize", "F32", "--quant-input", "--quant-output"], ["--quant-input", "--quantize F32 has none"]),
    ],
)
def test_deploy_quant_boundary_in_a_float_mode(top, tmp_path, capsys, args, fragments):
    assert_fails_cleanly(
        capsys, (tmp_path, top.folder), ["deploy", top.mlir, *args, "-o", tmp_path / "m_f16.mlir"], *fragments,
    )


def test_deploy_int8_in_the_quantize_table_needs_a_calibration_table(top, tmp_path, capsys):
    (tmp_path / "q").write_text("relu INT8\n")
    assert_fails_cleanly(
        capsys, (tmp_path, top.folder),
        ["deploy", top.mlir, "--quantize", "F16", "--quantize-table", tmp_path / "q", "-o", tmp_path / "m_mix.mlir"],
        "INT8 needs a calibration table: give --calibration-table m_cali_table", "no silent max-abs fallback",
    )


def test_deploy_bad_output_and_model_paths(top, tmp_path, capsys):
    base = ["deploy", top.mlir, "--quantize", "INT8", "--calibration-table", top.table]
    folders = (tmp_path, top.folder)
    assert_fails_cleanly(capsys, folders, [*base, "-o", tmp_path / "nowhere" / "m_int8.mlir"],
                         f"-o {tmp_path / 'nowhere' / 'm_int8.mlir'}: folder", "does not exist")
    assert_fails_cleanly(capsys, folders, [*base, "-o", tmp_path / "m_int8.bmodel"],
                         "write the TPU module as m_int8.mlir, or compile it to m_int8.tpumodel")
    assert_fails_cleanly(capsys, folders, [*base, "-o", top.mlir],
                         "would overwrite the TOP module deploy reads; name it m_int8.mlir")
    assert_fails_cleanly(
        capsys,
        folders,
        [
            "deploy",
            tmp_path / "nosuch.mlir",
            "--quantize",
            "INT8",
            "--calibration-table",
            top.table,
            "-o",
            tmp_path / "o.mlir",
        ],
        "nosuch.mlir: no such file; give the TOP .mlir that tpu-xdsl transform wrote",
    )


def test_deploy_errors_from_the_real_command_line(top, tmp_path):
    """As a user runs it: the .onnx given as the model (once a UnicodeDecodeError traceback) and an unknown chip."""
    before = snapshot(tmp_path, top.folder)
    result = tpu_xdsl("deploy", str(top.folder / "m.onnx"), "--quantize", "INT8", "--calibration-table", str(top.table),
                      "-o", str(tmp_path / "m_int8.mlir"))
    assert_user_error(result, "m.onnx: not a text .mlir file", "not the .onnx", "tpu-xdsl transform")
    result = tpu_xdsl("deploy", str(top.mlir), "--quantize", "INT8", "--chip", "bm1686", "--calibration-table",
                      str(top.table), "-o", str(tmp_path / "m_int8.mlir"))
    assert_user_error(result, "unknown chip 'bm1686'", "known chips: bm1684x, cv183x")
    assert snapshot(tmp_path, top.folder) == before


# -- deploy: the good INT8 paths ----------------------------------------------------------------


def deploy_int8(capsys, top: Top, out: Path, *extra) -> tuple[str, str]:
    code, stdout, err = run(
        capsys, "deploy", top.mlir, "--quantize", "INT8", "--calibration-table", top.table, *extra,
        "--test-input", top.x, "--test-reference", top.reference, "-o", out,
    )
    # 1 means a tensor fell below tolerance: a result, not bad input.
    assert code in (0, 1), stdout + err
    assert "Traceback" not in err and "error" not in err, err
    assert out.is_file() and out.with_name(f"{out.stem}_weights.npz").is_file()
    return stdout, out.read_text()


def test_deploy_int8_with_a_calibrate_table(top, tmp_path, capsys):
    stdout, text = deploy_int8(capsys, top, tmp_path / "m_int8.mlir")
    assert "TOP (reference) vs TPU interpreter INT8 symmetric, per-channel activations, by tensor name" in stdout
    assert any(line.startswith("relu ") for line in stdout.splitlines())
    assert 'module.mode = "INT8"' in text and "xi8" in text and "module.asymmetric" not in text


def test_deploy_int8_asymmetric(top, tmp_path, capsys):
    stdout, text = deploy_int8(capsys, top, tmp_path / "m_int8_asym.mlir", "--asymmetric")
    assert "TOP (reference) vs TPU interpreter INT8 asymmetric, by tensor name" in stdout
    assert 'module.quantization = "asymmetric"' in text and "xui8" in text


def test_deploy_int8_with_one_op_in_f16(top, tmp_path, capsys):
    from xdsl.dialects.builtin import Float16Type

    from tpu_xdsl.dialects.module import main_func, tensor_names
    from tpu_xdsl.ir_io import read_module

    (tmp_path / "qtable").write_text("# op_name mode\nrelu F16\n")
    out = tmp_path / "m_mix.mlir"
    stdout, _ = deploy_int8(capsys, top, out, "--quantize-table", tmp_path / "qtable")
    assert "TOP (reference) vs TPU interpreter INT8" in stdout
    ops = {n: op for op in main_func(read_module(out)).body.block.ops for n in tensor_names(op)}
    assert ops["relu"].name == "tpu.conv"
    assert isinstance(ops["relu"].results[0].type.element_type, Float16Type)
    assert ops["logits"].results[0].type.element_type.width.data == 8  # the rest stays INT8


@pytest.mark.parametrize(("asymmetric", "signedness"), [(False, "SIGNLESS"), (True, "UNSIGNED")])
def test_deploy_quant_input_and_output(tmp_path_factory, capsys, asymmetric, signedness):
    from xdsl.dialects.builtin import IntegerType

    from tpu_xdsl.dialects.module import main_func
    from tpu_xdsl.ir_io import read_module

    folder = tmp_path_factory.mktemp("int8_head")
    head = calibrated_top(folder, int8_head_model(folder / "head.onnx"), "head")
    out = folder / "head_int8.mlir"
    extra = ["--quant-input", "--quant-output"] + (["--asymmetric"] if asymmetric else [])
    stdout, _ = deploy_int8(capsys, head, out, *extra)
    assert "TOP (reference) vs TPU interpreter INT8" in stdout
    signature = main_func(read_module(out)).function_type
    boundary = [*signature.inputs.data, *signature.outputs.data]
    assert len(boundary) == 2
    for t in boundary:
        assert isinstance(t.element_type, IntegerType) and t.element_type.width.data == 8, t
        assert t.element_type.signedness.data.name == signedness, t


def test_run_refuses_an_onnx_file_and_a_module_without_its_weights(tmp_path):
    from tests.test_cli_transform import assert_user_error, small_cnn, tpu_xdsl

    model = small_cnn(tmp_path / "m.onnx")
    np.savez(tmp_path / "x.npz", image=np.zeros((1, 3, 8, 8), np.float32))
    assert_user_error(
        tpu_xdsl("run", str(model), "--input", str(tmp_path / "x.npz"), "--output", str(tmp_path / "y.npz")),
        "not a text .mlir file", "not the .onnx",
    )
    assert tpu_xdsl("transform", "--model-def", str(model), "--model-name", "m", "--input-shapes", "[[1,3,8,8]]",
                    "-o", str(tmp_path / "m.mlir")).returncode == 0
    (tmp_path / "m_weights.npz").unlink()
    assert_user_error(
        tpu_xdsl(
            "run", str(tmp_path / "m.mlir"), "--input", str(tmp_path / "x.npz"), "--output", str(tmp_path / "y.npz")
        ),
        "cannot read weight file",
        "keep the two together",
    )
    assert not (tmp_path / "y.npz").exists()


def test_integer_codes_flow_through_an_int8_deployment(tmp_path):
    """Byte codes in (int32), a one-hot by Equal and Cast as tf2onnx writes magika's, then a
    dense layer: deploy --quantize INT8 keeps the integer ops on their integers (nothing to
    quantize there; it used to stop at the Reshape with "INT8 'top.reshape' reads 'codes' of
    type i32") and quantizes from the one-hot on; the device runs it like onnxruntime."""
    import onnxruntime as ort

    rng = np.random.default_rng(5)
    graph = helper.make_graph(
        [
            helper.make_node("Reshape", ["codes", "column"], ["col"]),
            helper.make_node("Equal", ["col", "classes"], ["hot"]),
            helper.make_node("Cast", ["hot"], ["onehot"], to=TensorProto.FLOAT),
            helper.make_node("MatMul", ["onehot", "w"], ["logits"]),
            helper.make_node("Tanh", ["logits"], ["y"]),
        ],
        "codes",
        [helper.make_tensor_value_info("codes", TensorProto.INT32, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 4])],
        [numpy_helper.from_array(np.array([16, 1], np.int64), "column"),
         numpy_helper.from_array(np.arange(8, dtype=np.int32), "classes"),
         numpy_helper.from_array(rng.normal(0, 1, (8, 4)).astype(np.float32), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, tmp_path / "codes.onnx")
    data = tmp_path / "data"
    data.mkdir()
    for i in range(4):
        np.savez(data / f"s{i}.npz", codes=rng.integers(0, 8, (1, 16)).astype(np.int32))
    codes = rng.integers(0, 8, (1, 16)).astype(np.int32)
    np.savez(tmp_path / "x.npz", codes=codes)
    mlir, reference = tmp_path / "codes.mlir", tmp_path / "codes_top_outputs.npz"
    assert main(["transform", "--model-def", str(tmp_path / "codes.onnx"), "--model-name", "codes",
                 "--test-input", str(tmp_path / "x.npz"), "--test-result", str(reference), "-o", str(mlir)]) == 0
    assert main(["calibrate", str(mlir), "--dataset", str(data), "--input-num", "4",
                 "-o", str(tmp_path / "table")]) == 0
    done = tpu_xdsl("deploy", str(mlir), "--quantize", "INT8", "--calibration-table", str(tmp_path / "table"),
                    "--test-input", str(tmp_path / "x.npz"), "--test-reference", str(reference),
                    "-o", str(tmp_path / "codes_int8.tpumodel"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    assert "top.reshape" not in done.stdout  # no fallback note for the integer ops
    done = tpu_xdsl("run", str(tmp_path / "codes_int8.tpumodel"), "--input", str(tmp_path / "x.npz"),
                    "--output", str(tmp_path / "y.npz"))
    assert done.returncode == 0, done.stderr
    (expected,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"codes": codes})
    with np.load(tmp_path / "y.npz") as y:
        got = y["y"]
    assert float(np.dot(got.ravel(), expected.ravel()) / np.linalg.norm(got) / np.linalg.norm(expected)) >= 0.99
