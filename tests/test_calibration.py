"""Calibration: thresholds from histograms, streaming statistics, the table format, datasets,
auto-tune, and `tpu-xdsl calibrate` as a user meets it.

Expected values come from onnxruntime (tensor ranges), from brute force over
the samples (MSE), from numpy's percentile, from a per-bin reference
implementation of TensorRT's published entropy calibration (KL), or by hand.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tpu_xdsl.calibration.statistics import TensorHistograms, TensorRanges
from tpu_xdsl.calibration.table import (
    CalibrationTable,
    CalibrationTableError,
    TableRow,
    read_table,
    write_table,
)
from tpu_xdsl.calibration.thresholds import (
    KL_LEVELS,
    KL_MAX_CLIPPED,
    MIN_THRESHOLD,
    kl_divergences,
    kl_threshold,
    mse_threshold,
    percentile_threshold,
    threshold,
)
from tpu_xdsl.tools.tpu_xdsl import main

# -- helpers ----------------------------------------------------------------------------------


def abs_histogram(values: np.ndarray, bins: int) -> tuple[np.ndarray, float, int]:
    """(counts of nonzero |x| in `bins` bins over [0, max|x|], max|x|, zeros), by np.histogram."""
    magnitude = np.abs(np.asarray(values, dtype=np.float64)).ravel()
    top = float(magnitude.max())
    counts, _ = np.histogram(magnitude[magnitude > 0], bins=bins, range=(0.0, top))
    return counts.astype(np.int64), top, int(np.sum(magnitude == 0))


def reference_kl(hist: np.ndarray, levels: int = KL_LEVELS) -> np.ndarray:
    """TensorRT's entropy calibration as published (Migacz, GTC 2017), bin by bin:
    for i in levels..bins-1: P = hist[:i] with the outliers added to bin i-1;
    Q = hist[:i] quantized to `levels` levels (bin k -> level k * levels // i) and
    expanded back over each level's nonzero bins; both normalized; KL(P || Q)."""
    hist = np.asarray(hist, dtype=np.float64)
    divergences = []
    for i in range(levels, hist.size):
        p = hist[:i].copy()
        p[i - 1] += hist[i:].sum()
        level = np.arange(i) * levels // i
        level_sum = np.bincount(level, weights=hist[:i], minlength=levels)
        level_nonzero = np.bincount(level, weights=(hist[:i] > 0).astype(float), minlength=levels)
        q = np.where(hist[:i] > 0, level_sum[level] / np.maximum(level_nonzero[level], 1), 0.0)
        if np.any((p > 0) & (q == 0)):  # P has mass where Q has none
            divergences.append(np.inf)
            continue
        p, q = p / p.sum(), q / q.sum()
        kept = p > 0
        divergences.append(float(np.sum(p[kept] * np.log(p[kept] / q[kept]))))
    return np.array(divergences)


def quantization_error(x: np.ndarray, t: float) -> float:
    """Squared error of int8 symmetric quantization (scale t / 127) of the samples themselves."""
    scale = t / 127
    return float(np.sum((np.clip(np.round(x / scale), -127, 127) * scale - x) ** 2))


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", *args], check=False, capture_output=True, text=True
    )


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def small_model(path: Path) -> Path:
    """conv -> relu -> maxpool -> flatten -> matmul (+ bias) -> sigmoid, and an add of the
    input with itself; every intermediate tensor is also a graph output, for onnxruntime."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["conv"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("MaxPool", ["relu"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "fc"], ["mm"]),
        helper.make_node("Add", ["mm", "fc_b"], ["logits"]),
        helper.make_node("Sigmoid", ["logits"], ["prob"]),
        helper.make_node("Add", ["x", "x"], ["twice"]),
    ]
    outputs = ["conv", "relu", "pool", "flat", "mm", "logits", "prob", "twice"]
    graph = helper.make_graph(
        nodes,
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [
            numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
            numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
            numpy_helper.from_array(rng.standard_normal((4 * 4 * 4, 5)).astype(np.float32), "fc"),
            numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "fc_b"),
        ],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def save_top(onnx_path: Path, mlir_path: Path, preprocess=None) -> Path:
    """Import an ONNX model and write the TOP .mlir + weights as `tpu-xdsl transform` does."""
    from tpu_xdsl.frontend.onnx_importer import import_onnx
    from tpu_xdsl.ir_io import save_module

    result = import_onnx(onnx_path)
    if preprocess is not None:
        preprocess.record(result.module)
    save_module(result.module, mlir_path, result.weights)
    return mlir_path


def tensor_names_of(mlir_path: Path) -> set[str]:
    """Names of every activation of the TOP module (weights excluded)."""
    from tpu_xdsl.dialects.module import tensor_names
    from tpu_xdsl.ir_io import read_module

    module = read_module(mlir_path)
    return {n for op in module.walk() if op.name not in ("top.weight", "top.none") for n in tensor_names(op)}


@pytest.fixture
def small(tmp_path) -> tuple[Path, Path, list[np.ndarray]]:
    """A TOP module of `small_model` and a folder of 6 .npz samples; s5 is an outlier."""
    mlir = save_top(small_model(tmp_path / "small.onnx"), tmp_path / "small.mlir")
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(1)
    samples = []
    for i in range(6):
        x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32) * (100 if i == 5 else 1)
        np.savez(data / f"s{i}.npz", x=x)
        samples.append(x)
    return mlir, data, samples


# -- thresholds ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bins", [512, 2048])
@pytest.mark.parametrize("kind", ["gauss", "relu", "laplace_tail", "sparse", "bimodal"])
def test_kl_agrees_with_reference_implementation(kind, bins):
    rng = np.random.default_rng(bins)
    values = {
        "gauss": lambda: rng.standard_normal(50_000),
        "relu": lambda: np.maximum(rng.standard_normal(50_000), 0),
        "laplace_tail": lambda: np.append(rng.laplace(size=50_000), [80.0, -120.0]),
        "sparse": lambda: rng.integers(0, 40, 3_000) * 0.7,
        "bimodal": lambda: np.concatenate([rng.normal(1, 0.1, 20_000), rng.normal(6, 0.3, 5_000)]),
    }[kind]()
    hist, top, zeros = abs_histogram(values, bins)
    expected = reference_kl(hist)
    got = kl_divergences(hist)
    assert got.shape == expected.shape
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(np.isfinite(got), finite)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-6, atol=1e-10)
    best = int(np.argmin(expected)) + KL_LEVELS
    if hist[best + 1 :].sum() <= KL_MAX_CLIPPED * hist.sum():
        assert kl_threshold(hist, top, zeros) == pytest.approx((best + 0.5) * top / bins)
    else:  # a degenerate minimum that would clip the values themselves: MSE's choice
        assert kl_threshold(hist, top, zeros) == mse_threshold(hist, top, zeros)


def test_kl_on_uniform_data_keeps_nearly_the_whole_range():
    values = np.random.default_rng(0).uniform(-3, 3, 200_000)
    hist, top, zeros = abs_histogram(values, 2048)
    t = threshold("kl", hist, top, zeros)
    assert 0.98 * top <= t <= top


def test_kl_clips_a_heavy_tail():
    # A Laplace body plus a few large outliers: the threshold stays with the body.
    rng = np.random.default_rng(0)
    body = rng.laplace(size=200_000)
    values = np.concatenate([body, rng.uniform(50, 100, 20) * rng.choice([-1, 1], 20)])
    hist, top, zeros = abs_histogram(values, 2048)
    t = threshold("kl", hist, top, zeros)
    assert t < 0.25 * top
    assert t > np.percentile(np.abs(body), 99)


def test_kl_with_few_bins_or_no_finite_candidate_falls_back_to_max():
    assert kl_threshold(np.ones(100, np.int64), 5.0) == 5.0
    # Every candidate's bin i-1 is empty while outliers remain: no finite divergence.
    hist = np.zeros(300, np.int64)
    hist[0], hist[-1] = 1000, 1
    assert np.isinf(kl_divergences(hist)).all()
    assert kl_threshold(hist, 3.0) == 3.0


@pytest.mark.parametrize("kind", ["gauss", "laplace", "student_t2", "relu", "uniform"])
def test_mse_threshold_minimizes_the_real_quantization_error(kind):
    rng = np.random.default_rng(3)
    x = {
        "gauss": lambda: rng.standard_normal(40_000),
        "laplace": lambda: rng.laplace(size=40_000),
        "student_t2": lambda: rng.standard_t(2, 40_000),
        "relu": lambda: np.maximum(rng.standard_normal(40_000), 0),
        "uniform": lambda: rng.uniform(-2, 2, 40_000),
    }[kind]()
    hist, top, zeros = abs_histogram(x, 2048)
    t = threshold("mse", hist, top, zeros)
    grid = np.linspace(top / 256, top, 256)
    best = min(quantization_error(x, g) for g in grid)
    assert 0 < t <= top
    assert quantization_error(x, t) <= 1.005 * best


def test_mse_on_uniform_data_matches_the_closed_form():
    # |x| uniform on [0, A]: error(T) ~ T^3 / (12 * 127^2) + (A - T)^3 / 3, minimal at T = A * 254 / 255.
    hist = np.full(2048, 1000, np.int64)
    assert mse_threshold(hist, 1.0) == pytest.approx(254 / 255, abs=1.5 / 2048)


def test_percentile_by_hand():
    # 9999 of 10000 values in bin 0 (of 10 bins over [0, 10]): the 99.99th percentile is bin 0's top.
    hist = np.zeros(10, np.int64)
    hist[0], hist[9] = 9999, 1
    assert percentile_threshold(hist, 10.0) == pytest.approx(1.0)
    # Same with half of them exact zeros, which count.
    hist[0] = 4999
    assert percentile_threshold(hist, 10.0, zeros=5000) == pytest.approx(1.0)
    # All but a ten-thousandth are zeros: the percentile is 0, the threshold the floor.
    assert threshold("percentile9999", np.array([0, 1]), 2.0, zeros=10_000) == MIN_THRESHOLD


def test_percentile_of_a_known_distribution():
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.exponential(2.0, 300_000), np.zeros(50_000)])
    hist, top, zeros = abs_histogram(x, 2048)
    expected = np.percentile(np.abs(x), 99.99)
    assert threshold("percentile9999", hist, top, zeros) == pytest.approx(expected, abs=top / 2048)
    # and the exponential's own quantile, -2 ln(1 - q'), q' the fraction among nonzeros
    q = 1 - 1e-4 * 350_000 / 300_000
    assert expected == pytest.approx(-2 * np.log(1 - q), rel=0.05)


def test_max_and_the_floor():
    hist, top, zeros = abs_histogram(np.array([0.5, -3.25, 1.0]), 2048)
    assert threshold("max", hist, top, zeros) == 3.25
    for method in ("kl", "mse", "max", "percentile9999"):
        assert threshold(method, np.zeros(2048, np.int64), 0.0, 10) == MIN_THRESHOLD


# -- streaming statistics ------------------------------------------------------------------------


def test_streaming_statistics_equal_the_whole_data_at_once():
    rng = np.random.default_rng(7)
    parts = [rng.standard_normal((2, 50)).astype(np.float32) * s for s in (1, 3, 0.5, 2)]
    parts[1][0, :5] = 0.0
    whole = np.concatenate([p.ravel() for p in parts])
    # Two workers' partial statistics, merged as the calibrator does.
    first, second = TensorRanges(), TensorRanges()
    for i, p in enumerate(parts):
        (first if i % 2 else second).add("t", p)
    first.merge(second)
    assert (first.low["t"], first.high["t"]) == (whole.min(), whole.max())
    total = TensorHistograms.for_ranges(first, 64)
    for p in parts:
        one = total.empty_copy()
        one.add("t", p)
        total.merge(one)
    expected, top, zeros = abs_histogram(whole, 64)
    assert top == first.abs_max("t")
    np.testing.assert_array_equal(total.counts["t"], expected)
    assert total.zeros["t"] == zeros == 5


def test_per_channel_ranges_stream_and_merge():
    rng = np.random.default_rng(8)
    parts = [rng.standard_normal((1, 3, 4, 5)).astype(np.float32) * [[[[1]], [[5]], [[0.1]]]] for _ in range(5)]
    first, second = TensorRanges(), TensorRanges()
    for i, p in enumerate(parts):
        (first if i % 2 else second).add("t", p)
        (first if i % 2 else second).add("rank3", p[0])  # [3, 4, 5]: channels along axis 1
        (first if i % 2 else second).add("last", p[0], axis=2)  # features-last: along axis 2
        (first if i % 2 else second).add("rank1", p.reshape(-1))  # rank 1: no channels
    first.merge(second)
    whole = np.concatenate(parts, axis=0)
    np.testing.assert_array_equal(first.channel_low["t"], whole.min(axis=(0, 2, 3)))
    np.testing.assert_array_equal(first.channel_high["t"], whole.max(axis=(0, 2, 3)))
    rank3 = np.stack([p[0] for p in parts])
    np.testing.assert_array_equal(first.channel_low["rank3"], rank3.min(axis=(0, 1, 3)))
    np.testing.assert_array_equal(first.channel_high["last"], rank3.max(axis=(0, 1, 2)))
    assert first.channel_axis == {"last": 2}
    assert "rank1" not in first.channel_low
    # A tensor whose channel count changes between samples gets none.
    first.add("t", rng.standard_normal((1, 4, 2, 2)).astype(np.float32))
    assert "t" not in first.channel_low and "t" in first.low


def test_statistics_leave_out_nonfinite_values_and_take_integers_as_floats():
    ranges = TensorRanges()
    ranges.add("f", np.array([1.0, np.inf, -2.0, np.nan], np.float32))
    ranges.add("i", np.array([3, -7], np.int64))
    assert (ranges.low["f"], ranges.high["f"]) == (-2.0, 1.0)
    assert ranges.nonfinite == {"f"} and ranges.integral == {"i"}
    hists = TensorHistograms.for_ranges(ranges, 4)
    hists.add("f", np.array([1.0, np.inf, -2.0, np.nan], np.float32))
    hists.add("i", np.array([3, -7], np.int64))
    np.testing.assert_array_equal(hists.counts["f"], [0, 0, 1, 1])  # bins of width 0.5
    np.testing.assert_array_equal(hists.counts["i"], [0, 1, 0, 1])  # bins of width 1.75


# -- the table format ----------------------------------------------------------------------------


def test_table_round_trip_and_format(tmp_path):
    table = CalibrationTable(
        [TableRow("images", 1.000008, 0.0, 1.000008), TableRow("122_Conv", 56.4281803, -102.5830231, 97.6811752)],
        histogram_bins=2048, samples=100, tune_num=5, method="kl",
    )
    write_table(tmp_path / "t", table)
    lines = (tmp_path / "t").read_text().splitlines()
    assert lines[0].startswith("# genetated time: ")
    assert lines[1:7] == [
        "# histogram number: 2048", "# sample number: 100", "# tune number: 5",
        "# quantization threshold calculation method: kl", "###", "# op_name    threshold    min    max",
    ]
    assert lines[7:] == ["images 1.0000080 0.0000000 1.0000080", "122_Conv 56.4281803 -102.5830231 97.6811752"]
    back = read_table(tmp_path / "t")
    assert back.rows == [
        TableRow("images", 1.000008, 0.0, 1.000008),
        TableRow("122_Conv", 56.4281803, -102.5830231, 97.6811752),
    ]
    assert (back.histogram_bins, back.samples, back.tune_num, back.method) == (2048, 100, 5, "kl")
    assert list(tmp_path.iterdir()) == [tmp_path / "t"]  # no temporary file left


def test_table_keeps_per_channel_ranges_in_comment_lines(tmp_path):
    table = CalibrationTable([TableRow("conv1", 2.0, -1.2, 2.1)], {"conv1": ([-1.2, -0.5, 0.0], [0.9, 2.1, 0.7])})
    write_table(tmp_path / "t", table)
    lines = (tmp_path / "t").read_text().splitlines()
    assert lines[-1] == "#channel conv1 3 -1.2000000 0.9000000 -0.5000000 2.1000000 0.0000000 0.7000000"
    # Readers that skip comments (TPU-MLIR's) see the per-tensor table alone.
    assert [line for line in lines if not line.startswith("#")] == ["conv1 2.0000000 -1.2000000 2.1000000"]
    back = read_table(tmp_path / "t")
    assert back.channels == {"conv1": ([-1.2, -0.5, 0.0], [0.9, 2.1, 0.7])}


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("conv 1.0 2.0", "expected 'name threshold min max', got 3 field(s)"),
        ("conv 1.0 -1.0 1.0 extra", "got 5 field(s)"),
        ("conv one -1.0 1.0", "must be numbers"),
        ("conv nan -1.0 1.0", "non-finite"),
        ("conv 0.0 -1.0 1.0", "threshold 0.0; it must be positive"),
        ("conv 1.0 2.0 1.0", "min 2.0 above max 1.0"),
        ("relu 1.0 0.0 1.0", "'relu' is listed twice (first on line 3)"),
        ("#channel relu 2 0.0 1.0", "'relu' has 2 per-channel values for 2 channels"),
        ("#channel relu two 0.0 1.0", "expected '#channel name channels min max ...'"),
        ("#channel relu 1 0.0 inf", "non-finite per-channel value"),
    ],
)
def test_table_reader_names_file_and_line(tmp_path, line, fragment):
    path = tmp_path / "cali"
    path.write_text(f"# genetated time: x\n###\nrelu 1.0 0.0 1.0\n\n{line}\n")
    with pytest.raises(CalibrationTableError) as e:
        read_table(path)
    assert f"{path}:5: " in str(e.value) and fragment in str(e.value)


def test_table_reader_rejects_empty_and_missing_files(tmp_path):
    (tmp_path / "empty").write_text("# only comments\n")
    with pytest.raises(CalibrationTableError, match="no tensor rows"):
        read_table(tmp_path / "empty")
    with pytest.raises(CalibrationTableError, match="cannot read"):
        read_table(tmp_path / "missing")


def test_table_writer_refuses_names_with_spaces(tmp_path):
    with pytest.raises(CalibrationTableError, match="whitespace"):
        write_table(tmp_path / "t", CalibrationTable([TableRow("a b", 1.0, 0.0, 1.0)]))
    assert not list(tmp_path.iterdir())


# -- datasets ------------------------------------------------------------------------------------


def test_dataset_folder_takes_the_first_samples_in_name_order(tmp_path):
    from tpu_xdsl.calibration.dataset import Dataset

    for name in ("b.npz", "a.npy", "c.png", ".hidden.npz", "notes.txt", "d.npz"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub.npz").mkdir()
    assert [p.name for p in Dataset.from_dir(tmp_path, 3).paths] == ["a.npy", "b.npz", "c.png"]
    assert [p.name for p in Dataset.from_dir(tmp_path, 100).paths] == ["a.npy", "b.npz", "c.png", "d.npz"]


def test_data_list_keeps_its_order_and_skips_comments(tmp_path, monkeypatch):
    from tpu_xdsl.calibration.dataset import Dataset

    (tmp_path / "d").mkdir()
    for name in ("x.npz", "y.npz", "z.npz"):
        (tmp_path / "d" / name).write_bytes(b"")
    listing = tmp_path / "d" / "list.txt"
    listing.write_text(f"# samples\nz.npz\n\n{tmp_path / 'd' / 'x.npz'}  # absolute\ny.npz\n")
    monkeypatch.chdir(tmp_path)
    assert [p.name for p in Dataset.from_list(listing, 10).paths] == ["z.npz", "x.npz", "y.npz"]
    assert [p.name for p in Dataset.from_list(listing, 2).paths] == ["z.npz", "x.npz"]


# -- the calibrate command -----------------------------------------------------------------------


def onnxruntime_ranges(onnx_path: Path, samples: list[np.ndarray]) -> dict[str, tuple[float, float]]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(onnx_path))
    names = [o.name for o in session.get_outputs()]
    low: dict[str, float] = {"x": min(float(s.min()) for s in samples)}
    high: dict[str, float] = {"x": max(float(s.max()) for s in samples)}
    for x in samples:
        for name, output in zip(names, session.run(None, {"x": x}), strict=True):
            value = np.asarray(output)
            low[name] = min(low.get(name, np.inf), float(value.min()))
            high[name] = max(high.get(name, -np.inf), float(value.max()))
    return {n: (low[n], high[n]) for n in low}


@pytest.mark.parametrize("method", ["kl", "mse", "max", "percentile9999"])
def test_calibrate_writes_one_row_per_tensor_with_true_ranges(small, tmp_path, capsys, method):
    mlir, data, samples = small
    out = tmp_path / "small_cali_table"
    code, stdout, err = cli(capsys, "calibrate", str(mlir), "--dataset", str(data), "--input-num", "5",
                            "--method", method, "--jobs", "1", "-o", str(out))
    assert code == 0, err
    assert f"calibrated 9 tensors on 5 samples with {method}" in stdout
    table = read_table(out)
    assert (table.samples, table.histogram_bins, table.tune_num, table.method) == (5, 2048, 0, method)
    rows = table.by_name()
    assert set(rows) == tensor_names_of(mlir) and len(rows) == len(table.rows)
    assert set(rows) == {"x", "conv", "relu", "pool", "flat", "mm", "logits", "prob", "twice"}
    # The first 5 samples in name order: the outlier s5 is left out.
    expected = onnxruntime_ranges(tmp_path / "small.onnx", samples[:5])
    for name, row in rows.items():
        low, high = expected[name]
        assert row.min == pytest.approx(low, rel=1e-5, abs=1e-6), name
        assert row.max == pytest.approx(high, rel=1e-5, abs=1e-6), name
        abs_max = max(abs(row.min), abs(row.max))
        assert 0 < row.threshold <= abs_max * (1 + 1e-6) + 1e-7, name
        if method == "max":
            assert row.threshold == pytest.approx(abs_max, abs=2e-7), name


def test_calibrate_in_two_processes_gives_the_same_table(small, tmp_path):
    mlir, data, _ = small
    for jobs in ("1", "2"):
        result = run_cli(
            "calibrate", str(mlir), "--dataset", str(data), "--jobs", jobs, "-o", str(tmp_path / f"t{jobs}")
        )
        assert result.returncode == 0, result.stderr
        assert "calibrated 9 tensors on 6 samples (only 6 found)" in result.stdout
    one, two = read_table(tmp_path / "t1"), read_table(tmp_path / "t2")
    for a, b in zip(one.rows, two.rows, strict=True):
        assert a.name == b.name
        np.testing.assert_allclose([a.threshold, a.min, a.max], [b.threshold, b.min, b.max], rtol=1e-6, atol=1e-7)


def test_max_reads_one_pass_and_keeps_the_floor(tmp_path):
    """The max method needs no histogram: one pass over the samples, each tensor's
    finite abs-max, and MIN_THRESHOLD for an all-zero tensor (as for an empty histogram)."""
    from tpu_xdsl.calibration.calibrator import Options, calibrate
    from tpu_xdsl.calibration.dataset import Dataset

    graph = helper.make_graph(
        [helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["n"]),
         helper.make_node("Relu", ["n"], ["zero"])], "zeros",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("zero", TensorProto.FLOAT, [1, 2, 4, 4])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), tmp_path / "m.onnx")
    mlir = save_top(tmp_path / "m.onnx", tmp_path / "m.mlir")
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(5)
    samples = [rng.standard_normal((1, 2, 4, 4)).astype(np.float32) * (i + 1) for i in range(3)]
    for i, x in enumerate(samples):
        np.save(data / f"{i}.npy", x)
    passes: list[str] = []

    def progress(description: str, total: int):
        passes.append(description)
        return lambda n: None

    rows = calibrate(mlir, Dataset.from_dir(data, 3), Options(method="max"), progress).table.by_name()
    assert passes == ["pass 1/1: ranges"]
    top = max(float(np.abs(x).max()) for x in samples)
    assert rows["x"].threshold == rows["a"].threshold == rows["n"].threshold == top
    assert (rows["zero"].threshold, rows["zero"].min, rows["zero"].max) == (MIN_THRESHOLD, 0.0, 0.0)


def test_one_process_reads_each_sample_once_and_gets_the_same_table(small, monkeypatch):
    """Pass 2 reuses the inputs pass 1 loaded (up to KEPT_INPUT_BYTES): the statistics are
    those of reading every sample again."""
    from tpu_xdsl.calibration import calibrator
    from tpu_xdsl.calibration.dataset import Dataset

    mlir, data, _ = small
    dataset = Dataset.from_dir(data, 6)
    loads: list[Path] = []
    load = calibrator.SampleLoader.load

    def counted(self, path: Path):
        loads.append(path)
        return load(self, path)

    monkeypatch.setattr(calibrator.SampleLoader, "load", counted)
    kept = calibrator.calibrate(mlir, dataset, calibrator.Options(method="kl")).table
    assert loads == list(dataset.paths)
    monkeypatch.setattr(calibrator, "KEPT_INPUT_BYTES", 0)
    reread = calibrator.calibrate(mlir, dataset, calibrator.Options(method="kl")).table
    assert loads == 3 * list(dataset.paths)
    assert (kept.rows, kept.channels) == (reread.rows, reread.channels)


@pytest.mark.parametrize("method", ["kl", "mse", "max", "percentile9999"])
def test_each_method_on_a_known_distribution(tmp_path, capsys, method):
    """The input tensor's row, for Laplace samples with a few outliers, against independent answers."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "id",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 64, 64])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), tmp_path / "m.onnx")
    mlir = save_top(tmp_path / "m.onnx", tmp_path / "m.mlir")
    rng = np.random.default_rng(11)
    data = tmp_path / "data"
    data.mkdir()
    samples = []
    for i in range(4):
        x = rng.laplace(size=(1, 4, 64, 64)).astype(np.float32)
        x.flat[rng.integers(0, x.size, 3)] = rng.uniform(30, 60, 3)
        np.save(data / f"{i}.npy", x)
        samples.append(x)
    out = tmp_path / "table"
    code, _, err = cli(
        capsys, "calibrate", str(mlir), "--dataset", str(data), "--method", method, "--jobs", "1", "-o", str(out)
    )
    assert code == 0, err
    got = read_table(out).by_name()["x"].threshold
    x = np.concatenate([s.ravel() for s in samples]).astype(np.float64)
    hist, top, _ = abs_histogram(x, 2048)
    width = top / 2048
    if method == "max":
        assert got == pytest.approx(top, abs=1e-6)
    elif method == "percentile9999":
        # Between the order statistics around rank 0.9999 (n - 1), to a bin.
        ordered = np.sort(np.abs(x))
        rank = 0.9999 * (x.size - 1)
        assert ordered[int(np.floor(rank))] - width <= got <= ordered[int(np.ceil(rank))] + width
    elif method == "kl":
        best = int(np.argmin(reference_kl(hist))) + KL_LEVELS
        assert got == pytest.approx((best + 0.5) * width, abs=width)
        assert got < top / 3  # the outliers are clipped
    else:
        grid = np.linspace(top / 512, top, 512)
        assert quantization_error(x, got) <= 1.005 * min(quantization_error(x, g) for g in grid)


