"""`tpu-opt`: xdsl-opt with the TOP and TPU dialects and the project's passes.

Errors in the input (parse or verification) print xDSL's diagnostic, the
offending op marked, and exit with code 2; `--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from tpu_xdsl.errors import EXIT_INTERNAL, TpuXdslError, internal_error_line
from tpu_xdsl.universe import TPU_XDSL_UNIVERSE
from tpu_xdsl.weights import attach_weights, save_weights, weights_of


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
        arg_parser.add_argument(
            "--weight-file",
            help="weights (.npz) of the input module, instead of the file its "
            "module.weight_file attribute names beside the input",
        )
        arg_parser.add_argument(
            "--weight-output",
            help="where to write the weights when passes change them "
            "(default: beside -o as <output>_weights.npz)",
        )

    def apply_passes(self, prog: ModuleOp) -> None:
        """Attach the module's weights, run the passes, save weights the passes changed."""
        if self.args.weight_file:
            attach_weights(prog, dict(np.load(self.args.weight_file, allow_pickle=False)))
        else:
            base = Path(self.args.input_file).parent if self.args.input_file else Path.cwd()
            attach_weights(prog, base_dir=base)
        super().apply_passes(prog)
        if not weights_of(prog).changed:
            return
        target = self.args.weight_output
        if target is None and self.args.output_file:
            out = Path(self.args.output_file)
            target = out.with_name(f"{out.stem}_weights.npz")
        if target is None:
            print(
                "tpu-opt: warning: passes changed the weights; pass -o or "
                "--weight-output to save them",
                file=sys.stderr,
            )
            return
        save_weights(prog, target)


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
    except Exception as e:
        if debug:
            raise
        print(internal_error_line("tpu-opt", e), file=sys.stderr)
        return EXIT_INTERNAL
    return 0


if __name__ == "__main__":
    sys.exit(main())
