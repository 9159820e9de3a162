"""Shape relations IRDL cannot express: an `infer_shapes` rule and a `verify` hook per op."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from xdsl.ir import Operation

VERIFY_HOOKS: Mapping[str, Callable[[Operation], None]] = {}
