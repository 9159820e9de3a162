"""`tpu-xdsl compare`: two `.npz` files of tensors by name (TPU-MLIR's npz_tool compare).

    tpu-xdsl compare reference.npz actual.npz [--tolerance C,E] [--names PATTERN] [--verbose]

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
    p.add_argument("reference", help="the reference tensors (.npz), e.g. TOP's from transform --test-result")
    p.add_argument("actual", help="the tensors to check (.npz), e.g. from tpu-xdsl run --dump-all")
    p.add_argument("--tolerance", default=DEFAULT_TOLERANCE,
                   help=f"min cosine,euclidean for float tensors (default {DEFAULT_TOLERANCE})")
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

    tolerance = Tolerance.parse(args.tolerance)
    reference, actual = read_npz(args.reference), read_npz(args.actual)
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
