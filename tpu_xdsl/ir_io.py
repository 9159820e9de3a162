"""Read and write TOP/TPU `.mlir` files with every dialect the project uses."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException, ParseError

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.universe import TPU_XDSL_UNIVERSE
from tpu_xdsl.weights import attach_weights, save_weights, write_atomic


class InvalidIRError(TpuXdslError):
    """A `.mlir` file does not parse or does not verify."""


def make_context() -> Context:
    """A context with xDSL's dialects plus TOP and TPU."""
    from xdsl.dialects import get_all_dialects

    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    for name, factory in TPU_XDSL_UNIVERSE.all_dialects.items():
        ctx.register_dialect(name, factory)
    return ctx


def parse_module(text: str, source: str = "<string>") -> ModuleOp:
    """Parse and verify IR text; errors become `InvalidIRError` naming the source."""
    try:
        module = Parser(make_context(), text, source).parse_module()
    except ParseError as e:
        location = str(e).splitlines()[0]
        raise InvalidIRError(f"{location}: {e.msg}") from e
    try:
        module.verify()
    except DiagnosticException as e:
        raise InvalidIRError(f"{source}: {_first_line(str(e))}") from e
    return module


def read_module(path: str | Path) -> ModuleOp:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise TpuXdslError(f"{path}: cannot read: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise TpuXdslError(
            f"{path}: not a text .mlir file; give the .mlir that tpu-xdsl wrote, not the .onnx "
            "(tpu-xdsl transform imports that)"
        ) from e
    return parse_module(text, str(path))


def write_module(module: ModuleOp, stream: IO[str], generic: bool = False) -> None:
    Printer(stream=stream, print_generic_format=generic).print_op(module)
    stream.write("\n")


def _first_line(message: str) -> str:
    """xDSL's diagnostics quote the whole IR; keep the line that says what is wrong."""
    for line in message.splitlines():
        text = line.strip(" |")
        if "does not verify" in text or "error" in text.lower() or "expected" in text.lower():
            return text
    return message.strip().splitlines()[0] if message.strip() else message


def save_module(module: ModuleOp, mlir_path: Path, weights) -> None:
    """Write the `.mlir` and its weight file (`<stem>_weights.npz`) atomically, weights first."""
    from io import StringIO

    attach_weights(module, weights)
    save_weights(module, mlir_path.with_name(f"{mlir_path.stem}_weights.npz"))
    text = StringIO()
    write_module(module, text)
    write_atomic(mlir_path, lambda f: f.write(text.getvalue()))
