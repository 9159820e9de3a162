"""Import rules for convolution and pooling."""

from __future__ import annotations

from tpu_xdsl.frontend.onnx_importer import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule


@onnx_rule("Conv")
def conv(ctx: NodeContext) -> None:
    spatial = ctx.rank(0) - 2
    filter_shape = ctx.shape(1)
    kernel = ctx.attr("kernel_shape") or list(filter_shape[2:])
    ctx.output(
        "conv",
        [ctx.input(0), ctx.input(1), ctx.input(2)],
        {
            "kernel_shape": list(kernel),
            "strides": ctx.attr("strides", [1] * spatial),
            "pads": _pads(ctx, spatial, kernel),
            "dilations": ctx.attr("dilations", [1] * spatial),
            "group": ctx.attr("group", 1),
        },
    )


def _pads(ctx: NodeContext, spatial: int, kernel: list[int]) -> list[int]:
    """Explicit pads (begins then ends), resolving auto_pad against the static input shape."""
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad in ("NOTSET", ""):
        return list(ctx.attr("pads", [0] * (2 * spatial)))
    if auto_pad == "VALID":
        return [0] * (2 * spatial)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"auto_pad '{auto_pad}' is not an ONNX value")
    strides = ctx.attr("strides", [1] * spatial)
    dilations = ctx.attr("dilations", [1] * spatial)
    begins, ends = [], []
    for size, k, s, d in zip(ctx.shape(0)[2:], kernel, strides, dilations):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return begins + ends
