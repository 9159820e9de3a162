"""The TOP and TPU dialects, built at import time from `irdl/top.irdl` and `irdl/tpu.irdl`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.ir import Dialect
from xdsl.irdl import IRDLOperation

from tpu_xdsl.dialects import op_traits, shapes
from tpu_xdsl.dialects.irdl_loader import VerifyHook, load_irdl_dialects


def irdl_dir() -> Path:
    """The folder holding the IRDL files: inside the wheel, or the source checkout."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "irdl"
    return installed if installed.is_dir() else package.parent / "irdl"


def cache_dir() -> Path:
    """Where parsed IRDL is cached ($TPU_XDSL_CACHE, else the user cache folder)."""
    if "TPU_XDSL_CACHE" in os.environ:
        return Path(os.environ["TPU_XDSL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tpu-xdsl"


def _load(
    file_name: str,
    context: Context,
    verify_hooks: Mapping[str, VerifyHook] = shapes.VERIFY_HOOKS,
    op_members: Mapping[str, Mapping[str, Any]] = op_traits.OP_MEMBERS,
) -> Dialect:
    path = irdl_dir() / file_name
    (dialect,) = load_irdl_dialects(
        path.read_text(),
        f"irdl/{file_name}",
        context=context,
        verify_hooks=verify_hooks,
        op_members=op_members,
        module_prefix="tpu_xdsl.dialects",
        # tests/test_dialects.py verifies the IRDL files; skip it on every import.
        verify=False,
        cache_dir=cache_dir(),
    )
    return dialect


_context = Context()
_context.load_dialect(Builtin)
Top = _load("top.irdl", _context)
_context.load_dialect(Top)
Tpu = _load("tpu.irdl", _context)


def _irdl_classes(*dialects: Dialect) -> dict[str, type[IRDLOperation]]:
    """The op classes of `dialects` by full name; the loader builds IRDL ops only
    (xDSL's `Dialect.operations` types them as any `Operation`)."""
    classes: dict[str, type[IRDLOperation]] = {}
    for dialect in dialects:
        for op in dialect.operations:
            if not issubclass(op, IRDLOperation):
                raise TypeError(f"'{op.name}' of {dialect.name} is not an IRDL op")
            classes[op.name] = op
    return classes


_OP_CLASSES = _irdl_classes(Top, Tpu)


def op_class(name: str) -> type[IRDLOperation]:
    """The generated class of a TOP or TPU op by its full name (e.g. "top.conv")."""
    return _OP_CLASSES[name]


__all__ = ["Top", "Tpu", "irdl_dir", "op_class"]
