"""`tpu-xdsl compare a.npz b.npz`: similarities worked out by hand on small arrays, integer
equality, shape and dtype mismatches, name patterns, INT8 dumps compared by their real values
(--dequant), and every bad input a one-line error with exit code 2."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.test_cli_device import compiled  # noqa: F401  (the fixture)
from tests.test_cli_int8_errors import assert_fails_cleanly, run


def npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def row(out: str, name: str) -> list[str]:
    return next(line.split() for line in out.splitlines() if line.split() and line.split()[0] == name)


@pytest.fixture
def pair(tmp_path):
    a = npz(tmp_path / "a.npz", x=np.array([1.0, 2.0, 3.0], np.float32), q=np.array([1, 2, 3], np.int8),
            s=np.zeros((2, 3), np.float32), only_a=np.ones(2))
    b = npz(tmp_path / "b.npz", x=np.array([1.0, 2.0, 4.0], np.float32), q=np.array([1, 2, 3], np.int8),
            s=np.zeros((3, 3), np.float32), only_b=np.ones(2))
    return a, b


def test_similarities_by_hand(pair, capsys):
    a, b = pair
    code, out, err = run(capsys, "compare", a, b, "--names", "x", "--verbose", "--tolerance", "0.99,0.75")
    assert code == 0, err
    # cosine 17 / sqrt(14 * 21); euclidean 1 - |d| / |(a + b) / 2| = 1 - 1 / sqrt(1 + 4 + 12.25);
    # SQNR 10 log10(14 / 1); max |d| 1
    cosine = 17 / math.sqrt(14 * 21)
    euclidean = 1 - 1 / math.sqrt(17.25)
    assert row(out, "x")[2:6] == [f"{cosine:.6f}", f"{euclidean:.6f}", f"{10 * math.log10(14):.2f}", "1"]
    assert out.strip().endswith(f"1 tensors compared; min cosine {cosine:.6f}, min euclidean {euclidean:.6f} "
                                "(tolerance 0.99, 0.75); all pass")
    code, out, _ = run(capsys, "compare", a, b, "--names", "x", "--tolerance", "0.995,0.75")
    assert code == 1 and row(out, "x")[-1] == "FAIL" and "below tolerance, first: x" in out
    assert "note:" not in out


def test_a_failing_tensor_of_rounding_noise_is_named(tmp_path, capsys):
    """A sigmoid's tail (logits -20 to -16, values ~1e-8) computed exactly and as
    0.5 + 0.5 tanh(z / 2) in float32, whose rounding at 0.5 is ~3e-8: the similarities fail
    and say nothing of the model, and the summary says so (the verdict stays)."""
    z = np.linspace(-20.0, -16.0, 64)
    exact = (1 / (1 + np.exp(-z))).astype(np.float32)
    rounded = np.float32(0.5) + np.float32(0.5) * np.tanh((z / 2).astype(np.float32))
    a = npz(tmp_path / "a.npz", map=exact, big=np.array([1.0, 2.0, 3.0], np.float32))
    b = npz(tmp_path / "b.npz", map=rounded, big=np.array([1.0, 2.0, 4.0], np.float32))
    code, out, _ = run(capsys, "compare", a, b, "--verbose", "--tolerance", "0.99,0.9")
    assert code == 1 and row(out, "map")[-1] == "FAIL" and row(out, "big")[-1] == "FAIL"
    note = next(line for line in out.splitlines() if line.startswith("note: "))
    largest = max(exact.max(), rounded.max())
    assert note.startswith(f"note: map (largest value {largest:.2g}) differ by less than 1e-06 everywhere")


def test_integers_compare_for_equality_and_shapes_must_match(pair, tmp_path, capsys):
    a, b = pair
    code, out, _ = run(capsys, "compare", a, b, "--verbose")
    assert code == 1
    assert row(out, "q")[-1] == "ok"
    assert "shape [3, 3] vs reference [2, 3]" in " ".join(row(out, "s"))
    assert "2 tensor(s) in only one file: only_a, only_b" in out
    c = npz(tmp_path / "c.npz", q=np.array([1, 2, 4], np.int8))
    code, out, _ = run(capsys, "compare", a, c)
    assert code == 1 and row(out, "q")[-1] == "FAIL"


def test_a_dtype_that_differs_is_noted(tmp_path, capsys):
    a = npz(tmp_path / "a.npz", t=np.array([1.0, -2.0], np.float32))
    b = npz(tmp_path / "b.npz", t=np.array([1, -2], np.int8))
    code, out, _ = run(capsys, "compare", a, b, "--verbose")
    assert code == 0
    assert "(dtype int8 vs reference float32)" in out
    assert "give --dequant N.mlir" in out


def test_bfloat16_dumps_compare_by_value(tmp_path, capsys):
    """numpy writes a bfloat16 array (a BF16 module's dump) as raw 2-byte records: compare
    reads them back as bfloat16 (it stopped with an internal error on them). Raw records
    of another size are not numbers: equal or not, no metric."""
    import ml_dtypes

    values = np.array([1.0, -2.5, 0.1, 3e38], np.float32)
    rounded = values.astype(ml_dtypes.bfloat16)
    a = npz(tmp_path / "a.npz", t=values, raw=np.zeros(2, "V4"))
    b = npz(tmp_path / "b.npz", t=rounded, raw=np.ones(2, "V4"))
    code, out, err = run(capsys, "compare", a, b, "--verbose", "--tolerance", "0.99,0.99")
    assert code == 1, err
    t = row(out, "t")
    # bfloat16 keeps 1.0 and -2.5; the largest difference is 3e38's rounding
    assert t[2] == "1.000000" and t[6] == "ok" and "(dtype bfloat16 vs reference float32)" in " ".join(t)
    assert float(t[5]) == pytest.approx(abs(3e38 - float(rounded[3])), rel=1e-2)
    assert "|V4 vs reference |V4: not numbers, and not equal" in " ".join(row(out, "raw"))


def test_int8_dumps_compare_by_real_value_with_dequant(compiled, tmp_path, capsys):  # noqa: F811
    dump = tmp_path / "tpu.npz"
    code, _, err = run(capsys, "run", compiled.mlir, "--input", compiled.x, "--output", dump, "--dump-all")
    assert code == 0, err
    reference = compiled.folder / "m_top_outputs.npz"
    code, raw, _ = run(capsys, "compare", reference, dump, "--tolerance", "0.5,-1")
    code_dq, real, _ = run(capsys, "compare", reference, dump, "--tolerance", "0.5,-1", "--dequant", compiled.mlir)
    assert code_dq == 0, real
    # the summary deploy printed for TOP against the TPU interpreter, tensor for tensor
    deployed = next(line for line in compiled.deploy_out.splitlines() if " tensors compared; " in line)
    assert real.strip().splitlines()[-1] == deployed
    assert raw.strip().splitlines()[-1] != deployed


@pytest.mark.parametrize(
    ("make", "args", "fragments"),
    [
        (None, ["missing.npz", "b.npz"], ["missing.npz: no such file"]),
        ("text", ["bad.npz", "b.npz"], ["bad.npz: not an .npz archive"]),
        ("other", ["other.npz", "b.npz"], ["no tensor name in common", "same model"]),
        (None, ["a.npz", "b.npz", "--names", "nothing*"], ["--names 'nothing*' matches none"]),
        (None, ["a.npz", "b.npz", "--tolerance", "2,1"], ["--tolerance '2,1'", "two numbers in [-1, 1]"]),
        (None, ["a.npz", "b.npz", "--dequant", "none.mlir"], ["none.mlir"]),
    ],
)
def test_bad_input(pair, tmp_path, capsys, make, args, fragments):
    if make == "text":
        (tmp_path / "bad.npz").write_text("not a zip")
    if make == "other":
        npz(tmp_path / "other.npz", y=np.ones(2))
    assert_fails_cleanly(capsys, (tmp_path,), ["compare", *(tmp_path / a if a.endswith((".npz", ".mlir")) else a
                                                            for a in args)], *fragments)