def test_calibrate_images_through_the_recorded_preprocessing(tmp_path, capsys):
    from PIL import Image

    from tpu_xdsl.frontend.preprocess import Preprocess

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "id",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 6, 5])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), tmp_path / "m.onnx")
    mlir = save_top(tmp_path / "m.onnx", tmp_path / "m.mlir",
                    Preprocess(mean=[10, 20, 30], scale=[0.5, 0.25, 2.0], pixel_format="rgb"))
    images = tmp_path / "images"
    images.mkdir()
    rng = np.random.default_rng(2)
    pixels = [rng.integers(0, 256, (6, 5, 3), dtype=np.uint8) for _ in range(3)]
    for i, p in enumerate(pixels):
        Image.fromarray(p).save(images / f"{i}.png")
    # A grayscale photo feeds an RGB model as three equal channels, as for `transform --test-input`.
    gray = rng.integers(0, 256, (6, 5), dtype=np.uint8)
    Image.fromarray(gray).save(images / "3.png")
    pixels.append(np.repeat(gray[:, :, None], 3, axis=2))
    code, _, err = cli(
        capsys, "calibrate", str(mlir), "--dataset", str(images), "--jobs", "1", "-o", str(tmp_path / "t")
    )
    assert code == 0, err
    normalized = [(p.astype(np.float32) - [10, 20, 30]) * [0.5, 0.25, 2.0] for p in pixels]
    row = read_table(tmp_path / "t").by_name()["x"]
    assert row.min == pytest.approx(min(n.min() for n in normalized))
    assert row.max == pytest.approx(max(n.max() for n in normalized))


