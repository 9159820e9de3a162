"""Import rules for matmul, normalization and softmax."""

from __future__ import annotations

from tpu_xdsl.frontend.onnx_importer import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule


@onnx_rule("MatMul")
def matmul(ctx: NodeContext) -> None:
    ctx.output("matmul", [ctx.input(0), ctx.input(1), ctx.importer.none_value()])


@onnx_rule("Softmax", since=13)
def softmax(ctx: NodeContext) -> None:
    ctx.output("softmax", [ctx.input(0)], {"axis": ctx.attr("axis", -1)})
