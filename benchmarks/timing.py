"""What the benchmark scripts share: the median wall time of a call, and an interpreter's
per-op time outside its kernels."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def time_call(fn: Callable[[], object], repeat: int) -> float:
    """Median seconds of `repeat` runs of `fn` after one warm-up run."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def per_op_overhead(runner, feeds, repeat: int) -> tuple[int, float]:
    """(ops run, microseconds per op outside the kernels): the median over `repeat` runs
    of a run's time less its kernels' time (the execution plan times both), over the ops."""
    plan = runner.plan
    if plan is None:
        return 0, float("nan")
    args = runner.signature.arrange(feeds)
    outside = statistics.median(total - kernels for total, kernels in (plan.timed_run(args) for _ in range(repeat)))
    return plan.op_count, 1e6 * outside / plan.op_count