def test_auto_tune_never_picks_a_worse_threshold(tmp_path):
    """x -> matmul -> relu (h) -> matmul -> y, calibrated with `max` on heavy-tailed inputs;
    the tuned thresholds are checked with a numpy forward pass that fake-quantizes h."""
    from tpu_xdsl.calibration.calibrator import Options, calibrate
    from tpu_xdsl.calibration.dataset import Dataset
    from tpu_xdsl.calibration.tune import TUNE_SAMPLES

    rng = np.random.default_rng(4)
    w1 = rng.standard_normal((16, 32)).astype(np.float32)
    w2 = rng.standard_normal((32, 8)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["pre"]), helper.make_node("Relu", ["pre"], ["h"]),
         helper.make_node("MatMul", ["h", "w2"], ["y"])],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), tmp_path / "m.onnx")
    mlir = save_top(tmp_path / "m.onnx", tmp_path / "m.mlir")
    data = tmp_path / "data"
    data.mkdir()
    samples = []
    for i in range(8):
        x = rng.standard_t(2, (4, 16)).astype(np.float32)
        np.savez(data / f"{i}.npz", x=x)
        samples.append(x)
    result = calibrate(mlir, Dataset.from_dir(data, 8), Options(method="max", tune_num=3))
    assert result.tuned and all(t.name in {"x", "pre", "h", "y"} for t in result.tuned)
    rows = result.table.by_name()

    def fq(v, t):
        return np.clip(np.round(v / (t / 127)), -127, 127) * (t / 127)

    def cos(a, b):
        return float(np.sum(a * b) / np.linalg.norm(a) / np.linalg.norm(b))

    def forward(x, name=None, t=None):
        tensors = {"x": x.astype(np.float64)}
        q = (lambda n, v: fq(v, t) if n == name else v)
        tensors["x"] = q("x", tensors["x"])
        tensors["pre"] = q("pre", tensors["x"] @ w1)
        tensors["h"] = q("h", np.maximum(tensors["pre"], 0))
        return q("y", tensors["h"] @ w2)

    tune_samples = samples[:TUNE_SAMPLES]
    improved = 0
    for t in result.tuned:
        assert rows[t.name].threshold == t.chosen
        assert t.default == pytest.approx(max(abs(rows[t.name].min), abs(rows[t.name].max)), rel=1e-6)
        score = {
            th: np.mean([cos(forward(x, t.name, th), forward(x)) for x in tune_samples]) for th in (t.default, t.chosen)
        }
        assert score[t.chosen] >= score[t.default] - 1e-9, t
        assert score[t.chosen] == pytest.approx(t.chosen_cosine, abs=1e-5)
        improved += score[t.chosen] > score[t.default] + 1e-6
    assert improved >= 1  # max thresholds on t(2) data leave room to improve


