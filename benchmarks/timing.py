"""What the benchmark scripts share: the median wall time of a call."""

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
