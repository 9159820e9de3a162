"""Time loading the TOP and TPU dialects from IRDL, in fresh interpreters.

Prints a table: median and worst over N runs of (a) importing xDSL's builtin
and irdl dialects, which every xDSL tool pays anyway, and (b) building TOP and
TPU from the IRDL files on top of that. Target: (b) < 1 s.

    python benchmarks/load_dialects.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

PROBE = """
import time
t0 = time.perf_counter()
import xdsl.dialects.builtin, xdsl.dialects.irdl.irdl, xdsl.irdl, xdsl.parser
t1 = time.perf_counter()
from tpu_xdsl.dialects import Top, Tpu
t2 = time.perf_counter()
print(t1 - t0, t2 - t1, len(Top.operations), len(Tpu.operations), len(Top.attributes) + len(Tpu.attributes))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    xdsl_times, load_times = [], []
    counts = ""
    for _ in range(args.runs):
        out = subprocess.run(
            [sys.executable, "-c", PROBE], check=True, capture_output=True, text=True
        ).stdout.split()
        xdsl_times.append(float(out[0]))
        load_times.append(float(out[1]))
        counts = f"TOP {out[2]} ops, TPU {out[3]} ops, {out[4]} attributes/types"
    print(f"dialects: {counts}; {args.runs} fresh interpreters")
    print(f"{'step':<40} {'median s':>9} {'worst s':>9}")
    for name, times in (
        ("import xDSL builtin + irdl + parser", xdsl_times),
        ("build TOP + TPU from IRDL (target < 1)", load_times),
    ):
        print(f"{name:<40} {statistics.median(times):>9.3f} {max(times):>9.3f}")
    return 0 if max(load_times) < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
