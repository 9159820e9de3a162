"""Import rules for binary elementwise ops (numpy broadcasting)."""

from __future__ import annotations

from tpu_xdsl.frontend.onnx_importer import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule

_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow"}


@onnx_rule(*_BINARY, since=7)
def binary(ctx: NodeContext) -> None:
    ctx.output(_BINARY[ctx.op_type], [ctx.input(0), ctx.input(1)])
