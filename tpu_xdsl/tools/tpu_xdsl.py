"""`tpu-xdsl`: the end-to-end tool (transform, calibrate, deploy, run, compare, debug)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tpu_xdsl.errors import TpuXdslError


def _check(args: argparse.Namespace) -> int:
    """Parse and verify a TOP/TPU `.mlir` file and print it back."""
    from tpu_xdsl.ir_io import read_module, write_module

    module = read_module(args.file)
    write_module(module, sys.stdout, generic=args.generic)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tpu-xdsl", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="parse, verify and print a .mlir file")
    check.add_argument("file", help="a TOP or TPU .mlir file")
    check.add_argument("--generic", action="store_true", help="print generic form")
    check.set_defaults(func=_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except TpuXdslError as e:
        if args.debug:
            raise
        print(f"tpu-xdsl: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
