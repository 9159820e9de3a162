"""`tpu-opt`: xdsl-opt with the TOP and TPU dialects and the project's passes.

Errors in the input print one line (a parse error: xDSL's diagnostic with the
offending text marked) and exit with code 2; `--debug` shows the traceback.
`-o` and the weights are written only once every pass has run: a failure
leaves no file behind.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from io import StringIO
from pathlib import Path
from typing import IO

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from tpu_xdsl.errors import EXIT_INTERNAL, TpuXdslError, internal_error_line, interrupted, traceback_if
from tpu_xdsl.files import write_atomic
from tpu_xdsl.ir_io import check_definitions, check_inputs
from tpu_xdsl.universe import TPU_XDSL_UNIVERSE, register_project_dialects
from tpu_xdsl.weights import attach_weights, used_weight_names, weights_of, write_npz_atomic


class _HeldOutput(StringIO):
    """The text for `-o`, kept until the run succeeds (xDSL closes its output stream)."""

    def close(self) -> None:
        pass


class TpuOptMain(xDSLOptMain):
    """xDSLOptMain that always knows the project's dialects and passes."""

    _held: _HeldOutput | None = None
    _weights_out: list[tuple[Path, dict[str, np.ndarray]]]

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        register_project_dialects(self.ctx)

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

    def run(self) -> None:
        """xDSL's run, then the files: weights first, then the module, each renamed into place."""
        self._weights_out = []
        self._check_paths()
        super().run()
        for target, arrays in self._weights_out:
            write_npz_atomic(target, arrays)
        if self._held is not None:
            text = self._held.getvalue()
            write_atomic(self.args.output_file, lambda f: f.write(text))

    def setup_pipeline(self) -> None:
        """xDSL's pipeline from `-p`; a name or argument it cannot take is a one-line error."""
        try:
            super().setup_pipeline()
        except (ValueError, TypeError, ArgSpecParseError) as e:  # ArgSpecParseError is a BaseException
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise TpuXdslError(f"-p {self.args.passes!r}: {reason}; tpu-opt --help lists the passes") from e

    def _check_paths(self) -> None:
        """Before anything is read: no output may be an input (the module, its weight file,
        --weight-file) or another output, and each must be a file in a writable folder."""
        from tpu_xdsl.outputs import Role, check_paths, module_inputs, named, weight_file_of

        output, weight_output = self.args.output_file, self.args.weight_output
        outputs = [*named("-o", output), *named("--weight-output", weight_output)]
        if output and not weight_output:  # where changed weights go
            outputs.append(Role("-o", weight_file_of(output), output, "the weight file"))
        source = self.args.input_file if self.args.input_file not in (None, "-") else None
        check_paths([*module_inputs("the input", source), *named("--weight-file", self.args.weight_file)], outputs)

    def prepare_input(self):
        try:
            return super().prepare_input()
        except ValueError as e:
            if "file extension" not in str(e):
                raise
            raise TpuXdslError(f"{self.args.input_file}: {e}; give a .mlir file") from e

    def prepare_output(self) -> IO[str]:
        if self.args.output_file is None:
            return sys.stdout
        self._held = _HeldOutput()
        return self._held

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        """Parse, then verify with the checks xDSL lacks (values defined before use)."""
        source = self.get_input_name()
        try:
            module = super().parse_chunk(chunk, file_extension, start_offset)
        except UnicodeDecodeError as e:
            raise TpuXdslError(
                f"{source}: not UTF-8 text (byte {e.start}); give a .mlir file as tpu-xdsl transform or tpu-opt "
                "wrote it"
            ) from e
        if module is not None and not self.args.disable_verify:
            # xDSL verifies the rest before the first pass (--verify-diagnostics prints that).
            check_definitions(module, source)
            check_inputs(module, source)
        return module

    def apply_passes(self, prog: ModuleOp) -> None:
        """Attach the module's weights, run the passes, keep the weights they changed for `run`."""
        if self.args.weight_file:
            attach_weights(prog, weight_file=self.args.weight_file)
        elif isinstance(attr := prog.attributes.get("module.weight_file"), StringAttr):
            base = Path(self.args.input_file).parent if self.args.input_file else Path.cwd()
            # A weight file that is there must fit the IR; one that is not (IR kept without its
            # weights) fails only when a pass reads a weight.
            attach_weights(prog, base_dir=base, check=(base / attr.data).exists())
        else:
            attach_weights(prog, {})  # IR alone (a filecheck test): passes that read a weight say so
        super().apply_passes(prog)
        store = weights_of(prog)
        if not store.changed:
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
        target = Path(target)
        self._weights_out.append((target, {name: store[name] for name in dict.fromkeys(used_weight_names(prog))}))
        prog.attributes["module.weight_file"] = StringAttr(target.name)


def main(argv: Sequence[str] | None = None) -> int:
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        TpuOptMain(description="TPU-MLIR-style optimizer driver on xDSL", args=argv).run()
    except ParseError as e:
        traceback_if(debug)
        print(f"tpu-opt: error: {e}", file=sys.stderr)
        return 2
    except DiagnosticException as e:
        traceback_if(debug)
        print(f"tpu-opt: error: {_one_line(str(e))}", file=sys.stderr)
        return 2
    except (TpuXdslError, OSError) as e:
        traceback_if(debug)
        print(f"tpu-opt: error: {e}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:  # a target (-t llvm) whose package is not installed
        traceback_if(debug)
        print(f"tpu-opt: error: {e}: the chosen target needs it; install it or pick another -t", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        return interrupted("tpu-opt", e)
    except Exception as e:  # noqa: BLE001 - the last resort: a fault of tpu-xdsl, one line and exit 3
        traceback_if(debug)
        print(internal_error_line("tpu-opt", e), file=sys.stderr)
        return EXIT_INTERNAL
    return 0


def _one_line(message: str, limit: int = 240) -> str:
    first = message.strip().splitlines()[0] if message.strip() else message
    return first if len(first) <= limit else first[: limit - 3] + "..."


if __name__ == "__main__":
    sys.exit(main())
