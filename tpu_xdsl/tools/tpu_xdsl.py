"""`tpu-xdsl`: the end-to-end tool; each command lives in its own module of `tpu_xdsl.tools`
(info, check and list-ops, a few lines each, here).

Errors a user causes print one line and exit with code 2 (`--debug` shows
the traceback); a comparison below tolerance exits with code 1; a fault of
tpu-xdsl itself (any other exception) prints one line asking for a report and
exits with code 3, so a script never mistakes a crash for a tolerance failure.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tpu_xdsl.errors import EXIT_INTERNAL, TpuXdslError, internal_error_line, interrupted, traceback_if


def _info(args: argparse.Namespace) -> int:
    from tpu_xdsl.device.model_file import (
        instruction_lines,
        load_model,
        memory_map_lines,
        model_summary,
    )

    model = load_model(args.model)
    lines = [*model_summary(model), *memory_map_lines(model)]
    if args.instructions:
        lines += ["instructions:", *instruction_lines(model)]
    print("\n".join(lines))
    return 0


def _check(args: argparse.Namespace) -> int:
    """Parse and verify a TOP/TPU `.mlir` file and print it back."""
    from tpu_xdsl.ir_io import read_module, write_module

    module = read_module(args.file)
    write_module(module, sys.stdout, generic=args.generic)
    return 0


def _list_ops(args: argparse.Namespace) -> int:
    from tpu_xdsl.frontend.registry import RULES, load_all

    load_all()
    for op_type in sorted(RULES):
        ranges = ", ".join(f"{e.since}-{e.until or ''}" for e in RULES[op_type])
        print(f"{op_type:<28} opsets {ranges}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one line, as every other error (exit 2); the
    subcommands' parsers are of this class too."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help shows the usage)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tpu-xdsl", description="Deploy ONNX models to a TPU, checking every stage.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--max-tensor-bytes", metavar="SIZE",
                        help="refuse any tensor larger than this (e.g. 2G; default: a quarter of the available memory)")
    sub = parser.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="what a .tpumodel holds: chip, mode, I/O, instructions, memory map")
    info.add_argument("model", help="a .tpumodel file")
    info.add_argument("--instructions", action="store_true",
                      help="also list every instruction with its operands, and the coefficients' SHA-256")
    info.set_defaults(func=_info)

    check = sub.add_parser("check", help="parse, verify and print a .mlir file")
    check.add_argument("file", help="a TOP or TPU .mlir file")
    check.add_argument("--generic", action="store_true", help="print generic form")
    check.set_defaults(func=_check)

    from tpu_xdsl.tools import (
        calibrate,
        compare,
        debug,
        demo,
        deploy,
        export,
        report,
        run,
        search_qtable,
        transform,
    )

    transform.add_parser(sub)
    run.add_parser(sub)
    calibrate.add_parser(sub)
    search_qtable.add_parser(sub)
    deploy.add_parser(sub)
    export.add_parser(sub)
    compare.add_parser(sub)
    demo.add_parser(sub, main)  # the demo runs the other commands through main
    report.add_parser(sub)
    debug.add_parser(sub)

    ops = sub.add_parser("list-ops", help="ONNX op types the importer supports, with opset ranges")
    ops.set_defaults(func=_list_ops)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        from tpu_xdsl.limits import parse_size, set_max_tensor_bytes

        set_max_tensor_bytes(parse_size(args.max_tensor_bytes) if args.max_tensor_bytes else None)
        return args.func(args)
    except TpuXdslError as e:
        traceback_if(args.debug)
        print(f"tpu-xdsl: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        return interrupted("tpu-xdsl", e)
    except BrokenPipeError:  # the reader of our output went away (| head): not an error
        sys.stderr.close()
        return 0
    except Exception as e:  # noqa: BLE001 - the last resort: a fault of tpu-xdsl, one line and exit 3
        traceback_if(args.debug)
        print(internal_error_line(f"tpu-xdsl {args.command}", e), file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