def test_calibrate_reports_tuning_and_records_the_tune_number(small, tmp_path, capsys):
    mlir, data, _ = small
    code, stdout, err = cli(capsys, "calibrate", str(mlir), "--dataset", str(data), "--method", "max",
                            "--tune-num", "2", "--jobs", "1", "-o", str(tmp_path / "t"))
    assert code == 0, err
    assert stdout.count("tuned ") == 2
    assert read_table(tmp_path / "t").tune_num == 2


# -- bad input ----------------------------------------------------------------------------------------


def _no_table(folder: Path) -> None:
    leftovers = [p.name for p in folder.iterdir() if p.name.startswith(("out", ".out"))]
    assert not leftovers, leftovers


def test_bad_flags_and_modules(small, tmp_path, capsys):
    mlir, data, _ = small
    out = str(tmp_path / "out")
    base = [str(mlir), "--dataset", str(data), "--jobs", "1", "-o", out]
    cases = [
        (["--input-num", "0"], ["--input-num 0", "at least 1 sample"]),
        (["--method", "entropy"], ["--method 'entropy'", "kl, mse, max, percentile9999"]),
        (["--histogram-bins", "100"], ["--histogram-bins 100", "give 128 to 65536"]),
        (["--tune-num", "-1"], ["--tune-num -1"]),
        (["--data-list", str(data / "s0.npz")], ["exactly one of --dataset DIR or --data-list FILE"]),
    ]
    for extra, fragments in cases:
        code, _, err = cli(capsys, "calibrate", *base, *extra)
        assert_one_line_error(code, err, *fragments)
    code, _, err = cli(capsys, "calibrate", str(mlir), "-o", out)
    assert_one_line_error(code, err, "exactly one of --dataset DIR or --data-list FILE")
    code, _, err = cli(capsys, "calibrate", *base[:-1], str(tmp_path / "no" / "out"))
    assert_one_line_error(code, err, "does not exist")
    # A lowered module, and one without TOP ops.
    lowered = tmp_path / "lowered.mlir"
    lowered.write_text(mlir.read_text().replace('"TOP_F32"', '"TPU_LOWERED"'))
    code, _, err = cli(capsys, "calibrate", str(lowered), *base[1:])
    assert_one_line_error(code, err, "lowered.mlir", "module.state is TPU_LOWERED, not TOP_F32")
    plain = tmp_path / "plain.mlir"
    plain.write_text("builtin.module {\n  func.func @main() {\n    func.return\n  }\n}\n")
    code, _, err = cli(capsys, "calibrate", str(plain), *base[1:])
    assert_one_line_error(code, err, "plain.mlir", "has no TOP ops")
    _no_table(tmp_path)


