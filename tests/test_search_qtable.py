"""`tpu-xdsl search-qtable`: sensitivity per op and the fewest float ops for a target cosine.

The network is built so that the answer is known by hand: two 1x1 convolutions whose
weights differ by about 1 % are subtracted. Each convolution's output spans a wide range
and its INT8 rounding error (half a code of that range) is of the size of their small
difference, so the two convolutions and the subtraction must leave INT8, and nothing
else needs to. Accuracy is judged against onnxruntime running the float model.
"""

from __future__ import annotations

import math
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.test_cli_transform import tpu_xdsl

CANCELLING = ("a", "b", "d")  # the two convolutions and their difference


def _cancelling_model(path: Path) -> None:
    rng = np.random.default_rng(7)

    def init(name, array):
        return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)

    wa = rng.standard_normal((8, 8, 1, 1))
    inits = [
        init("w0", rng.standard_normal((8, 4, 3, 3)) * 0.4), init("b0", rng.standard_normal(8) * 0.1),
        init("wa", wa), init("wb", wa * (1 + 0.01 * rng.standard_normal(wa.shape))),
        init("wo", rng.standard_normal((4, 8, 1, 1)) * 0.5), init("bo", rng.standard_normal(4) * 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("Conv", ["r0", "wa"], ["a"]),
        helper.make_node("Conv", ["r0", "wb"], ["b"]),
        helper.make_node("Sub", ["a", "b"], ["d"]),
        helper.make_node("Conv", ["d", "wo", "bo"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "cancelling", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 12, 12])], inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The TOP module, its calibration table (12 samples) and 8 disjoint evaluation samples."""
    folder = tmp_path_factory.mktemp("search_qtable")
    model = folder / "net.onnx"
    _cancelling_model(model)
    rng = np.random.default_rng(3)
    data = folder / "data"
    data.mkdir()
    for i in range(20):
        np.savez(data / f"s{i:02d}.npz", x=rng.standard_normal((1, 4, 12, 12)).astype(np.float32))
    cal = folder / "cal"
    cal.mkdir()
    for i in range(12):
        (cal / f"s{i:02d}.npz").write_bytes((data / f"s{i:02d}.npz").read_bytes())
    mlir = folder / "net.mlir"
    done = tpu_xdsl("transform", "--model-def", str(model), "--model-name", "net", "-o", str(mlir))
    assert done.returncode == 0, done.stderr
    table = folder / "net_cali_table"
    done = tpu_xdsl("calibrate", str(mlir), "--dataset", str(cal), "--input-num", "12", "-o", str(table))
    assert done.returncode == 0, done.stderr
    evaluation = [np.load(data / f"s{i:02d}.npz")["x"] for i in range(12, 20)]
    return {"folder": folder, "model": model, "mlir": mlir, "table": table, "cal": cal, "eval": evaluation}


def _search(prepared, *extra: str, output: str = "net_qtable") -> subprocess.CompletedProcess:
    return tpu_xdsl(
        "search-qtable", str(prepared["mlir"]), "--calibration-table", str(prepared["table"]),
        "--dataset", str(prepared["cal"]), "--input-num", "12", "--chip", "bm1684x", "--jobs", "1",
        *extra, "-o", str(prepared["folder"] / output),
    )


def _mean_cosine_against_onnxruntime(prepared, qtable: Path | None) -> float:
    """Deploy in INT8 (with the quantize table, if any) and run the TPU interpreter on the
    evaluation samples; mean cosine of the final output against onnxruntime."""
    from tpu_xdsl.calibration.table import read_table
    from tpu_xdsl.interp.runner import ModuleRunner
    from tpu_xdsl.ir_io import read_module
    from tpu_xdsl.transforms.import_calibration import import_calibration
    from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu
    from tpu_xdsl.weights import attach_weights, weights_of

    module = read_module(prepared["mlir"])
    attach_weights(module, base_dir=prepared["folder"])
    import_calibration(module, read_table(prepared["table"]), "table")
    lower_top_to_tpu(module, "INT8", "bm1684x", qtable=str(qtable) if qtable else None)
    runner = ModuleRunner(module, weights_of(module))
    session = ort.InferenceSession(str(prepared["model"]))
    cosines = []
    for x in prepared["eval"]:
        expected = session.run(None, {"x": x})[0].astype(np.float64).ravel()
        actual = np.asarray(runner.run({"x": x})["y"], dtype=np.float64).ravel()
        cosines.append(expected @ actual / np.linalg.norm(expected) / np.linalg.norm(actual))
    return float(np.mean(cosines))


def test_search_floats_the_cancelling_ops_and_meets_the_target(prepared):
    done = _search(prepared, "--target-cosine", "0.99")
    assert done.returncode == 0, done.stdout + done.stderr
    table = (prepared["folder"] / "net_qtable").read_text()
    lines = [line.split() for line in table.splitlines() if line and not line.startswith("#")]
    assert {name for name, _ in lines} == set(CANCELLING), table
    assert {mode for _, mode in lines} == {"F16"}  # bm1684x's fast float mode by default
    assert re.search(r"^# target cosine 0\.99", table, re.MULTILINE)
    assert re.search(r"^# float ops: 3 in F16; MACs in float: \d", table, re.MULTILINE)
    # The sensitivity table: every op that INT8 computes, worst first; the worst three
    # are the cancelling ones.
    rows = [line.split() for line in done.stdout.splitlines() if re.match(r"^\S+\s+(conv|sub|add)\s", line)]
    assert {row[0] for row in rows[:3]} == set(CANCELLING), done.stdout
    assert {row[0] for row in rows} == {*CANCELLING, "r0", "y"}  # r0: the first conv, its ReLU fused
    assert done.stdout.splitlines()[-1].startswith("3 of 5 ops in F16 (2 of 4 convolutions, "), done.stdout
    # The samples the table holds worst on, named, each with its cosine all-INT8 beside.
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("worst samples"))
    worst = [line.split() for line in lines[start + 1:start + 4]]
    names = {p.name for p in prepared["cal"].iterdir()}
    assert all(row[0] in names for row in worst), worst
    cosines = [float(row[1]) for row in worst]
    assert cosines == sorted(cosines) and all(float(row[2]) < 0.99 < float(row[1]) for row in worst), worst
    # What the table promises holds on samples the search did not see, against onnxruntime.
    before = _mean_cosine_against_onnxruntime(prepared, None)
    after = _mean_cosine_against_onnxruntime(prepared, prepared["folder"] / "net_qtable")
    assert before < 0.95 and after >= 0.99, (before, after)


def test_stop_when_met_writes_an_empty_table_without_the_sensitivity_pass(prepared):
    """A target every op in INT8 already meets: by default the sensitivity table is printed
    anyway; with --stop-when-met the command stops after the two base runs, as TPU-MLIR's
    search_qtable does, and writes a table with no op."""
    low = ("--target-cosine", "0.2", "--confidence", "0.5")
    quick = _search(prepared, *low, "--stop-when-met", output="met_qtable")
    assert quick.returncode == 0, quick.stdout + quick.stderr
    lines = quick.stdout.splitlines()
    assert "every op INT8 meets the target: no op needs F16 (--stop-when-met: no sensitivity pass)" in lines
    assert not [line for line in lines if re.match(r"^\S+\s+(conv|sub|add)\s", line)], quick.stdout
    assert lines[-1].startswith("no op in F16: cosine ") and "; 2 runs in " in lines[-1], lines[-1]
    table = (prepared["folder"] / "met_qtable").read_text()
    assert "# float ops: 0 in F16; MACs in float: 0.00%" in table
    assert not [line for line in table.splitlines() if line and not line.startswith("#")], table
    full = _search(prepared, *low, output="met_full_qtable")
    assert full.returncode == 0, full.stdout + full.stderr
    rows = [line for line in full.stdout.splitlines() if re.match(r"^\S+\s+(conv|sub|add)\s", line)]
    assert len(rows) == 5 and full.stdout.splitlines()[-1].startswith("0 of 5 ops in F16"), full.stdout


def test_the_table_is_checked_on_samples_the_search_did_not_see(prepared):
    """--check-num runs the table on the samples after the searched ones; what it reports
    is the cosine onnxruntime's float model gives on those samples."""
    output = prepared["folder"] / "checked_qtable"
    done = tpu_xdsl(
        "search-qtable", str(prepared["mlir"]), "--calibration-table", str(prepared["table"]),
        "--dataset", str(prepared["folder"] / "data"), "--input-num", "12", "--check-num", "10",
        "--chip", "bm1684x", "--jobs", "1", "--target-cosine", "0.99", "-o", str(output),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    table = output.read_text()
    lines = [line.split() for line in table.splitlines() if line and not line.startswith("#")]
    assert {name for name, _ in lines} == set(CANCELLING), table  # searched on the same 12 samples
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("held out:")]
    match = re.fullmatch(r"held out: on 8 samples the search did not see \(of 10 asked: the dataset has no more\), "
                         r"the table reads mean (0\.\d{6}) \(every op INT8: (0\.\d{6})\); meets the target 0\.99",
                         line)
    assert match, line
    header = re.search(r"^# held out: mean (0\.\d{6}) over 8 samples the search did not see "
                       r"\(every op INT8: (0\.\d{6})\)$", table, re.MULTILINE)
    assert header and header.groups() == match.groups(), table
    # Samples 12-19 are the evaluation samples: the same figures against onnxruntime.
    with_table = _mean_cosine_against_onnxruntime(prepared, output)
    every_op_int8 = _mean_cosine_against_onnxruntime(prepared, None)
    assert abs(float(match[1]) - with_table) < 1e-5 and abs(float(match[2]) - every_op_int8) < 1e-5, (
        match.groups(), with_table, every_op_int8)


def test_the_table_deploys_with_the_cli(prepared):
    qtable = prepared["folder"] / "net_qtable"
    if not qtable.exists():
        assert _search(prepared).returncode == 0
    x = prepared["eval"][0]
    np.savez(prepared["folder"] / "x.npz", x=x)
    done = tpu_xdsl(
        "deploy", str(prepared["mlir"]), "--quantize", "INT8", "--calibration-table", str(prepared["table"]),
        "--quantize-table", str(qtable), "--chip", "bm1684x", "-o", str(prepared["folder"] / "net_mixed.mlir"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = (prepared["folder"] / "net_mixed.mlir").read_text()
    assert text.count("tpu.conv") == 4 and "f16" in text and "i8" in text


def test_a_target_out_of_reach_names_the_best_cosine_and_writes_nothing(prepared):
    done = _search(prepared, "--target-cosine", "0.99", "--max-float-ops", "1", output="capped_qtable")
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "needs more than 1 op(s) in F16" in line and re.search(r"reach 0\.\d{6}", line), line
    assert re.search(r"\(lower 95% bound; mean 0\.\d{6}\); raise --max-float-ops or lower --target-cosine or "
                     r"--confidence$", line), line
    assert not (prepared["folder"] / "capped_qtable").exists()
    done = _search(prepared, "--target-cosine", "1.0", "--float-mode", "BF16", output="exact_qtable")
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "cannot be met even with every op in BF16" in line and "best reached is 0.99" in line, line
    assert not (prepared["folder"] / "exact_qtable").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--float-mode", "F16", "--chip", "cv183x"], "--float-mode F16: chip cv183x computes floats in BF16"),
        (["--target-cosine", "1.5"], "--target-cosine 1.5: give a cosine in (0, 1]"),
        (["--confidence", "1"], "--confidence 1.0: give a level in [0.5, 1)"),
        (["--check-num", "-1"], "--check-num -1: give 0 (no check) or more samples"),
        (["--check-num", "4"], "has 12 samples and the search takes the first 12; add samples or lower --input-num"),
        (["--hardest-of", "6"], "--hardest-of 6: give at least --input-num (12) samples to choose the hardest from"),
        (["--hardest-of", "12", "--check-num", "4"],
         "has 12 samples and the search takes the first 12; add samples or lower --hardest-of"),
        (["--min-conv-share", "1.5"], "--min-conv-share 1.5: give a share in [0, 1], e.g. 0.75"),
        (["--jobs", "0"], "--jobs 0: give 1 to 256 worker processes"),
        (["--cluster", "ray://127.0.0.1:1"], "--cluster ray://127.0.0.1:1: cannot connect"),
        (["--cluster", "127.0.0.1:1"], "give ray://HOST:PORT"),
    ],
)
def test_bad_flags_are_one_line_errors(prepared, args, message):
    done = _search(prepared, *args, output="bad_qtable")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert message in line, line
    assert not (prepared["folder"] / "bad_qtable").exists()


def test_the_output_never_overwrites_an_input(prepared):
    done = tpu_xdsl(
        "search-qtable", str(prepared["mlir"]), "--calibration-table", str(prepared["table"]),
        "--dataset", str(prepared["cal"]), "-o", str(prepared["table"]),
    )
    assert done.returncode == 2
    assert "would overwrite --calibration-table" in done.stderr
    done = tpu_xdsl("search-qtable", str(prepared["mlir"]), "--dataset", str(prepared["cal"]), "-o",
                    str(prepared["folder"] / "q"))
    assert done.returncode == 2 and "give --calibration-table" in done.stderr


class _FlakyRay:
    """Stands in for the ray module: init fails with the given errors, then succeeds."""

    def __init__(self, *errors: Exception):
        self.errors = list(errors)
        self.inits = self.shutdowns = 0

    def init(self, **_kwargs) -> None:
        self.inits += 1
        if self.errors:
            raise self.errors.pop(0)

    def shutdown(self) -> None:
        self.shutdowns += 1


def test_joining_retries_while_the_cluster_aborts_initialization(monkeypatch):
    from tpu_xdsl import workers

    monkeypatch.setattr(workers.time, "sleep", lambda _seconds: None)
    aborted = ConnectionAbortedError("Initialization failure from server:\nspecific server failed")
    ray = _FlakyRay(aborted, aborted)
    workers._join(ray, "ray://127.0.0.1:1")
    assert (ray.inits, ray.shutdowns) == (3, 2)
    # Any other failure is reported at once, in one line.
    ray = _FlakyRay(ConnectionRefusedError("refused\nmore"))
    with pytest.raises(workers.ClusterError, match=r"cannot join the cluster \(refused\)$"):
        workers._join(ray, "ray://127.0.0.1:1")
    assert ray.inits == 1
    # An abort that lasts past JOIN_SECONDS is reported too.
    monkeypatch.setattr(workers, "JOIN_SECONDS", 0.0)
    with pytest.raises(workers.ClusterError, match="Initialization failure from server"):
        workers._join(_FlakyRay(aborted), "ray://127.0.0.1:1")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_ray_cluster_writes_the_same_tables_byte_for_byte(prepared):
    """A local Ray head on 127.0.0.1 with 2 CPUs, reached as a Ray Client: calibrate's table
    (less the line with the time it was written), search-qtable's choice of the hardest
    samples, its sensitivity table and its quantize table equal those of the local runs."""
    ray = Path(sys.executable).parent / "ray"
    port, client = _free_port(), _free_port()
    env_dir = tempfile.mkdtemp(prefix="ray")  # short: Ray's socket paths must stay under 108 bytes
    start = subprocess.run(
        [str(ray), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=2",
         f"--ray-client-server-port={client}", "--include-dashboard=false", f"--temp-dir={env_dir}",
         "--disable-usage-stats"],
        capture_output=True, text=True, timeout=180, check=False,
    )
    assert start.returncode == 0, start.stdout + start.stderr
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the client server starts after the head
            try:
                socket.create_connection(("127.0.0.1", client), timeout=1).close()
                break
            except OSError:
                time.sleep(1)
        hardest = ("--input-num", "8", "--hardest-of", "12")  # the samples' ranking runs there too
        local = _search(prepared, *hardest, output="local_qtable")
        remote = _search(prepared, *hardest, "--cluster", f"ray://127.0.0.1:{client}", output="ray_qtable")
        tables = {}
        for tag, extra in (("local", ["--jobs", "2"]), ("ray", ["--cluster", f"ray://127.0.0.1:{client}"])):
            tables[tag] = prepared["folder"] / f"{tag}_cali_table"
            done = tpu_xdsl("calibrate", str(prepared["mlir"]), "--dataset", str(prepared["cal"]), "--input-num", "12",
                            *extra, "-o", str(tables[tag]))
            assert done.returncode == 0, done.stdout + done.stderr
    finally:
        subprocess.run([str(ray), "stop", "--force"], capture_output=True, timeout=120, check=False)
        shutil.rmtree(env_dir, ignore_errors=True)
    assert local.returncode == 0, local.stdout + local.stderr
    assert remote.returncode == 0, remote.stdout + remote.stderr
    folder = prepared["folder"]
    assert (folder / "ray_qtable").read_bytes() == (folder / "local_qtable").read_bytes()

    def without_time(path: Path) -> bytes:  # the table's first line is the time it was written
        lines = path.read_bytes().splitlines(keepends=True)
        assert lines[0].startswith(b"# genetated time:")
        return b"".join(lines[1:])

    assert without_time(tables["ray"]) == without_time(tables["local"])

    def sensitivity(out: str) -> list[str]:
        return [line for line in out.splitlines() if re.match(r"^\S+\s+(conv|sub|add)\s", line)]

    assert sensitivity(remote.stdout) == sensitivity(local.stdout) != []

    def chosen(out: str) -> list[str]:
        return [line for line in out.splitlines() if line.startswith("the 8 samples of 12 ")]

    assert chosen(remote.stdout) == chosen(local.stdout) != []


# -- the search itself, on scores computed by hand ---------------------------------------------


def _additive_scorer(damage: dict[str, float], float_mode: str = "F16"):
    """Scores of a model whose cosine loses damage[op] for each op left in INT8: a
    configuration's score is 1 - the sum over its INT8 ops (the same for every sample)."""
    from tpu_xdsl.calibration.qtable_search import Config

    def scorer(configs: list[Config]) -> list[tuple[float, ...]]:
        scores = []
        for config in configs:
            table = dict(config.table)
            int8 = [op for op in damage if table.get(op, config.mode) == "INT8"]
            scores.append((1 - sum(damage[op] for op in int8),) * 3)
        return scores

    return scorer


def test_the_search_finds_the_smallest_set_on_hand_computed_scores():
    from tpu_xdsl.calibration.qtable_search import Candidate, run_search

    damage = {"a": 0.001, "b": 0.02, "c": 0.004, "d": 0.0005, "e": 0.006}
    ops = [Candidate(name, "conv", 10) for name in damage]
    result = run_search(ops, _additive_scorer(damage), "F16", 0.99)
    # All INT8: 1 - 0.0315 = 0.9685. The fewest ops whose damage leaves at most 0.01:
    # b (0.02) must go; then 0.0115 remains, so one more: e (0.006) leaves 0.0055.
    assert [c.name for c in result.float_ops] == ["b", "e"]
    assert result.score == pytest.approx(1 - 0.0055)
    assert result.all_mode == pytest.approx(0.9685) and result.all_float == pytest.approx(1.0)
    assert [s.candidate.name for s in result.sensitivities] == ["b", "e", "c", "a", "d"]  # worst first
    assert result.float_macs == 20 and result.total_macs == 50


def test_a_minimum_conv_share_floats_other_ops_in_their_place():
    """--min-conv-share: of 4 convolutions at 0.75 only the most sensitive one may leave
    INT8; the search makes up the rest with ops that are not convolutions, by hand."""
    from tpu_xdsl.calibration.qtable_search import Candidate, TargetNotMet, run_search

    damage = {"c1": 0.02, "c2": 0.006, "c3": 0.001, "c4": 0.0005, "add": 0.004, "lut": 0.003}
    ops = [Candidate(name, "conv" if name.startswith("c") else name, 10) for name in damage]
    # Unconstrained: c1 (0.02), then c2 (0.006) leaves 0.0085 <= 0.01.
    assert [c.name for c in run_search(ops, _additive_scorer(damage), "F16", 0.99).float_ops] == ["c1", "c2"]
    # At 0.75 c2 stays INT8: c1 and add (0.004) leave 0.0105, so lut (0.003) too: 0.0075.
    result = run_search(ops, _additive_scorer(damage), "F16", 0.99, min_conv_share=0.75)
    assert [c.name for c in result.float_ops] == ["c1", "add", "lut"]
    assert result.score == pytest.approx(1 - 0.0075)
    # At 1.0 no convolution may leave: 0.0275 remains at best, and the error says why.
    with pytest.raises(TargetNotMet, match=r"every INT8 op but the 4 least sensitive of 4 convolutions "
                                           r"\(--min-conv-share 1\.0\) in F16: the best reached is 0\.9725") as e:
        run_search(ops, _additive_scorer(damage), "F16", 0.99, min_conv_share=1.0)
    assert sorted(c.name for c in e.value.floated) == ["add", "lut"]  # the ops that reached it


def test_pruning_drops_what_the_ranking_put_in_needlessly():
    """The ranking is by each op alone in INT8; when two ops only hurt together, the prefix
    the binary search finds can hold ops that pruning then puts back into INT8."""
    from tpu_xdsl.calibration.qtable_search import Candidate, Config, run_search

    def scorer(configs: list[Config]) -> list[tuple[float, ...]]:
        out = []
        for config in configs:
            table = dict(config.table)
            int8 = {op for op in "abc" if table.get(op, config.mode) == "INT8"}
            # a alone costs most, but b and c together cost more than the target allows.
            score = 1 - 0.006 * ("a" in int8) - (0.02 if {"b", "c"} <= int8 else 0.002 * len(int8 & {"b", "c"}))
            out.append((score,))
        return out

    ops = [Candidate(name, "conv", 1) for name in "abc"]
    result = run_search(ops, scorer, "F16", 0.99)
    # ranking: a (0.994), then b, c (0.998 each); prefix [a] fails (0.98), [a, b] passes
    # (0.998); pruning: without b fails, without a passes (1 - 0.002 = 0.998): only b stays.
    assert [c.name for c in result.float_ops] == ["b"]


@pytest.mark.parametrize(("p", "dof", "table"), [
    (0.95, 4, 2.132), (0.95, 10, 1.812), (0.95, 23, 1.714), (0.975, 5, 2.571), (0.99, 30, 2.457),
])
def test_student_t_quantiles_match_the_published_tables(p, dof, table):
    from tpu_xdsl.calibration.qtable_search import student_t_quantile

    assert student_t_quantile(p, dof) == pytest.approx(table, abs=1e-3)


def test_the_lower_bound_of_the_mean_by_hand():
    from tpu_xdsl.calibration.qtable_search import lower_bound
    from tpu_xdsl.tools.search_qtable import DEFAULT_CONFIDENCE

    # mean 0.98, sample deviation sqrt(0.001 / 4) = 0.0158114, standard error 0.0070711,
    # t(0.95, 4 degrees of freedom) = 2.132: 0.98 - 2.132 * 0.0070711 = 0.964925
    cosines = [1.0, 0.98, 0.99, 0.97, 0.96]
    assert lower_bound(cosines) == pytest.approx(0.964925, abs=2e-5)
    assert lower_bound([*cosines, math.nan]) == lower_bound(cosines)  # a sample with nothing to compare
    assert lower_bound(cosines, 0.5) == pytest.approx(0.98)
    assert lower_bound([0.97]) == 0.97 and math.isnan(lower_bound([math.nan]))
    assert lower_bound([0.995] * 4) == pytest.approx(0.995)
    assert DEFAULT_CONFIDENCE == 0.95  # the CLI's default is the library's


def test_an_op_that_ruins_one_sample_is_floated_at_95_percent_confidence():
    """The mean over the samples meets the target with every op INT8, but one op ruins one
    sample of five: the bound on the mean (what other samples will see) misses, so that
    op goes to float; at confidence 0.5 (the plain mean, TPU-MLIR's criterion) nothing does."""
    from tpu_xdsl.calibration.qtable_search import Candidate, Config, run_search

    def scorer(configs: list[Config]) -> list[tuple[float, ...]]:
        out = []
        for config in configs:
            table = dict(config.table)
            int8 = {op for op in ("rare", "even") if table.get(op, config.mode) == "INT8"}
            base = 1 - 0.003 * ("even" in int8)
            out.append((base - 0.03 * ("rare" in int8), base, base, base, base))
        return out

    ops = [Candidate("rare", "conv", 1), Candidate("even", "conv", 1)]
    # every op INT8: (0.967, 0.997 x 4), mean 0.991, deviation 0.013416, bound 0.991 - 2.132 * 0.006
    plain = run_search(ops, scorer, "F16", 0.99, confidence=0.5)
    assert plain.float_ops == [] and plain.score == pytest.approx(0.991)
    bounded = run_search(ops, scorer, "F16", 0.99)
    assert bounded.all_mode == pytest.approx(0.991 - 2.132 * 0.006, abs=2e-5)
    assert [c.name for c in bounded.float_ops] == ["rare"]
    assert bounded.score == pytest.approx(0.997) and bounded.mean == pytest.approx(0.997)


def test_the_worst_samples_are_named_lowest_first_without_empty_ones():
    from tpu_xdsl.calibration.qtable_search import SearchResult, format_worst_samples

    result = SearchResult("INT8", [], [], 0.99, 0.9, 1.0, 10, samples=(0.995, math.nan, 0.97, 0.999, 0.98),
                          mode_samples=(0.99, 0.5, 0.9, 0.95, 0.93))
    rows = format_worst_samples(result, ["a.png", "b.png", "c.png", "d.png", "e.png"], count=2)
    assert rows[0].split()[:2] == ["worst", "samples"] and "every op INT8" in rows[0]
    assert [row.split() for row in rows[1:]] == [["c.png", "0.970000", "0.900000"], ["e.png", "0.980000", "0.930000"]]


def test_a_model_that_meets_the_target_skips_the_sensitivity_pass_when_asked():
    from tpu_xdsl.calibration.qtable_search import Candidate, run_search

    damage = {"a": 0.001, "b": 0.002}
    ops = [Candidate(name, "conv", 1) for name in damage]
    asked = []

    def scorer(configs):
        asked.extend(configs)
        return _additive_scorer(damage)(configs)

    quick = run_search(ops, scorer, "F16", 0.99, sensitivity_when_met=False)
    assert quick.float_ops == [] and quick.sensitivities == [] and len(asked) == 2  # the two bases only
    assert quick.score == pytest.approx(0.997)
    full = run_search(ops, scorer, "F16", 0.99)  # the CLI's default: the table is printed anyway
    assert full.float_ops == [] and [s.candidate.name for s in full.sensitivities] == ["b", "a"]


@pytest.mark.parametrize("seed", range(20))
def test_pruning_two_trials_a_round_decides_as_one_at_a_time(seed):
    """_prune asks for each trial with the next one (as if the first fails); its decisions
    are those of dropping the chosen ops one at a time, least sensitive first, on scores
    where ops hurt alone and in pairs."""
    from tpu_xdsl.calibration.qtable_search import Candidate, Config, Search, _prune

    rng = np.random.default_rng(seed)
    names = [f"op{i}" for i in range(9)]
    alone = dict(zip(names, rng.uniform(0, 0.006, len(names)), strict=True))
    pairs = {tuple(sorted(rng.choice(names, 2, replace=False))): rng.uniform(0, 0.01) for _ in range(6)}

    def score(int8: set[str]) -> float:
        return 1 - sum(alone[n] for n in int8) - sum(d for pair, d in pairs.items() if set(pair) <= int8)

    def scorer(configs: list[Config]) -> list[tuple[float, ...]]:
        return [(score({n for n in names if dict(c.table).get(n, c.mode) == "INT8"}),) for c in configs]

    chosen = [Candidate(n, "conv", 1) for n in names]
    target = 1 - float(rng.uniform(0.005, 0.02))
    kept = list(chosen)  # the reference: one trial at a time
    for op in reversed(chosen):
        trial = [c for c in kept if c is not op]
        if score({c.name for c in chosen} - {c.name for c in trial}) >= target:
            kept = trial
    assert _prune(Search(scorer, "F16", target), chosen) == kept


def test_a_target_no_set_meets_is_out_of_reach():
    from tpu_xdsl.calibration.qtable_search import Candidate, TargetNotMet, run_search

    damage = {"a": 0.02, "b": 0.02}
    ops = [Candidate(name, "conv", 1) for name in damage]
    with pytest.raises(TargetNotMet, match="needs more than 1 op") as e:
        run_search(ops, _additive_scorer(damage), "F16", 0.99, max_float_ops=1)
    assert e.value.best == pytest.approx(0.98) and len(e.value.floated) == 1


def test_reused_results_equal_a_plain_run(prepared):
    """The evaluator's memoized runs give exactly what lowering and running the module
    afresh gives (with the evaluator's float32 GEMM sums), for configurations that differ
    from the bases in one op, and from an anchor in one op."""
    from tpu_xdsl.calibration.qtable_search import Config, Evaluator, cosine
    from tpu_xdsl.calibration.table import read_table
    from tpu_xdsl.interp.runner import ModuleRunner
    from tpu_xdsl.ir_io import read_module
    from tpu_xdsl.kernels.tpu import gemm_sums_in_float32
    from tpu_xdsl.transforms.import_calibration import import_calibration
    from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu
    from tpu_xdsl.weights import attach_weights, weights_of

    paths = sorted(prepared["cal"].iterdir())[:3]
    evaluator = Evaluator(prepared["mlir"], prepared["table"], "bm1684x", paths)
    anchor = Config.of("INT8", {"b": "F16", "d": "F16"})
    configs = (Config("INT8"), Config("F16"), Config.of("INT8", {"d": "F16"}), Config.of("F16", {"b": "INT8"}),
               Config.of("INT8", {"b": "F16"}, anchor), Config.of("INT8", {"d": "F16"}, anchor))
    for config in configs:
        scores = evaluator.score(config)
        module = read_module(prepared["mlir"])
        attach_weights(module, base_dir=prepared["folder"])
        import_calibration(module, read_table(prepared["table"]), "table")
        lower_top_to_tpu(module, config.mode, "bm1684x", qtable=dict(config.table))
        runner = ModuleRunner(module, weights_of(module))
        with gemm_sums_in_float32():
            expected = tuple(
                cosine(reference["y"], runner.run(sample)["y"])
                for sample, reference in zip(evaluator.samples, evaluator.references, strict=True)
            )
        assert scores == expected, config
    assert evaluator.cached_bytes > 0 and evaluator.anchor == anchor and evaluator.anchor_bytes > 0


def test_a_bf16_model_finds_its_ops_for_f32(prepared):
    """--mode BF16: bf16's 8 significant bits also lose the small difference of the two
    convolutions; the search puts them and their difference in F32 (no calibration table
    needed), and the sensitivity table names the mode."""
    done = tpu_xdsl(
        "search-qtable", str(prepared["mlir"]), "--dataset", str(prepared["cal"]), "--input-num", "12",
        "--mode", "BF16", "--float-mode", "F32", "--target-cosine", "0.999", "--jobs", "1",
        "-o", str(prepared["folder"] / "bf16_qtable"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    table = (prepared["folder"] / "bf16_qtable").read_text()
    lines = [line.split() for line in table.splitlines() if line and not line.startswith("#")]
    assert {name for name, _ in lines} == set(CANCELLING) and {mode for _, mode in lines} == {"F32"}, table
    assert "every op BF16:" in table and "BF16 alone" in done.stdout
    done = tpu_xdsl("search-qtable", str(prepared["mlir"]), "--dataset", str(prepared["cal"]), "--mode", "BF16",
                    "--float-mode", "BF16", "-o", str(prepared["folder"] / "same_qtable"))
    assert done.returncode == 2 and "give a mode more precise than --mode BF16" in done.stderr


def test_pruning_a_long_prefix_of_needless_ops_takes_few_trials():
    """When the binary search keeps a long prefix of which few ops are needed (scores that
    are not monotone along the ranking), pruning drops runs of ops at once: far fewer
    trials than one op at a time, with the same decisions where dropping never helps."""
    from tpu_xdsl.calibration.qtable_search import Candidate, Config, Search, _prune

    names = [f"op{i}" for i in range(64)]
    damage = {n: 0.0001 for n in names} | {"op5": 0.02, "op40": 0.02}

    def score(int8: set[str]) -> float:
        return 1 - sum(damage[n] for n in int8)

    asked: list[Config] = []

    def scorer(configs: list[Config]) -> list[tuple[float, ...]]:
        asked.extend(configs)
        return [(score({n for n in names if dict(c.table).get(n, c.mode) == "INT8"}),) for c in configs]

    chosen = [Candidate(n, "conv", 1) for n in names]
    kept = list(chosen)  # the reference: one trial at a time
    for op in reversed(chosen):
        trial = [c for c in kept if c is not op]
        if score({c.name for c in chosen} - {c.name for c in trial}) >= 0.99:
            kept = trial
    assert [c.name for c in kept] == ["op5", "op40"]
    assert _prune(Search(scorer, "F16", 0.99), chosen) == kept
    # One op at a time takes 64 trials (126 asked two a round, as pruning used to).
    assert len(set(asked)) <= 40


def test_a_deploy_that_misses_names_the_search_that_fixes_it(prepared):
    """An INT8 deploy below tolerance prints the search-qtable command on the user's own files;
    run as printed (DIR: the calibration samples), its table brings the same deploy within
    tolerance."""
    folder = prepared["folder"]
    np.savez(folder / "hint_x.npz", x=prepared["eval"][0])
    done = tpu_xdsl("transform", "--model-def", str(prepared["model"]), "--model-name", "hint", "--test-input",
                    str(folder / "hint_x.npz"), "--test-result", str(folder / "hint_top.npz"),
                    "-o", str(folder / "hint.mlir"))
    assert done.returncode == 0, done.stderr

    def deploy(*extra: str) -> subprocess.CompletedProcess:
        return tpu_xdsl("deploy", str(folder / "hint.mlir"), "--quantize", "INT8", "--calibration-table",
                        str(prepared["table"]), *extra, "--test-input", str(folder / "hint_x.npz"),
                        "--test-reference", str(folder / "hint_top.npz"), "-o", str(folder / "hint_int8.mlir"))

    done = deploy()
    assert done.returncode == 1, done.stdout + done.stderr
    (hint,) = [line for line in done.stdout.splitlines() if line.startswith("hint: ")]
    qtable = folder / "hint_qtable"
    assert hint.endswith(f"then deploy again with --quantize-table {qtable}"), hint
    match = re.search(r"tpu-xdsl (search-qtable .*) \(DIR: samples like --test-input, the search runs on the 24 "
                      r"of the first 100 where INT8 does worst\)", hint)
    assert match, hint
    argv = shlex.split(match.group(1).replace(" DIR ", f" {shlex.quote(str(prepared['cal']))} "))
    assert argv[argv.index("--calibration-table") + 1] == str(prepared["table"])
    done = tpu_xdsl(*argv, "--input-num", "12", "--jobs", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert qtable.is_file()
    done = deploy("--quantize-table", str(qtable))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hint:" not in done.stdout
    # Still below a tighter tolerance: the next search is named so that it cannot overwrite the table given.
    done = deploy("--quantize-table", str(qtable), "--tolerance", "0.9999999,0.9999")
    assert done.returncode == 1, done.stdout + done.stderr
    (hint,) = [line for line in done.stdout.splitlines() if line.startswith("hint: ")]
    assert f"with the ops of --quantize-table {qtable} in float" in hint, hint
    # ... and aims at that tolerance: the default target, 0.99, is what the table given already meets.
    assert "--target-cosine 0.9999999 " in hint, hint
    assert hint.endswith(f"-o {folder / 'hint_qtable_more'}"), hint


def test_fewer_samples_than_asked_are_said(prepared):
    """The bound the target is met by widens with fewer samples: the first line says how many
    the dataset held against --input-num, as calibrate does."""
    done = tpu_xdsl(
        "search-qtable", str(prepared["mlir"]), "--calibration-table", str(prepared["table"]),
        "--dataset", str(prepared["cal"]), "--input-num", "20", "--chip", "bm1684x", "--jobs", "1",
        "--target-cosine", "0.5", "-o", str(prepared["folder"] / "fewer_qtable"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert first.endswith("sensitivity runs on 12 samples (only 12 found; --input-num 20)"), first
    assert "only" not in _search(prepared, "--target-cosine", "0.5", output="enough_qtable").stdout.splitlines()[0]


def _int8_cosines_against_onnxruntime(prepared, paths: list[Path]) -> list[float]:
    """Each sample's final-output cosine with every op INT8 (no quantize table) against
    onnxruntime's float model."""
    from tpu_xdsl.calibration.table import read_table
    from tpu_xdsl.interp.runner import ModuleRunner
    from tpu_xdsl.ir_io import read_module
    from tpu_xdsl.transforms.import_calibration import import_calibration
    from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu
    from tpu_xdsl.weights import attach_weights, weights_of

    module = read_module(prepared["mlir"])
    attach_weights(module, base_dir=prepared["folder"])
    import_calibration(module, read_table(prepared["table"]), "table")
    lower_top_to_tpu(module, "INT8", "bm1684x")
    runner = ModuleRunner(module, weights_of(module))
    session = ort.InferenceSession(str(prepared["model"]))
    cosines = []
    for path in paths:
        x = np.load(path)["x"]
        expected = session.run(None, {"x": x})[0].astype(np.float64).ravel()
        actual = np.asarray(runner.run({"x": x})["y"], dtype=np.float64).ravel()
        cosines.append(float(expected @ actual / np.linalg.norm(expected) / np.linalg.norm(actual)))
    return cosines


def test_hardest_of_searches_on_the_samples_int8_gets_most_wrong(prepared):
    """--hardest-of 12 --input-num 4: the search runs on the 4 of the first 12 samples where
    every op INT8 is furthest from the float model (ranked here by onnxruntime), says which
    and how far, names them in the table's header, and --check-num takes the samples after
    the 12."""
    data = prepared["folder"] / "data"
    paths = sorted(data.iterdir())
    cosines = _int8_cosines_against_onnxruntime(prepared, paths[:12])
    hardest = sorted(sorted(range(12), key=lambda i: cosines[i])[:4])
    assert sorted(cosines)[3] < sorted(cosines)[4] - 1e-4, cosines  # no near tie decides the choice
    output = prepared["folder"] / "hardest_qtable"
    done = tpu_xdsl(
        "search-qtable", str(prepared["mlir"]), "--calibration-table", str(prepared["table"]),
        "--dataset", str(data), "--input-num", "4", "--hardest-of", "12", "--check-num", "8",
        "--chip", "bm1684x", "--jobs", "2", "--target-cosine", "0.99", "-o", str(output),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("the 4 samples of 12 ")]
    match = re.fullmatch(r"the 4 samples of 12 where every op INT8 does worst: cosine (0\.\d{6}) on them, "
                         r"(0\.\d{6}) on all 12 \(mean\): (.*)", line)
    assert match, line
    assert match[3].split() == [paths[i].name for i in hardest], (line, cosines)
    assert abs(float(match[1]) - np.mean([cosines[i] for i in hardest])) < 1e-5, (line, cosines)
    assert abs(float(match[2]) - np.mean(cosines)) < 1e-5, (line, cosines)
    assert "sensitivity runs on 4 samples" in done.stdout
    assert "held out: on 8 samples the search did not see, " in done.stdout, done.stdout
    table = output.read_text()
    assert re.search(r"^# samples: the 4 of 12 where every op INT8 does worst$", table, re.MULTILINE), table
    assert {line.split()[0] for line in table.splitlines() if line and not line.startswith("#")} == set(CANCELLING)

