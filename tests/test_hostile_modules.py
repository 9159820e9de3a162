"""Hostile TOP modules and weight files (issue 17): a weight that does not fit its top.weight,
a damaged weight file, a value used before its definition, a non-UTF-8 module. Each is a
one-line error with exit code 2 from run, deploy, check and tpu-opt, and leaves no output."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
from test_cli_transform import small_cnn

from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.ir_io import save_module
from tpu_xdsl.tools import tpu_opt, tpu_xdsl


@pytest.fixture(scope="module")
def top_files(tmp_path_factory) -> tuple[str, dict[str, np.ndarray]]:
    """The TOP module of a tiny conv -> relu -> matmul -> softmax model, as text, and its weights."""
    folder = tmp_path_factory.mktemp("top")
    result = import_onnx(small_cnn(folder / "m.onnx", dynamic_batch=False), "m")
    save_module(result.module, folder / "m.mlir", result.weights)
    with np.load(folder / "m_weights.npz") as npz:
        weights = {name: npz[name] for name in npz.files}
    return (folder / "m.mlir").read_text(), weights


def _write(folder: Path, text: str | bytes, weights: dict | None) -> Path:
    mlir = folder / "m.mlir"
    if isinstance(text, bytes):
        mlir.write_bytes(text)
    else:
        mlir.write_text(text)
    if weights is not None:
        np.savez(folder / "m_weights.npz", **weights)
    np.savez(folder / "x.npz", image=np.ones((1, 3, 8, 8), np.float32))
    return mlir


def _commands(folder: Path, mlir: Path) -> dict[str, tuple]:
    """Each command on `mlir`, writing into folder/out/."""
    out = folder / "out"
    out.mkdir(exist_ok=True)
    return {
        "run": (tpu_xdsl.main, ["run", str(mlir), "--input", str(folder / "x.npz"), "--output", str(out / "o.npz")]),
        "deploy": (tpu_xdsl.main, ["deploy", str(mlir), "--quantize", "F32", "-o", str(out / "d.tpumodel")]),
        "tpu-opt": (tpu_opt.main, [str(mlir), "-p", "canonicalize", "-o", str(out / "lg.mlir")]),
        "check": (tpu_xdsl.main, ["check", str(mlir)]),
    }


def _assert_refused(capsys, folder: Path, mlir: Path, *fragments: str, commands=("run", "deploy", "tpu-opt")):
    for name, (main, argv) in _commands(folder, mlir).items():
        if name not in commands:
            continue
        assert main(argv) == 2, name
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert len(err.strip().splitlines()) == 1, (name, err)
        for fragment in fragments:
            assert fragment in err, (name, err)
        assert not list((folder / "out").iterdir()), name


@pytest.mark.parametrize(
    "change, found",
    [
        (lambda w: {**w, "w": w["w"].reshape(4, 3, 9)}, "is 4x3x9 float32"),
        (lambda w: {**w, "w": w["w"].ravel()}, "is 108 float32"),
        (lambda w: {**w, "w": np.float32(1.0)}, "is 0-d float32"),
        (lambda w: {**w, "w": w["w"].astype(np.float64)}, "is 4x3x3x3 float64"),
    ],
    ids=["reshaped", "flattened", "0-d", "float64"],
)
def test_weight_that_does_not_fit_its_op(tmp_path, capsys, top_files, change, found):
    text, weights = top_files
    mlir = _write(tmp_path, text, change(weights))
    _assert_refused(capsys, tmp_path, mlir, "weight 'w'", found, "says 4x3x3x3 float32", "m_weights.npz")


def test_renamed_weight(tmp_path, capsys, top_files):
    text, weights = top_files
    mlir = _write(tmp_path, text, {"kernel": weights["w"], "fc": weights["fc"]})
    _assert_refused(capsys, tmp_path, mlir, "weight 'w' is not in weight file", "m_weights.npz")


def _truncated(path: Path, weights: dict) -> None:
    np.savez(path, **weights)
    path.write_bytes(path.read_bytes()[:300])


def _pickled(path: Path, weights: dict) -> None:
    np.savez(path, **{**weights, "w": np.array([1, "a", None], dtype=object)})


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _bad_header(path: Path, weights: dict) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("w.npy", b"\x93NUMPY\x01\x00garbage")
        archive.writestr("fc.npy", b"")


@pytest.mark.parametrize(
    "damage, fragments",
    [
        (_truncated, ["is not an .npz archive"]),
        (_pickled, ["weight 'w'", "holds Python objects"]),
        (lambda path, weights: path.mkdir(), ["cannot read weight file", "Is a directory"]),
        (lambda path, weights: path.write_text("not a zip"), ["is not an .npz archive"]),
        (lambda path, weights: path.write_bytes(_npy(weights["w"])), ["is not an .npz archive"]),
        (_bad_header, ["weight 'w'", "cannot be read"]),
    ],
    ids=["truncated", "object-array", "directory", "text", "npy", "bad-header"],
)
def test_damaged_weight_file(tmp_path, capsys, top_files, damage, fragments):
    text, weights = top_files
    mlir = _write(tmp_path, text, None)
    damage(tmp_path / "m_weights.npz", weights)
    _assert_refused(capsys, tmp_path, mlir, "m_weights.npz", *fragments)


def _swap_lines(text: str, first: str, second: str) -> str:
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if first in line)
    j = next(n for n, line in enumerate(lines) if second in line)
    lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines) + "\n"


def test_value_used_before_its_definition(tmp_path, capsys, top_files):
    text, weights = top_files
    # The matmul before the reshape whose result it reads: xDSL parses and verifies it.
    mlir = _write(tmp_path, _swap_lines(text, '"top.reshape"', '"top.matmul"'), weights)
    _assert_refused(
        capsys, tmp_path, mlir, "'top.matmul' 'logits'", "before its definition by 'top.reshape' 'flat'",
        commands=("run", "deploy", "tpu-opt", "check"),
    )


def test_top_input_of_a_value_that_is_no_argument(tmp_path, capsys, top_files):
    text, weights = top_files
    bad = re.sub(r'"top.input"\((%\w+)\)', r'"top.input"(%1)', text, count=1)
    mlir = _write(tmp_path, bad, weights)
    _assert_refused(capsys, tmp_path, mlir, "'top.input' 'image'", commands=("run", "deploy", "check"))


def test_model_input_read_without_top_input_is_refused_by_deploy(tmp_path, capsys, top_files):
    text, weights = top_files
    arg = re.search(r"func.func @main\((%\w+):", text).group(1)
    bad = re.sub(r'"top.conv"\(%\w+,', f'"top.conv"({arg},', text, count=1)
    mlir = _write(tmp_path, bad, weights)
    _assert_refused(capsys, tmp_path, mlir, "'top.conv'", "argument 0 of @main", commands=("deploy",))


def test_non_utf8_module(tmp_path, capsys, top_files):
    text, weights = top_files
    mlir = _write(tmp_path, text.encode() + b"\xff\xfe", weights)
    _assert_refused(capsys, tmp_path, mlir, "m.mlir", commands=("run", "deploy", "tpu-opt", "check"))


def test_tpu_opt_parse_error_leaves_no_output(tmp_path, capsys, top_files):
    text, weights = top_files
    mlir = _write(tmp_path, text.replace("top.softmax", "top.softmax\"(", 1), weights)
    main, argv = _commands(tmp_path, mlir)["tpu-opt"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "m.mlir" in err.splitlines()[0]
    assert not list((tmp_path / "out").iterdir())


def test_interpreter_error_names_the_op_in_one_line(capsys, top_files, tmp_path, monkeypatch):
    """A fault inside the interpreter (a bug) is one line naming the op, never the module."""
    from tpu_xdsl.interp import top_interpreter

    text, weights = top_files
    mlir = _write(tmp_path, text, weights)

    def broken(op):
        raise top_interpreter.InterpretError(f"'{op.name}': broken")

    monkeypatch.setattr(top_interpreter, "result_specs", broken)
    main, argv = _commands(tmp_path, mlir)["run"]
    code = main(argv)
    err = capsys.readouterr().err
    # The execution plan binds every op before the run: the first op it binds is named.
    assert code == 3 and len(err.strip().splitlines()) == 1 and re.search(r"'top\.\w+': broken", err), err
    assert "func.func" not in err and "builtin.module" not in err


def test_good_module_still_runs(tmp_path, capsys, top_files):
    text, weights = top_files
    mlir = _write(tmp_path, text, weights)
    for name in ("run", "tpu-opt"):
        main, argv = _commands(tmp_path, mlir)[name]
        assert main(argv) == 0, capsys.readouterr().err


def test_module_without_its_weight_file_attribute(tmp_path, capsys, top_files):
    text, weights = top_files
    bad = re.sub(r', module.weight_file = "[^"]*"', "", text)
    assert bad != text
    mlir = _write(tmp_path, bad, weights)
    _assert_refused(capsys, tmp_path, mlir, "no module.weight_file attribute", commands=("run", "deploy"))


@pytest.mark.parametrize(("output", "words"), [
    ("m.mlir", "is the same file as the input"),
    ("m_weights.npz", "the weight file of the input"),
    ("x/../m.mlir", "is the same file as the input"),
])
def test_tpu_opt_output_on_its_input_is_refused(tmp_path, capsys, top_files, output, words):
    """tpu-opt -o m.mlir on m.mlir truncated its input before parsing it; now nothing is touched."""
    text, weights = top_files
    mlir = _write(tmp_path, text, weights)
    (tmp_path / "x").mkdir()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert tpu_opt.main([str(mlir), "-p", "canonicalize", "-o", str(tmp_path / output)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_integer_attribute_out_of_range(tmp_path, capsys, top_files):
    """2^64 where an i64 goes: xDSL's parser builds the attribute and its verifier refuses it."""
    text, weights = top_files
    changed = re.sub(r"group = 1 : i64", "group = 18446744073709551616 : i64", text, count=1)
    assert changed != text
    mlir = _write(tmp_path, changed, weights)
    _assert_refused(capsys, tmp_path, mlir, "out of range for type i64", commands=("run", "deploy", "tpu-opt", "check"))
