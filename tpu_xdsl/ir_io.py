"""Read and write TOP/TPU `.mlir` files with every dialect the project uses."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException, ParseError

from tpu_xdsl.dialects.module import tensor_names
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.universe import register_project_dialects
from tpu_xdsl.weights import attach_weights, save_weights, write_atomic


class InvalidIRError(TpuXdslError):
    """A `.mlir` file does not parse or does not verify."""


def make_context() -> Context:
    """A context with xDSL's dialects plus TOP, TPU and the project's TOSA (in place of xDSL's)."""
    from xdsl.dialects import get_all_dialects

    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    register_project_dialects(ctx)
    return ctx


def parse_module(text: str, source: str = "<string>") -> ModuleOp:
    """Parse and verify IR text; errors become `InvalidIRError` naming the source."""
    try:
        module = Parser(make_context(), text, source).parse_module()
    except ParseError as e:
        location = str(e).splitlines()[0]
        raise InvalidIRError(f"{location}: {e.msg}") from e
    except DiagnosticException as e:  # an attribute the parser builds refuses its value (an i64 of 2^64)
        raise InvalidIRError(f"{source}: {_first_line(str(e))}") from e
    verify_module(module, source)
    return module


def verify_module(module: ModuleOp, source: str = "<string>") -> None:
    """xDSL's verifier, after the checks it lacks (values defined before use, model inputs
    read through `top.input`); every failure is an `InvalidIRError` of one line."""
    check_definitions(module, source)
    try:
        module.verify()
    except DiagnosticException as e:
        raise InvalidIRError(f"{source}: {_first_line(str(e))}") from e
    check_inputs(module, source)


def check_definitions(module: ModuleOp, source: str = "<string>") -> None:
    """Each operand is defined above its use in the same block, or in a block enclosing it.

    xDSL's parser takes forward references (as in a graph region) and its verifier does
    not check dominance; the interpreter would then meet a value it has not computed.
    In a region of several blocks a value of any of its blocks counts as defined.
    """
    _check_region_values(module, [set()], source)


def _check_region_values(op: Operation, scopes: list[set[SSAValue]], source: str) -> None:
    for region in op.regions:
        shared: set[SSAValue] = set()
        if len(region.blocks) > 1:
            shared = {v for block in region.blocks for v in (*block.args, *(r for o in block.ops for r in o.results))}
        for block in region.blocks:
            defined: set[SSAValue] = {*block.args, *shared}
            inner_scopes = [*scopes, defined]
            for inner in block.ops:
                for index, operand in enumerate(inner.operands):
                    if not any(operand in scope for scope in inner_scopes):
                        raise InvalidIRError(_undefined_use(inner, index, operand, source))
                defined.update(inner.results)
                if inner.regions:
                    _check_region_values(inner, inner_scopes, source)


def _undefined_use(op: Operation, index: int, operand: SSAValue, source: str) -> str:
    user = f"{_describe_op(op)} (op {_position(op)})"
    owner = operand.owner
    if not isinstance(owner, Operation):
        return f"{source}: {user} reads operand {index}, an argument of a block that does not enclose it"
    if owner.parent_block() is op.parent_block():
        return (
            f"{source}: {user} uses operand {index} before its definition by {_describe_op(owner)} "
            f"(op {_position(owner)}); define each value above the ops that use it"
        )
    return (
        f"{source}: {user} uses operand {index}, the result of {_describe_op(owner)} (op {_position(owner)}) "
        "inside a region that does not enclose it"
    )


def _describe_op(op: Operation) -> str:
    names = tensor_names(op)
    return f"'{op.name}'" + (f" '{names[0]}'" if names else "")


def _position(op: Operation) -> str:
    """Where `op` sits, as 1-based op numbers from the module down: `4 of @main` reads
    as the fourth op of @main's body."""
    steps = []
    while (block := op.parent_block()) is not None:
        steps.append(str(block.get_operation_index(op) + 1))
        parent = block.parent_op()
        if parent is None:
            break
        if isinstance(parent, func.FuncOp):
            return f"{'.'.join(reversed(steps))} of @{parent.sym_name.data}"
        op = parent
    return ".".join(reversed(steps))


def check_inputs(module: ModuleOp, source: str = "<string>", direct_reads: bool = False) -> None:
    """Each `top.input` of @main reads one of @main's arguments; with `direct_reads`, also
    no other TOP/TPU op reads an argument itself (a module from transform, which lowering
    and codegen take: they bind model inputs through `top.input`)."""
    main = next((op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == "main"), None)
    if main is None or not main.body.blocks:
        return
    args = set(main.body.block.args)
    for op in main.walk():
        if op.name == "top.input" and (len(op.operands) != 1 or op.operands[0] not in args):
            raise InvalidIRError(
                f"{source}: {_describe_op(op)} (op {_position(op)}) reads a value that is not an argument of "
                "@main; top.input takes one argument of @main"
            )
        if not direct_reads or op.name in ("top.input", "func.return"):
            continue
        for index, operand in enumerate(op.operands):
            if operand in args:
                raise InvalidIRError(
                    f"{source}: {_describe_op(op)} (op {_position(op)}) reads argument "
                    f"{main.body.block.args.index(operand)} of @main as operand {index}; a TOP module from "
                    "tpu-xdsl transform reads model inputs through the top.input of that argument"
                )


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


def _first_line(message: str, limit: int = 240) -> str:
    """xDSL's diagnostics quote the whole IR; keep the line that says what is wrong, and
    cut an op it prints whole (`... parent: ConvOp(%0 = "top.conv"(...) ...)`) short."""
    found = message.strip().splitlines()[0] if message.strip() else message
    for line in message.splitlines():
        text = line.strip(" |")
        if "does not verify" in text or "error" in text.lower() or "expected" in text.lower():
            found = text
            break
    return found if len(found) <= limit else found[: limit - 3] + "..."


def save_module(module: ModuleOp, mlir_path: Path, weights) -> None:
    """Write the `.mlir` and its weight file (`<stem>_weights.npz`) as one output set
    (`files.OutputSet`): both or neither, weights renamed into place first."""
    from io import StringIO

    from tpu_xdsl.files import OutputSet

    attach_weights(module, weights)
    with OutputSet():
        save_weights(module, mlir_path.with_name(f"{mlir_path.stem}_weights.npz"))
        text = StringIO()
        write_module(module, text)
        write_atomic(mlir_path, lambda f: f.write(text.getvalue()))