def test_bad_datasets(small, tmp_path, capsys):
    mlir, _, _ = small
    out = str(tmp_path / "out")

    def calibrate_on(*source: str) -> tuple[int, str]:
        code, _, err = cli(capsys, "calibrate", str(mlir), *source, "--jobs", "1", "-o", out)
        return code, err

    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_error(*calibrate_on("--dataset", str(empty)), f"--dataset {empty}", "the folder is empty")
    assert_one_line_error(*calibrate_on("--dataset", str(tmp_path / "nowhere")), "no such folder")
    assert_one_line_error(*calibrate_on("--dataset", str(mlir)), "not a folder")
    useless = tmp_path / "useless"
    useless.mkdir()
    (useless / "readme.txt").write_text("hi")
    assert_one_line_error(*calibrate_on("--dataset", str(useless)), "none of its 1 entries is usable", ".npz/.npy")
    shapes = tmp_path / "shapes"
    shapes.mkdir()
    np.savez(shapes / "a.npz", x=np.zeros((1, 3, 8, 8), np.float32))
    np.savez(shapes / "b.npz", x=np.zeros((1, 3, 4, 4), np.float32))
    assert_one_line_error(*calibrate_on("--dataset", str(shapes)), "b.npz", "input 'x' has shape [1, 3, 4, 4]",
                          "[1, 3, 8, 8]")
    dtypes = tmp_path / "dtypes"
    dtypes.mkdir()
    np.save(dtypes / "a.npy", np.zeros((1, 3, 8, 8), np.int32))
    assert_one_line_error(*calibrate_on("--dataset", str(dtypes)), "a.npy", "dtype int32", "float32")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "a.npz").write_bytes(b"not a zip")
    assert_one_line_error(*calibrate_on("--dataset", str(broken)), "a.npz", "cannot read inputs")
    listing = tmp_path / "list.txt"
    listing.write_text("# one sample\nshapes/a.npz\nmissing.npz\n")
    assert_one_line_error(*calibrate_on("--data-list", str(listing)), f"{listing}:3", "missing.npz: no such file")
    listing.write_text("# nothing\n\n")
    assert_one_line_error(*calibrate_on("--data-list", str(listing)), "the list names no sample")
    assert_one_line_error(*calibrate_on("--data-list", str(tmp_path / "nolist.txt")), "cannot read the list")
    _no_table(tmp_path)


