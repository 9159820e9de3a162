"""`tpu-xdsl debug`: step through a model's stages side by side (in the spirit of TPU-MLIR's tdb).

    tpu-xdsl debug STAGE_FILE... --input FILE [--stage KIND] [--script FILE] [--tolerance C,E]

The stage files are any of the model's: the `.onnx`, the TOP `.mlir` (transform), the TPU
`.mlir` (deploy), the `.tpumodel` (deploy -o x.tpumodel) and the `.tosa.mlir` (export, run
by IREE: final outputs only). One of them is *stepped*, by
default the last in the flow: a TOP or TPU module op by op on the xDSL interpreter (a
listener holds the interpreter before each op), a `.tpumodel` instruction by instruction
on the device model (its program's steps, in simulated time). The other stages run whole
the first time a command needs them, and serve as references: each stage is checked
against the nearest loaded stage before it (ONNX < TOP < TPU < device), a TOSA export
against the stage it was exported from.

Commands (`help CMD` says more): run, step [n], next, continue, break, delete, where, list,
print, compare, diff, info, stage, quit. Tab completes commands and tensor names; the
history is kept in ~/.tpu_xdsl_history (or $TPU_XDSL_HISTORY). `--script FILE` runs the
commands in FILE, echoing each, for tests and bug reports; a command that fails makes the
exit code 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tpu_xdsl.errors import UsageError
from tpu_xdsl.inspect.debug import Session, run_script, run_terminal
from tpu_xdsl.inspect.stages import WHOLE_RUN_KINDS, Stage, check_feeds, load_stages, read_feeds
from tpu_xdsl.interp.compare import Tolerance


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "debug", help="step through a model's stages (ONNX, TOP, TPU, .tpumodel) and compare tensors as they appear"
    )
    p.add_argument("stages", nargs="+", metavar="STAGE_FILE",
                   help="the model's .onnx, TOP .mlir, TPU .mlir, .tpumodel and/or .tosa.mlir, any subset")
    p.add_argument("--input", required=True, help="the input: .npz by input name, .npy, or an image")
    p.add_argument("--stage", choices=("top", "tpu", "device"),
                   help="the stage to step (default: the last loaded in the flow)")
    p.add_argument("--script", metavar="FILE", help="run the commands in FILE instead of reading the terminal")
    p.add_argument("--tolerance", help="min cosine,euclidean for every stage pair (default: deploy's for each pair)")
    p.set_defaults(func=debug)


def stepped_stage(stages: list[Stage], kind: str | None) -> Stage:
    """The stage --stage names, by default the last loaded in the flow (ONNX and TOSA run whole)."""
    steppable = [s for s in stages if s.kind not in WHOLE_RUN_KINDS]
    if not steppable:
        raise UsageError("debug steps a TOP or TPU .mlir or a .tpumodel; give one besides the .onnx and .tosa.mlir")
    if not kind:
        return steppable[-1]
    chosen = [s for s in steppable if s.kind == kind]
    if not chosen:
        raise UsageError(f"--stage {kind}: no {kind} stage among the files given")
    return chosen[0]


def read_script(path: str) -> list[str]:
    """The lines of the --script file."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"--script {path}: no such file; give a file of debugger commands, one a line")
    try:
        return file.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--script {path}: cannot read it ({e})") from e


def debug(args: argparse.Namespace) -> int:
    stages = load_stages(args.stages)
    tolerance = Tolerance.parse(args.tolerance) if args.tolerance else None
    stepped = stepped_stage(stages, args.stage)
    script = read_script(args.script) if args.script else None
    feeds = read_feeds(args.input, stages)
    check_feeds(feeds, stages, args.input)
    session = Session(stages, feeds, stepped, tolerance)
    for stage in stages:
        print(stage.describe() + ("  [stepped]" if stage is stepped else ""))
    print(f"input {args.input}; 'help' lists the commands")
    failures: list[str] = []
    try:
        if script is not None:
            failures = run_script(session, script)
        else:
            run_terminal(session)
    finally:
        session.close()
    if failures:
        raise UsageError(f"--script {args.script}: {len(failures)} command(s) failed; first {failures[0]}")
    return 0
