"""`tpu-xdsl compare`: two `.npz` files of tensors by name (TPU-MLIR's npz_tool compare).

    tpu-xdsl compare reference.npz actual.npz [--tolerance C,E] [--names PATTERN] [--verbose]
    tpu-xdsl compare N.top.mlir N.tosa.mlir --input x.npz

Either file may be a stage file instead (`.onnx`, TOP or TPU `.mlir`, `.tpumodel`,
`.tosa.mlir`; `inspect.stages` loads it): it is run on `--input` and its tensors compared
(a `.tosa.mlir`'s final outputs, run by IREE). Two stage files compare to the tolerance
`debug` and `report` give the pair (a TOSA export against its source: F32 to cosine
0.99999), unless `--tolerance` says otherwise.

Every name in both files is compared (`interp.compare`): cosine, euclidean
similarity and SQNR against the first file, the largest absolute difference;
integer tensors must be equal. A shape that differs fails the tensor; a dtype
that differs is noted and the values compared as numbers. Without
`--verbose` only the failing tensors are listed. Exit code 0 when all pass,
1 when some fail, 2 when the input is unusable (a missing or unreadable file,
no name in common, a pattern no name matches).
"""

from __future__ import annotations

import argparse
import fnmatch
from pathlib import Path

import numpy as np

from tpu_xdsl.errors import TpuXdslError

DEFAULT_TOLERANCE = "0.99,0.99"


class CompareUsageError(TpuXdslError):
    """A `compare` argument is unusable."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("compare", help="compare two .npz files of tensors by name (cosine, euclidean, SQNR)")
    p.add_argument("reference", help="the reference tensors (.npz), e.g. TOP's from transform --test-result, "
                                     "or a stage file run on --input")
    p.add_argument("actual", help="the tensors to check (.npz), e.g. from tpu-xdsl run --dump-all, or a stage file "
                                  "(.onnx, .mlir, .tpumodel, .tosa.mlir) run on --input")
    p.add_argument("--input", help="what a stage file given instead of an .npz runs on (.npz, .npy or an image)")
    p.add_argument("--tolerance",
                   help=f"min cosine,euclidean for float tensors (default {DEFAULT_TOLERANCE}; for two stage "
                        "files, the pair's as debug and report check it)")
    p.add_argument("--names", help="compare only names matching this shell pattern, e.g. 'conv*'")
    p.add_argument("--verbose", action="store_true", help="list every tensor, not only the failing ones")
    p.add_argument("--dequant", metavar="TPU.mlir",
                   help="the TPU module the INT8 tensors come from: compare their real values (code x scale)")
    p.set_defaults(func=compare)
    return p


def read_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays of an .npz file, or a one-line error naming what is wrong with it."""
    from tpu_xdsl.npz import read_npz as read

    return read(path, "give an .npz of tensors by name")


def _is_npz(path: str) -> bool:
    return Path(path).suffix.lower() == ".npz"


def read_sides(args: argparse.Namespace):
    """The reference's and the actual tensors (an .npz read, a stage file run on --input) and
    the default tolerance: the stage pair's for two stage files, else DEFAULT_TOLERANCE."""
    from tpu_xdsl.interp.compare import Tolerance

    stage_files = [path for path in (args.reference, args.actual) if not _is_npz(path)]
    if args.input is None and stage_files:
        raise CompareUsageError(f"{stage_files[0]} is not an .npz: give --input FILE to run it as a stage, "
                                "or an .npz of its tensors")
    if args.input is not None and not stage_files:
        raise CompareUsageError("--input runs a stage file given instead of an .npz; both files are .npz here")
    if not stage_files:
        return read_npz(args.reference), read_npz(args.actual), Tolerance.parse(DEFAULT_TOLERANCE)
    # delays the stages' engines: two .npz files need none
    from tpu_xdsl.inspect.stages import align_feeds, check_feeds, default_tolerance, load_stage, read_feeds

    stages = {path: load_stage(path) for path in stage_files}
    loaded = list(stages.values())
    input_path = str(args.input)
    feeds = read_feeds(input_path, loaded)
    check_feeds(feeds, loaded, input_path)
    sides = [stages[path].run(align_feeds(feeds, stages[path])) if path in stages else read_npz(path)
             for path in (args.reference, args.actual)]
    tolerance = Tolerance.parse(DEFAULT_TOLERANCE)
    if len(loaded) == 2:
        tolerance = default_tolerance(*loaded)
    return sides[0], sides[1], tolerance


def _dequantize(path: str, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`tensors` with the INT8 ones of the TPU module at `path` turned into real values."""
    from tpu_xdsl.interp.runner import real_values
    from tpu_xdsl.ir_io import read_module
    from tpu_xdsl.weights import attach_weights

    module = read_module(path)
    state = module.attributes.get("module.state")
    if state is None or not str(state).strip('"').startswith("TPU"):
        raise CompareUsageError(f"--dequant {path}: module.state is {state}; give the TPU .mlir deploy wrote")
    attach_weights(module, base_dir=Path(path).parent)
    return real_values(module, tensors)


def compare(args: argparse.Namespace) -> int:
    from tpu_xdsl.interp.compare import (
        Tolerance,
        compare_tensors,
        format_table,
        summarize,
    )

    reference, actual, pair_tolerance = read_sides(args)
    tolerance = Tolerance.parse(args.tolerance) if args.tolerance else pair_tolerance
    common = [name for name in actual if name in reference]
    if not common:
        raise CompareUsageError(
            f"{args.reference} and {args.actual} have no tensor name in common "
            f"(e.g. {next(iter(reference), 'none')!r} and "
            f"{next(iter(actual), 'none')!r}): are they dumps of the same model?"
        )
    if args.names:
        common = [name for name in common if fnmatch.fnmatchcase(name, args.names)]
        if not common:
            raise CompareUsageError(f"--names {args.names!r} matches none of the {len(reference)} shared tensor names")
    if args.dequant:
        reference, actual = _dequantize(args.dequant, reference), _dequantize(args.dequant, actual)
    rows = [compare_tensors(name, reference[name], actual[name]) for name in common]
    notes = {
        name: f"dtype {actual[name].dtype} vs reference {reference[name].dtype}"
        for name in common if actual[name].dtype != reference[name].dtype
    }
    shown = rows if args.verbose else [r for r in rows if not r.passes(tolerance)]
    if shown:
        table = format_table(shown, tolerance, f"{args.reference} (reference) vs {args.actual}, by tensor name")
        print("\n".join(
            line + (f"  ({notes[line.split()[0]]})" if line.split() and line.split()[0] in notes else "")
            for line in table.splitlines()
        ))
    only = sorted(set(reference) ^ set(actual))
    if only:
        print(f"{len(only)} tensor(s) in only one file" + (f": {', '.join(only)}" if args.verbose else ""))
    if notes and not args.verbose:
        print(f"{len(notes)} tensor(s) differ in dtype, e.g. {next(iter(notes))}: {next(iter(notes.values()))}")
    if not args.dequant and any(actual[n].dtype.kind in "iu" and reference[n].dtype.kind == "f" for n in notes):
        print("integer codes against real values: give --dequant "
              "N.mlir (the TPU module) to compare what they stand for")
    ok, summary = summarize(rows, tolerance)
    print(summary)
    return 0 if ok else 1
