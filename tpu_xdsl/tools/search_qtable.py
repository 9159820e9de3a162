"""`tpu-xdsl search-qtable`: the fewest ops to leave INT8 for a target accuracy (TPU-MLIR's
run_sensitive_layer and search_qtable).

    tpu-xdsl search-qtable N.mlir --calibration-table T --dataset DIR [--input-num K] [--hardest-of P] \\
        --chip C [--target-cosine 0.99] [--mode INT8|BF16|F16] [--float-mode F16|BF16|F32] \\
        [--max-float-ops N] [--min-conv-share S] [--confidence 0.95] [--check-num M] [--jobs J] \\
        [--cluster ray://HOST:PORT|auto] -o N_qtable

Prints each op's sensitivity (worst first) and writes a quantize table that `tpu-xdsl deploy
--quantize INT8 --quantize-table N_qtable` reads. With --check-num M, the table is also run on
the M samples after the first K, which the search did not see, and their mean cosine is
printed and written into the table's header: a table that holds on its samples and not on
these asks for more samples like these. With --hardest-of P, the search runs on the K samples,
of the first P, where every op in --mode does worst (and --check-num takes the samples after
those P): a table that holds on the hard samples holds on the others. The algorithm is in
`tpu_xdsl.calibration.qtable_search`. Exit codes: 0 written, 1 the target cannot be met (one
line naming the best cosine reached; nothing written), 2 unusable flags or inputs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.files import write_atomic
from tpu_xdsl.outputs import check_output_path, check_paths, module_inputs, named, sample_inputs, writes_outputs

if TYPE_CHECKING:
    from tpu_xdsl.calibration.qtable_search import HeldOut


class SearchUsageError(TpuXdslError):
    """A `search-qtable` flag or input is unusable."""


DEFAULT_FLOAT_MODES = ("F16", "BF16", "F32")  # TPU-MLIR's "auto": the chip's fast float mode
PRECISION = ("INT8", "BF16", "F16", "F32")  # least to most precise
DEFAULT_CONFIDENCE = 0.95  # qtable_search.DEFAULT_CONFIDENCE, without importing xDSL to build the parser
DEFAULT_TARGET_COSINE = 0.99


def add_parser(subparsers) -> argparse.ArgumentParser:
    s = subparsers.add_parser(
        "search-qtable", help="per-op sensitivity and the fewest float ops that meet a target cosine -> quantize table"
    )
    s.add_argument("model", help="the TOP .mlir written by tpu-xdsl transform")
    s.add_argument("--calibration-table", help="the table tpu-xdsl calibrate wrote "
                                               "(not needed for pre-quantized models)")
    s.add_argument("--dataset", help="a folder of images or .npz/.npy samples (sorted by name)")
    s.add_argument("--data-list", help="a text file naming one sample per line (# comments)")
    s.add_argument("--input-num", type=int, default=24, help="search on the first K samples (default 24)")
    s.add_argument("--hardest-of", type=int, metavar="P",
                   help="search on the --input-num samples, of the first P, where every op in --mode is furthest from "
                        "F32 (one run per sample to rank them): the table then holds on samples the search did not "
                        "see; P >= --input-num")
    s.add_argument("--check-num", type=int, default=0,
                   help="then run the table on the next M samples, which the search did not see, and report "
                        "their mean cosine (default 0: no check)")
    s.add_argument("--chip", default="bm1684x", help="the chip (default bm1684x)")
    s.add_argument("--target-cosine", type=float, default=DEFAULT_TARGET_COSINE,
                   help="final-output cosine against TOP (F32) to reach, by the lower --confidence bound of its "
                        "mean over the samples (default 0.99)")
    s.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE,
                   help="the target holds for the lower one-sided bound of the mean at this confidence, so it "
                        "holds on samples the search did not see (default 0.95; 0.5: the mean over the samples)")
    s.add_argument("--mode", default="INT8", help="the mode the model deploys in: INT8 (default), or BF16/F16 to find "
                                                  "the ops that need a more precise float mode")
    s.add_argument("--float-mode", help="the mode of the ops taken out of --mode (default for INT8: F16 where the chip "
                                        "has it, else BF16; for BF16 and F16: F32)")
    s.add_argument("--max-float-ops", type=int, help="at most this many ops in float")
    s.add_argument("--min-conv-share", type=float, metavar="S",
                   help="keep at least this share of the conv, deconv and matmul ops in --mode (e.g. 0.75): only the "
                        "most sensitive of them may leave it; other ops may")
    s.add_argument("--stop-when-met", action="store_true",
                   help="when every op in --mode already meets the target, write a table with no op at once, without "
                        "the sensitivity pass (as TPU-MLIR's search_qtable stops); by default the sensitivity table is "
                        "printed anyway")
    s.add_argument("--asymmetric", action="store_true", help="search for asymmetric INT8 (deploy --asymmetric)")
    s.add_argument("--jobs", type=int, help="worker processes (default: 2 on 2+ cores)")
    s.add_argument("--cluster", help="run the candidates on a Ray cluster: ray://HOST:PORT, or auto for a running "
                                     "local one (pip install -e '.[cluster]')")
    s.add_argument("-o", "--output", required=True, help="the quantize table to write")
    s.set_defaults(func=run)
    return s


def check_args(args: argparse.Namespace):
    """The chip, the float mode and the paths, checked before any run; the chip's config."""
    from tpu_xdsl.device.chip import chip_config
    from tpu_xdsl.limits import MAX_JOBS

    if (args.dataset is None) == (args.data_list is None):
        raise SearchUsageError("give the samples with exactly one of --dataset DIR or --data-list FILE")
    if args.input_num < 1:
        raise SearchUsageError(f"--input-num {args.input_num}: search on at least 1 sample")
    if args.hardest_of is not None and args.hardest_of < args.input_num:
        raise SearchUsageError(f"--hardest-of {args.hardest_of}: give at least --input-num ({args.input_num}) "
                               "samples to choose the hardest from")
    if args.check_num < 0:
        raise SearchUsageError(f"--check-num {args.check_num}: give 0 (no check) or more samples")
    if not 0 < args.target_cosine <= 1:
        raise SearchUsageError(f"--target-cosine {args.target_cosine}: give a cosine in (0, 1], e.g. 0.99")
    if not 0.5 <= args.confidence < 1:
        raise SearchUsageError(f"--confidence {args.confidence}: give a level in [0.5, 1), e.g. 0.95 "
                               "(0.5: the plain mean over the samples)")
    if args.min_conv_share is not None and not 0 <= args.min_conv_share <= 1:
        raise SearchUsageError(f"--min-conv-share {args.min_conv_share}: give a share in [0, 1], e.g. 0.75")
    if args.max_float_ops is not None and args.max_float_ops < 0:
        raise SearchUsageError(f"--max-float-ops {args.max_float_ops}: give 0 or more")
    if args.jobs is not None and not 1 <= args.jobs <= MAX_JOBS:
        raise SearchUsageError(f"--jobs {args.jobs}: give 1 to {MAX_JOBS} worker processes")
    try:
        chip = chip_config(args.chip)
    except TpuXdslError as e:
        raise SearchUsageError(f"--chip {args.chip}: {e}") from e
    args.mode = args.mode.upper()
    if args.mode not in ("INT8", "BF16", "F16") or not chip.supports(args.mode):
        searchable = ", ".join(m for m in chip.modes if m != "F32")
        raise SearchUsageError(f"--mode {args.mode}: give a mode chip {chip.name} has below F32: {searchable}")
    if args.float_mode is None:
        default = DEFAULT_FLOAT_MODES if args.mode == "INT8" else ("F32",)
        args.float_mode = next((m for m in default if chip.supports(m)), "F32")
    args.float_mode = args.float_mode.upper()
    if args.float_mode not in DEFAULT_FLOAT_MODES or not chip.supports(args.float_mode):
        floats = ", ".join(m for m in chip.modes if m != "INT8")
        raise SearchUsageError(f"--float-mode {args.float_mode}: chip {chip.name} computes floats in {floats}")
    if PRECISION.index(args.float_mode) <= PRECISION.index(args.mode):
        raise SearchUsageError(f"--float-mode {args.float_mode}: give a mode more precise than --mode {args.mode}")
    output = Path(args.output)
    check_output_path("-o", args.output)
    for flag, given in (("the model", args.model), ("--calibration-table", args.calibration_table),
                        ("--data-list", args.data_list)):
        if given is not None and output.resolve() == Path(given).resolve():
            raise SearchUsageError(f"-o {args.output}: would overwrite {flag}; name the table {output.stem}_qtable")
    if args.calibration_table is not None and not Path(args.calibration_table).is_file():
        raise SearchUsageError(f"--calibration-table {args.calibration_table}: "
                               "no such file; tpu-xdsl calibrate writes it")
    return chip


