"""Import rule for GridSample: `top.grid_sample`, the input read at a grid of points."""

from __future__ import annotations

from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule
from tpu_xdsl.frontend.rules.elementwise import is_integral
from tpu_xdsl.frontend.rules.nn import typed_output

# Opset 16's names for the modes; opset 20 renamed them and allowed any rank.
_MODES_16 = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}
_MODES = ("linear", "nearest", "cubic")
_PADDING = ("zeros", "border", "reflection")


@onnx_rule("GridSample", since=16)
def grid_sample(ctx: NodeContext) -> None:
    """X [N, C, *spatial] at grid [N, *out, len(spatial)] of coordinates in [-1, 1]."""
    mode = str(ctx.attr("mode", "bilinear" if ctx.opset < 20 else "linear"))
    if ctx.opset < 20:
        if mode not in _MODES_16:
            raise ctx.error(f"mode '{mode}' is not one of {', '.join(_MODES_16)}")
        mode = _MODES_16[mode]
    elif mode not in _MODES:
        raise ctx.error(f"mode '{mode}' is not one of {', '.join(_MODES)}")
    padding = str(ctx.attr("padding_mode", "zeros"))
    if padding not in _PADDING:
        raise ctx.error(f"padding_mode '{padding}' is not one of {', '.join(_PADDING)}")
    x, grid = ctx.shape(0), ctx.shape(1)
    spatial = len(x) - 2
    if ctx.opset < 20 and len(x) != 4:
        raise ctx.error(f"input X must be 4-D before opset 20, got shape {list(x)}")
    if mode == "cubic" and spatial != 2:
        raise ctx.error(f"cubic mode needs a 4-D input X, got shape {list(x)}")
    if is_integral(ctx.dtype(0)) or is_integral(ctx.dtype(1)):
        raise ctx.error("X and grid must be float tensors")
    if len(grid) != len(x) or grid[0] != x[0] or grid[-1] != spatial:
        raise ctx.error(
            f"grid {list(grid)} must be [N, *output, {spatial}] for X {list(x)}"
        )
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": int(ctx.attr("align_corners", 0))}
    shape = [x[0], x[1], *grid[1:-1]]
    typed_output(ctx, "grid_sample", [ctx.input(0), ctx.input(1)], attrs, dtype=ctx.dtype(0), shape=shape)
