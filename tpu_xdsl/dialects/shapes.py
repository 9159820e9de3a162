"""Shape relations IRDL cannot express: one `infer_shapes` and `verify` per op name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from xdsl.ir import Operation

VERIFY_HOOKS: Mapping[str, Callable[[Operation], None]] = {}
OP_MEMBERS: Mapping[str, Mapping[str, Any]] = {}
