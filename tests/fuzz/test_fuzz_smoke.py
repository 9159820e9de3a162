"""A deterministic smoke of the fuzzer (benchmarks/fuzz.py runs the long one): a few hundred
hostile inputs through the commands, none of which may crash, hang, be wrongly accepted,
leave a file or touch an input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fuzz.cases import make_seeds, module_cases, onnx_cases, path_cases, tpumodel_cases
from tests.fuzz.harness import Case, Outcome, _classify, _finish, run_cases, table


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return make_seeds(tmp_path_factory.mktemp("fuzz"))


def _assert_all_good(outcomes: list[Outcome]) -> None:
    bad = [o for o in outcomes if o.bad]
    assert not bad, table(outcomes) + "\n" + "\n".join(o.line() for o in bad[:30])


def test_onnx_mutants(seeds, tmp_path):
    onnx_seeds, _ = seeds
    outcomes = run_cases(onnx_cases(onnx_seeds, 240), tmp_path, timeout=60)
    assert len(outcomes) == 240
    _assert_all_good(outcomes)
    # The mutants reach the importer's checks, not only the protobuf parser.
    assert sum(o.ending == "clean" for o in outcomes) > 100
    assert sum(o.ending == "accepted" for o in outcomes) > 10


def test_tpumodel_mutants(seeds, tmp_path):
    _, device_seed = seeds
    outcomes = run_cases(tpumodel_cases(device_seed, 80), tmp_path, timeout=60)
    _assert_all_good(outcomes)


def test_module_and_weight_mutants(seeds, tmp_path):
    _, device_seed = seeds
    outcomes = run_cases(module_cases(device_seed, 80), tmp_path, timeout=60)
    _assert_all_good(outcomes)


def test_bad_output_paths(seeds, tmp_path):
    _, device_seed = seeds
    cases = path_cases(device_seed)
    outcomes = run_cases(cases, tmp_path, timeout=120)
    assert len(outcomes) == len(cases) >= 25
    _assert_all_good(outcomes)
    assert all(o.ending == "clean" for o in outcomes)


# ---- the harness itself -----------------------------------------------------------------


def _case(**kw) -> Case:
    return Case("t", "t", lambda i, o: [], lambda i: None, **kw)


def test_classify_endings():
    exited = lambda code: code << 8
    assert _classify(_case(), None, "", []) == "hang"
    assert _classify(_case(), 9, "", []) == "crash"  # killed by SIGKILL
    assert _classify(_case(), exited(2), "tpu-xdsl: error: bad\n", []) == "clean"
    assert _classify(_case(), exited(2), "a\nb\n", []) == "multiline"
    assert _classify(_case(multiline_ok=True), exited(2), "a\nb\n", []) == "clean"
    assert _classify(_case(), exited(2), "usage: tpu-xdsl\ntpu-xdsl: error: x\n", []) == "clean"
    assert _classify(_case(), exited(3), "internal error\n", []) == "internal"
    assert _classify(_case(), exited(2), "Traceback (most recent call last):\n", []) == "traceback"
    assert _classify(_case(), exited(0), "", []) == "accepted"
    assert _classify(_case(must_fail=True), exited(0), "", []) == "wrong"
    assert _classify(_case(), exited(7), "", []) == "crash"


def test_finish_sees_partial_temporary_and_changed_files(tmp_path):
    for sub in ("in", "out", "log"):
        (tmp_path / sub).mkdir()
    (tmp_path / "log" / "stderr").write_text("tpu-xdsl: error: no\n")
    (tmp_path / "in" / "model.onnx").write_bytes(b"before")
    before = {"model.onnx": __import__("hashlib").sha256(b"before").hexdigest()}
    (tmp_path / "in" / "model.onnx").write_bytes(b"after")
    (tmp_path / "out" / "m.mlir").write_text("")
    (tmp_path / "out" / ".m.mlir.x1y2").write_text("")
    outcome = _finish(_case(), tmp_path, 2 << 8, before, 0.1)
    assert outcome.ending == "clean"
    assert outcome.damage == ["partial", "temporary", "changed"]
    assert outcome.bad


def test_run_cases_runs_the_real_command(tmp_path):
    """One clean error and one accepted run, through the forked child."""
    missing = Case("t", "missing model", lambda i, o: ["info", str(i / "none.tpumodel")], lambda i: None)
    listing = Case("t", "list-ops", lambda i, o: ["list-ops"], lambda i: None)
    outcomes = run_cases([missing, listing], tmp_path, keep=lambda o: False)
    assert [o.ending for o in outcomes] == ["clean", "accepted"]
    assert "none.tpumodel" in outcomes[0].stderr
    assert not any(Path(tmp_path).iterdir()) or not os.listdir(tmp_path)
