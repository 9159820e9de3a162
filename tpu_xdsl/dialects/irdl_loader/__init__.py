"""Turn IRDL text into full xDSL dialects: operations, attributes and types.

xDSL's bundled `make_dialect` interprets only part of IRDL. This loader covers
what real dialects need:

- `irdl.is`, `irdl.any`, `irdl.any_of`, `irdl.all_of`, `irdl.base` (by name,
  e.g. `"!builtin.tensor"`, or by reference to a type of the file),
  `irdl.parametric` (on types of the file, and on registered attributes through a
  nested reference such as `@builtin::@tensor<%shape, %elem, %enc>` or
  `@builtin::@array<%elem>` for arrays whose elements all satisfy `%elem`);
- a constraint value used more than once is a constraint variable: every use
  must be satisfied by the same attribute, as in MLIR's IRDL;
- single, optional and variadic operands and results; regions (with a block
  count of 1 giving a single-block region); attributes, single or optional.
  Optional attributes use the newer MLIR syntax `"name" = optional %c`, which
  xDSL's `irdl.attributes` does not parse yet, so the loader parses IRDL files
  with an extended copy of that op.

Verification failures name the operation, the field and the offending value.
What IRDL cannot express is added by the caller as a `verify` hook per op name.

The loader knows nothing of any particular dialect. Its stages, one module each:
`parser` (IRDL text -> `irdl.dialect` ops), `spec` (those ops -> plain data, cached),
`constraints` (the constraint classes the generated ops verify with) and `builder`
(the spec -> xDSL classes).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xdsl.context import Context
from xdsl.ir import Dialect

from tpu_xdsl.dialects.irdl_loader.builder import (
    LoadedDialect,
    VerifyHook,
    _DialectBuilder,
)
from tpu_xdsl.dialects.irdl_loader.constraints import FieldConstraint, FirstOf
from tpu_xdsl.dialects.irdl_loader.parser import IRDL_EXTENDED, AttributesOp, parse_irdl
from tpu_xdsl.dialects.irdl_loader.spec import extract_spec, load_spec


def load_irdl_dialects(
    text: str,
    source: str = "<irdl>",
    *,
    context: Context | None = None,
    verify_hooks: Mapping[str, VerifyHook] | None = None,
    op_members: Mapping[str, Mapping[str, Any]] | None = None,
    module_prefix: str = "irdl_dialects",
    verify: bool = True,
    cache_dir: str | Path | None = None,
) -> list[Dialect]:
    """Build one xDSL `Dialect` per `irdl.dialect` in `text`.

    `context` resolves `irdl.base "!dialect.name"` references to dialects other
    than builtin and those of the file. `verify_hooks` maps a qualified op name to
    a function run after the IRDL constraints (for what IRDL cannot say);
    `op_members` maps it to extra class members (methods, properties).
    Generated classes claim to live in module `{module_prefix}.{dialect}`.
    `verify=False` skips verifying the IRDL module itself (for files a test
    verifies). With `cache_dir`, the parsed definitions are kept there as JSON
    keyed by a hash of the text, and later loads skip the parser entirely.
    """
    spec = load_spec(text, source, verify, cache_dir)
    builder = _DialectBuilder(
        spec,
        source,
        context or Context(),
        verify_hooks or {},
        op_members or {},
        module_prefix,
    )
    return builder.build()


__all__ = [
    "IRDL_EXTENDED",
    "AttributesOp",
    "FieldConstraint",
    "FirstOf",
    "LoadedDialect",
    "VerifyHook",
    "extract_spec",
    "load_irdl_dialects",
    "load_spec",
    "parse_irdl",
]
