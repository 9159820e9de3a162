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


def _runtime_nodes(tree: ast.AST):
    """Every node of the tree but those under `if TYPE_CHECKING:` (imports for annotations,
    never run)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


@cache
def imports(path: Path) -> frozenset[str]:
    """Every module the file imports when it runs (absolute names; `from a import b` gives
    a.b when a.b is a module, else a)."""
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
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


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycles() -> list[set[str]]:
    """The strongly connected components of more than one module of the package's import
    graph (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        targets = {module_file(m) for m in imports(path) if m.startswith("tpu_xdsl")}
        graph[module_name(path)] = {module_name(t) for t in targets if t is not None} - {module_name(path)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while not component or w != v:
                w = stack.pop()
                component.add(w)
            if len(component) > 1:
                cycles.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


# A registry and the modules of rules it loads (the only cycles allowed): `load_all` imports
# the rules, and each rule module imports the registry to register itself.
REGISTRIES = {
    "tpu_xdsl.kernels": "tpu_xdsl.kernels.",
    "tpu_xdsl.frontend.registry": ("tpu_xdsl.frontend.rules", "tpu_xdsl.frontend.control_flow"),
    # The TOSA export's float rules (rules.py loads rules_*.py) and INT8 rules (int8_rules_nn.py).
    "tpu_xdsl.export.rules": "tpu_xdsl.export.rules_",
    "tpu_xdsl.export.int8_rules": "tpu_xdsl.export.int8_rules_",
}


def test_the_only_import_cycles_are_registries_and_their_rules():
    for cycle in import_cycles():
        registry = next((r for r in REGISTRIES if r in cycle), None)
        assert registry is not None, f"an import cycle: {sorted(cycle)}"
        rules = cycle - {registry}
        assert all(m.startswith(REGISTRIES[registry]) for m in rules), f"{registry}'s cycle holds {sorted(rules)}"
