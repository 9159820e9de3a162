"""The layers' one-way imports, read from the source (every import, at any depth of a
function): the ground floor (`tpu_xdsl/kernels/`) imports nothing of the project above it,
and the device model, with everything it imports of the project, imports neither xDSL nor
the interpreters."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tpu_xdsl"


def module_file(module: str) -> Path | None:
    """The file of a `tpu_xdsl...` module (None for a name that is not a module)."""
    base = PACKAGE.parent.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def imports(path: Path) -> frozenset[str]:
    """Every module the file imports (absolute names; `from a import b` gives a.b when
    a.b is a module, else a)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.add(name if module_file(name) is not None else node.module)
    return frozenset(found)


def project_closure(paths: list[Path]) -> dict[Path, frozenset[str]]:
    """The files reachable from `paths` through project imports, with their imports."""
    seen: dict[Path, frozenset[str]] = {}
    todo = list(paths)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen[path] = imports(path)
        for name in seen[path]:
            if name.startswith("tpu_xdsl") and (target := module_file(name)) is not None:
                todo.append(target)
    return seen


def test_the_ground_floor_imports_nothing_of_the_project_above_it():
    files = sorted((PACKAGE / "kernels").glob("*.py"))
    assert len(files) > 10
    for path in files:
        above = [m for m in imports(path) if m.startswith("tpu_xdsl") and not m.startswith("tpu_xdsl.kernels")]
        assert not above, f"{path.name} imports {above}"
        # xDSL only where IR element types meet numpy dtypes.
        uses_xdsl = [m for m in imports(path) if m == "xdsl" or m.startswith("xdsl.")]
        assert not uses_xdsl or path.name == "dtypes.py", f"{path.name} imports {uses_xdsl}"


def test_the_device_model_imports_neither_xdsl_nor_the_interpreters():
    closure = project_closure(sorted((PACKAGE / "device").glob("*.py")))
    for path, names in closure.items():
        bad = [m for m in names if m == "xdsl" or m.startswith(("xdsl.", "tpu_xdsl.interp"))]
        assert not bad, f"{path.relative_to(PACKAGE.parent)} (reached from device/) imports {bad}"
    assert PACKAGE / "kernels" / "int8.py" in closure  # the kernels it shares with the interpreter


def test_only_the_cli_imports_the_cli():
    """`tpu_xdsl/tools/` is the commands: no library module imports it (errors, input
    loaders and IR queries live below it)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.is_relative_to(PACKAGE / "tools"):
            continue
        cli = [m for m in imports(path) if m.startswith("tpu_xdsl.tools")]
        assert not cli, f"{path.relative_to(PACKAGE.parent)} imports {cli}"