def test_images_of_the_wrong_channel_count(tmp_path, capsys):
    from PIL import Image

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "gray",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 4])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), tmp_path / "m.onnx")
    mlir = save_top(tmp_path / "m.onnx", tmp_path / "m.mlir")  # default preprocessing: bgr, 3 channels
    images = tmp_path / "images"
    images.mkdir()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(images / "a.png")
    code, _, err = cli(capsys, "calibrate", str(mlir), "--dataset", str(images), "-o", str(tmp_path / "out"))
    assert_one_line_error(code, err, "a.png", "has 1 channel(s)", "pixel format bgr have 3")
    _no_table(tmp_path)


def test_a_failing_sample_late_in_the_run_leaves_no_table(small, tmp_path):
    mlir, data, _ = small
    (data / "s9.npz").write_bytes(b"broken")
    result = run_cli("calibrate", str(mlir), "--dataset", str(data), "--jobs", "2", "-o", str(tmp_path / "out"))
    assert_one_line_error(result.returncode, result.stderr, "s9.npz", "cannot read inputs")
    _no_table(tmp_path)


def test_kl_on_a_comb_of_few_values_does_not_clip_them():
    # scikit-learn's digits: pixels k/16. KL's divergence is 0 at the candidate just past
    # the first tooth (everything folds into one spike), which would clip 94 % of the
    # values to 1/16; the threshold must keep the range (regression: INT8 cosine 0.31).
    values = np.random.default_rng(0).integers(0, 17, 20_000) / 16.0
    hist, top, zeros = abs_histogram(values, 2048)
    assert kl_divergences(hist).min() == 0.0
    t = threshold("kl", hist, top, zeros)
    assert t >= 0.9 * top
