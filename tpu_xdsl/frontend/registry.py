"""The table of ONNX import rules: one small function per ONNX op type and opset range.

A rule gets a `NodeContext` and emits TOP ops for one ONNX node:

    @onnx_rule("Relu")
    def relu(ctx: NodeContext) -> None:
        ctx.emit("relu", [ctx.input(0)])

`onnx_rule("Slice", until=9)` and `onnx_rule("Slice", since=10)` give
different rules to old and new opsets (JAX's `register_lowering` table is the
model). The rule for a node is the one whose range holds the model's opset
of the node's domain. Rules of another domain than ONNX's own name it:
`onnx_rule("QLinearAdd", domain="com.microsoft")` is listed as
`com.microsoft.QLinearAdd`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tpu_xdsl.frontend.node_context import NodeContext

Rule = Callable[["NodeContext"], None]


@dataclass(frozen=True)
class RuleEntry:
    since: int
    until: int | None
    rule: Rule


RULES: dict[str, list[RuleEntry]] = {}


def rule_key(op_type: str, domain: str = "") -> str:
    """The table's key of an op type: itself in ONNX's domain, else `domain.op_type`."""
    return f"{domain}.{op_type}" if domain not in ("", "ai.onnx") else op_type


def onnx_rule(
    *op_types: str, since: int = 1, until: int | None = None, domain: str = ""
) -> Callable[[Rule], Rule]:
    """Register `rule` for op types of `domain` (ONNX's own by default), for opsets
    since..until (inclusive) of that domain."""

    def register(rule: Rule) -> Rule:
        for op_type in op_types:
            entries = RULES.setdefault(rule_key(op_type, domain), [])
            for entry in entries:
                overlap = (until is None or entry.since <= until) and (
                    entry.until is None or since <= entry.until
                )
                if overlap:
                    raise ValueError(f"ONNX rules for {op_type} overlap at opset {since}")
            entries.append(RuleEntry(since, until, rule))
        return rule

    return register


# Run on the finished TOP module, in registration order, by rule families that see the
# model as a whole (a pre-quantized model's scales become its calibration): the importer
# calls them without importing the rules.
AFTER_IMPORT: list[Callable[[Any, Any], None]] = []


def after_import(hook: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    """Register `hook(importer, module)` to run when an import has built its module."""
    AFTER_IMPORT.append(hook)
    return hook


def find_rule(op_type: str, opset: int, domain: str = "") -> Rule | None:
    for entry in RULES.get(rule_key(op_type, domain), ()):
        if entry.since <= opset and (entry.until is None or opset <= entry.until):
            return entry.rule
    return None


def supported_op_types() -> list[str]:
    load_all()
    return sorted(RULES)


def load_all() -> dict[str, list[RuleEntry]]:
    """Import every rule module so the table is complete."""
    # breaks the cycle registry -> rules (each rule module imports the registry)
    from tpu_xdsl.frontend import control_flow  # noqa: F401  (If, Loop, Scan)
    from tpu_xdsl.frontend.rules import (  # noqa: F401
        activation,
        conv_pool,
        einsum,
        elementwise,
        nn,
        quantized,
        recurrent,
        sampling,
        tensor,
    )

    return RULES
