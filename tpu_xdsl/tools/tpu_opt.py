"""`tpu-opt`: xdsl-opt with the TOP and TPU dialects and the project's passes.

Errors in the input (parse or verification) print xDSL's diagnostic, the
offending op marked, and exit with code 2; `--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.universe import TPU_XDSL_UNIVERSE


class TpuOptMain(xDSLOptMain):
    """xDSLOptMain that always knows the project's dialects and passes."""

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        for name, factory in TPU_XDSL_UNIVERSE.all_dialects.items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, factory in TPU_XDSL_UNIVERSE.all_passes.items():
            self.register_pass(name, factory)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--debug", action="store_true", help="show Python tracebacks on errors"
        )


def main(argv: Sequence[str] | None = None) -> int:
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        TpuOptMain(description="TPU-MLIR-style optimizer driver on xDSL", args=argv).run()
    except (ParseError, DiagnosticException) as e:
        if debug:
            raise
        print(f"tpu-opt: error: {e}", file=sys.stderr)
        return 2
    except (TpuXdslError, OSError) as e:
        if debug:
            raise
        print(f"tpu-opt: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