def _progress(description: str, total: int):
    from tqdm import tqdm

    bar = tqdm(total=total or None, desc=description, unit="run", disable=None, leave=False, file=sys.stderr)

    def advance(n: int) -> None:
        bar.update(n)
        if total and bar.n >= total:
            bar.close()

    return advance


@writes_outputs
def run(args: argparse.Namespace) -> int:
    from tpu_xdsl.calibration.dataset import Dataset, SampleLoader
    from tpu_xdsl.calibration.model_scales import is_model_calibrated
    from tpu_xdsl.calibration.qtable_search import (
        TargetNotMet,
        check_table,
        format_qtable,
        format_sensitivity,
        format_worst_samples,
        hardest_samples,
        search_qtable,
    )
    from tpu_xdsl.calibration.table import read_table
    from tpu_xdsl.tools.calibrate import check_top_module, read_top_module
    from tpu_xdsl.workers import check_cluster, default_jobs

    chip = check_args(args)
    module = read_top_module(args.model)
    check_top_module(module, args.model)
    if args.mode == "INT8" and args.calibration_table is None and not is_model_calibrated(module):
        raise SearchUsageError("give --calibration-table: INT8 needs the ranges tpu-xdsl calibrate writes")
    if args.calibration_table is not None:
        read_table(args.calibration_table)  # a malformed table is a one-line error here, not in a worker
    pooled = args.input_num if args.hardest_of is None else args.hardest_of
    wanted = pooled + args.check_num
    dataset = (Dataset.from_dir(args.dataset, wanted) if args.dataset is not None
               else Dataset.from_list(args.data_list, wanted))
    pool, held_out = dataset.paths[:pooled], dataset.paths[pooled:]
    if args.check_num and not held_out:
        flag = "--input-num" if args.hardest_of is None else "--hardest-of"
        raise SearchUsageError(f"--check-num {args.check_num}: {dataset.source} has {len(dataset)} samples and the "
                               f"search takes the first {pooled}; add samples or lower {flag}")
    check_paths(
        [*module_inputs("the model", args.model, module), *named("--calibration-table", args.calibration_table),
         *named("--data-list", args.data_list), *sample_inputs("--dataset", args.dataset, dataset.paths),
         *sample_inputs("--data-list", args.data_list, dataset.paths)],
        named("-o", args.output),
    )
    dataset.check(module)
    loader = SampleLoader(module)
    for path in dataset.paths:  # a sample the model cannot take is said here in one line, not in a worker
        loader.load(path)
    if args.cluster:
        check_cluster(args.cluster)
    started = time.perf_counter()
    searched, chosen_from = pool, None
    if args.hardest_of is not None and len(pool) > args.input_num:
        ranking = hardest_samples(args.model, args.calibration_table, chip.name, pool, args.input_num, args.mode,
                                  asymmetric=args.asymmetric, jobs=args.jobs or default_jobs(), cluster=args.cluster,
                                  progress=_progress)
        searched, chosen_from = [pool[i] for i in ranking.chosen], len(pool)
        print(f"the {len(searched)} samples of {len(pool)} where every op {args.mode} does worst: cosine "
              f"{ranking.mean(ranking.chosen):.6f} on them, {ranking.mean():.6f} on all {len(pool)} (mean): "
              f"{' '.join(Path(p).name for p in searched)}", flush=True)

    # Fewer samples than asked widen the confidence bound the target is met by: said, as calibrate says it.
    fewer = f" (only {len(searched)} found; --input-num {args.input_num})" if len(searched) < args.input_num else ""

    def announce(all_mode: float, all_float: float, runs: str = "sensitivity runs") -> None:
        print(f"every op {args.mode}: cosine {all_mode:.6f}; every op {args.float_mode}: {all_float:.6f}; "
              f"target {args.target_cosine}; {runs} on {len(searched)} samples{fewer}", flush=True)

    try:
        result = search_qtable(
            args.model, args.calibration_table, chip.name, searched, args.target_cosine, args.float_mode,
            max_float_ops=args.max_float_ops, asymmetric=args.asymmetric, jobs=args.jobs or default_jobs(),
            cluster=args.cluster, module=module, progress=_progress, before_sensitivity=announce, mode=args.mode,
            confidence=args.confidence, min_conv_share=args.min_conv_share,
            sensitivity_when_met=not args.stop_when_met,
        )
    except TargetNotMet as e:
        print(f"tpu-xdsl search-qtable: {e}", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - started
    if result.sensitivities:
        for line in format_sensitivity(result):
            print(line)
    else:  # --stop-when-met, and every op in the mode meets the target
        announce(result.all_mode, result.all_float, "scored")
        print(f"every op {args.mode} meets the target: no op needs {args.float_mode} (--stop-when-met: no "
              "sensitivity pass)", flush=True)
    for line in format_worst_samples(result, [Path(p).name for p in searched]):
        print(line)
    check = None
    if held_out:
        check = check_table(args.model, args.calibration_table, chip.name, held_out, result, args.float_mode,
                            asymmetric=args.asymmetric, jobs=args.jobs or default_jobs(), cluster=args.cluster)
        print(held_out_line(check, result.mode, args.target_cosine, len(held_out), args.check_num))
    name = Path(args.model).stem
    text = format_qtable(result, name, chip.name, args.target_cosine, len(searched), args.float_mode,
                         args.confidence, check, chosen_from)
    write_atomic(args.output, lambda f: f.write(text))
    share = result.float_macs / result.total_macs if result.total_macs else 0.0
    convs = [s.candidate.name for s in result.sensitivities if s.candidate.is_conv]
    floated = {c.name for c in result.float_ops}
    counted = (f"{len(result.float_ops)} of {len(result.sensitivities)} ops in {args.float_mode} "
               f"({sum(1 for c in convs if c in floated)} of {len(convs)} convolutions, {share:.2%} of the MACs)"
               if result.sensitivities else f"no op in {args.float_mode}")
    print(f"{counted}: cosine "
          f"{result.all_mode:.6f} -> {result.score:.6f} (target {args.target_cosine}; mean {result.mean:.6f}); "
          f"{result.runs} runs in "
          f"{seconds:.0f} s; wrote {args.output}")
    return 0


def held_out_line(check: HeldOut, mode: str, target: float, given: int, asked: int) -> str:
    """What the table reads on the samples the search did not see, against the target."""
    fewer = f" (of {asked} asked: the dataset has no more)" if given < asked else ""
    if not check.count:
        return f"held out: no output to compare on the {given} samples the search did not see{fewer}"
    verdict = (f"meets the target {target}" if check.mean >= target else
               f"below the target {target}: the table holds less well beyond its samples; search on more samples "
               "like these")
    return (f"held out: on {check.count} samples the search did not see{fewer}, the table reads mean "
            f"{check.mean:.6f} (every op {mode}: {check.mode_mean:.6f}); {verdict}")
