"""Time loading the TOP and TPU dialects from IRDL, in fresh interpreters.

Prints a table: median and worst over N runs of (a) importing xDSL's builtin
and irdl dialects, which every xDSL tool pays anyway, and (b) building TOP and
TPU from the IRDL files on top of that, cold (an empty parse cache: the IRDL
text goes through xDSL's parser) and warm (the parsed definitions come from
the cache, as on every run after the first). Target: (b) < 1 s.

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
    import os
    import tempfile

    xdsl_times, cold_times, warm_times = [], [], []
    counts = ""
    with tempfile.TemporaryDirectory() as warm_cache:
        for run in range(args.runs + 1):
            for times, cache in ((cold_times, None), (warm_times, warm_cache)):
                with tempfile.TemporaryDirectory() as cold_cache:
                    env = dict(os.environ, TPU_XDSL_CACHE=cache or cold_cache)
                    out = subprocess.run(
                        [sys.executable, "-c", PROBE], check=True, capture_output=True, text=True, env=env
                    ).stdout.split()
                if run == 0:
                    continue  # the first warm run fills the cache
                xdsl_times.append(float(out[0]))
                times.append(float(out[1]))
                counts = f"TOP {out[2]} ops, TPU {out[3]} ops, {out[4]} attributes/types"
    print(f"dialects: {counts}; {args.runs} fresh interpreters each")
    print(f"{'step':<46} {'median s':>9} {'worst s':>9}")
    for name, times in (
        ("import xDSL builtin + irdl + parser", xdsl_times),
        ("build TOP + TPU from IRDL, cold (target < 1)", cold_times),
        ("build TOP + TPU from IRDL, warm (target < 1)", warm_times),
    ):
        print(f"{name:<46} {statistics.median(times):>9.3f} {max(times):>9.3f}")
    return 0 if max(cold_times + warm_times) < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
