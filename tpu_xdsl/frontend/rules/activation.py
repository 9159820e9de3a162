"""Import rules for activations: one TOP op each, attributes from ONNX defaults."""

from __future__ import annotations

from tpu_xdsl.frontend.onnx_importer import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule

_UNARY = {
    "Relu": "relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
}


@onnx_rule(*_UNARY)
def unary(ctx: NodeContext) -> None:
    ctx.output(_UNARY[ctx.op_type], [ctx.input(0)])
