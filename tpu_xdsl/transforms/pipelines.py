"""Pass pipelines the tools run (canonicalization of TOP after import)."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass


def canonicalize_passes() -> list[ModulePass]:
    """TOP -> TOP simplifications, in order (filled as the passes land)."""
    return []


def canonicalize(module: ModuleOp) -> None:
    ctx = Context()
    for p in canonicalize_passes():
        p.apply(ctx, module)
