"""Stage 1: the `irdl.dialect` ops of a parsed module -> plain data (a "spec": types,
attributes, ops and their constraint tables), which is cached as JSON keyed by a hash
of the IRDL text so later loads skip the parser."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from xdsl.dialects import builtin
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.irdl import irdl
from xdsl.ir import (
    Block,
    Operation,
    SSAValue,
)

from tpu_xdsl.dialects.irdl_loader.parser import AttributesOp, PropertiesOp, parse_irdl


def _owner_dialect(op: Operation) -> str:
    while not isinstance(op, irdl.DialectOp):
        parent = op.parent_op()
        if parent is None:
            return ""
        op = parent
    return op.sym_name.data


def _ref(ref: builtin.SymbolRefAttr) -> list[str]:
    return [ref.root_reference.data, *(r.data for r in ref.nested_references.data)]


def _entry_constraints(body: Block) -> tuple[dict[str, dict[str, Any]], dict[SSAValue, str]]:
    """The constraint ops of one definition as {id: node}, and value -> id."""
    ids: dict[SSAValue, str] = {}
    table: dict[str, dict[str, Any]] = {}
    for op in body.ops:
        if len(op.results) != 1:
            continue
        cid = str(len(ids))
        value = op.results[0]
        ids[value] = cid
        node: dict[str, Any]
        match op:
            case irdl.IsOp():
                node = {"k": "is", "attr": str(op.expected)}
            case irdl.AnyOp():
                node = {"k": "any"}
            case irdl.AnyOfOp() | irdl.AllOfOp():
                kind = "any_of" if isinstance(op, irdl.AnyOfOp) else "all_of"
                node = {"k": kind, "args": [ids[a] for a in op.args]}
            case irdl.BaseOp() if op.base_name is not None:
                node = {"k": "base_name", "name": op.base_name.data}
            case irdl.BaseOp():
                assert op.base_ref is not None
                node = {"k": "base_ref", "ref": _ref(op.base_ref), "dialect": _owner_dialect(op)}
            case irdl.ParametricOp():
                node = {
                    "k": "parametric",
                    "ref": _ref(op.base_type),
                    "dialect": _owner_dialect(op),
                    "args": [ids[a] for a in op.args],
                }
            case irdl.RegionOp():
                blocks = op.number_of_blocks.value.data if op.number_of_blocks is not None else None
                node = {
                    "k": "region",
                    "blocks": blocks,
                    "constrained": op.constrained_arguments is not None,
                    "args": [ids[a] for a in op.entry_block_args],
                }
            case _:
                node = {"k": "unsupported", "op": op.name}
        node["uses"] = len(list(value.uses))
        table[cid] = node
    return table, ids


def extract_spec(module: ModuleOp) -> list[dict[str, Any]]:
    """Each `irdl.dialect` as plain data: its types/attributes and ops with constraints."""
    dialects = []
    for dialect_op in module.ops:
        if not isinstance(dialect_op, irdl.DialectOp):
            continue
        types, ops = [], []
        for entry in dialect_op.body.block.ops:
            # An entry's one region is its body (irdl.type, irdl.attribute, irdl.operation).
            table, ids = _entry_constraints(entry.regions[0].block) if entry.regions else ({}, {})
            if isinstance(entry, irdl.TypeOp | irdl.AttributeOp):
                params = [
                    [name.data, ids[value]]
                    for inner in entry.body.block.ops
                    if isinstance(inner, irdl.ParametersOp)
                    for name, value in zip(inner.names, inner.args, strict=True)
                ]
                kind = "type" if isinstance(entry, irdl.TypeOp) else "attribute"
                types.append({"sym": entry.sym_name.data, "kind": kind, "params": params, "constraints": table})
            elif isinstance(entry, irdl.OperationOp):
                spec: dict[str, Any] = {
                    "sym": entry.sym_name.data,
                    "py_class": entry.get_py_class_name(),
                    "operands": [], "results": [], "attributes": [], "properties": [], "regions": [],
                    "constraints": table,
                }
                for inner in entry.body.block.ops:
                    match inner:
                        case irdl.OperandsOp() | irdl.ResultsOp():
                            key = "operands" if isinstance(inner, irdl.OperandsOp) else "results"
                            spec[key] = [
                                [n.data, v.data.value, ids[a]]
                                for n, v, a in zip(inner.names, inner.variadicity.value, inner.args, strict=True)
                            ]
                        case AttributesOp() | PropertiesOp():
                            optional = inner.optional_names
                            key = "properties" if isinstance(inner, PropertiesOp) else "attributes"
                            spec[key] = [
                                [n.data, n.data in optional, ids[a]]
                                for n, a in zip(inner.attribute_value_names, inner.attribute_values, strict=True)
                            ]
                        case irdl.RegionsOp():
                            spec["regions"] = [[n.data, ids[a]] for n, a in zip(inner.names, inner.args, strict=True)]
                        case _:
                            pass
                ops.append(spec)
        dialects.append({"name": dialect_op.sym_name.data, "types": types, "ops": ops})
    return dialects


# Bump when the spec format changes; cached specs of other versions are ignored.
_SPEC_VERSION = 2


def load_spec(
    text: str, source: str, verify: bool = True, cache_dir: str | Path | None = None
) -> list[dict[str, Any]]:
    """The dialects of IRDL `text` as plain data, from the cache when it holds them."""
    path = None
    if cache_dir is not None:
        from importlib.metadata import version

        key = hashlib.sha256(
            f"{_SPEC_VERSION}|{version('xdsl')}|{verify}|{text}".encode()
        ).hexdigest()[:32]
        path = Path(cache_dir) / f"irdl-{key}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            pass
    spec = extract_spec(parse_irdl(text, source, verify))
    if path is not None:
        _write_cache(path, spec)
    return spec


def _write_cache(path: Path, spec: list[dict[str, Any]]) -> None:
    """Write the cache atomically; a cache that cannot be written is simply skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name, dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(spec, f)
        os.replace(tmp, path)
    except OSError:
        return
