"""Import rules for convolution, transposed convolution and pooling.

`auto_pad` is resolved against the static input shape, so TOP ops carry
explicit pads (begins then ends). Pooling the TOP ops cannot express
(AveragePool with dilations, LpPool) is a window sum: a depthwise `top.conv`
with a filter of ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import SSAValue

from tpu_xdsl.dialects import shapes
from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule
from tpu_xdsl.frontend.rules.nn import const_weight, drop_outputs, typed_output
from tpu_xdsl.kernels.conv_pool import tap_counts

F32 = np.dtype(np.float32)


def _kernel_shape(ctx: NodeContext, filter_index: int | None) -> list[int]:
    """kernel_shape, from the filter's spatial dims when absent (Conv/ConvTranspose)."""
    kernel = ctx.attr("kernel_shape")
    if kernel is None:
        if filter_index is None:
            raise ctx.error("attribute 'kernel_shape' is required")
        kernel = ctx.shape(filter_index)[2:]
    kernel = [int(k) for k in kernel]
    if len(kernel) != ctx.rank(0) - 2:
        raise ctx.error(f"kernel_shape {kernel} does not fit input rank {ctx.rank(0)}")
    return kernel


def _window(
    ctx: NodeContext, kernel: Sequence[int]
) -> tuple[list[int], list[int], list[int]]:
    """strides, explicit pads and dilations of a Conv/Pool node."""
    spatial = len(kernel)
    strides = [int(s) for s in ctx.attr("strides", [1] * spatial)]
    dilations = [int(d) for d in ctx.attr("dilations", [1] * spatial)]
    return strides, _pads(ctx, kernel, strides, dilations), dilations


def _pads(
    ctx: NodeContext,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> list[int]:
    """Explicit pads (begins then ends), resolving auto_pad: SAME gives ceil(size / stride)
    outputs, the odd pad at the end (SAME_UPPER) or the beginning (SAME_LOWER)."""
    spatial = len(kernel)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad in ("NOTSET", ""):
        pads = [int(p) for p in ctx.attr("pads", [0] * (2 * spatial))]
        if len(pads) != 2 * spatial:
            raise ctx.error(f"pads {pads} must have {2 * spatial} entries")
        return pads
    if auto_pad == "VALID":
        return [0] * (2 * spatial)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"auto_pad '{auto_pad}' is not an ONNX value")
    begins, ends = [], []
    for size, k, s, d in zip(ctx.shape(0)[2:], kernel, strides, dilations):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return begins + ends


@onnx_rule("Conv")
def conv(ctx: NodeContext) -> None:
    """1-d/2-d/3-d convolution with groups, dilations and auto_pad."""
    kernel = _kernel_shape(ctx, 1)
    strides, pads, dilations = _window(ctx, kernel)
    attrs = {
        "kernel_shape": kernel,
        "strides": strides,
        "pads": pads,
        "dilations": dilations,
        "group": int(ctx.attr("group", 1)),
    }
    ctx.output("conv", [ctx.input(0), ctx.input(1), ctx.input(2)], attrs)


@onnx_rule("ConvTranspose")
def conv_transpose(ctx: NodeContext) -> None:
    """top.deconv. With `output_shape` (or SAME auto_pad, whose output is input *
    stride) the pads are derived from the wanted size; output growing past the
    full transposed convolution comes from extra output_padding (zeros at the end)."""
    kernel = _kernel_shape(ctx, 1)
    spatial = len(kernel)
    strides = [int(s) for s in ctx.attr("strides", [1] * spatial)]
    dilations = [int(d) for d in ctx.attr("dilations", [1] * spatial)]
    out_pad = [int(p) for p in ctx.attr("output_padding", [0] * spatial)]
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    sizes = ctx.shape(0)[2:]
    wanted = ctx.attr("output_shape")
    if wanted is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        wanted = [size * s for size, s in zip(sizes, strides)]
    if wanted is not None:
        wanted = [int(w) for w in wanted][-spatial:]
        begins, ends = [], []
        for i, (size, k, s, d, want) in enumerate(
            zip(sizes, kernel, strides, dilations, wanted)
        ):
            total = s * (size - 1) + out_pad[i] + (k - 1) * d + 1 - want
            if total < 0:
                out_pad[i] -= total
                total = 0
            small, large = total // 2, total - total // 2
            begins.append(small if auto_pad == "SAME_UPPER" else large)
            ends.append(large if auto_pad == "SAME_UPPER" else small)
        pads = begins + ends
    elif auto_pad == "VALID":
        pads = [0] * (2 * spatial)
    elif auto_pad in ("NOTSET", ""):
        pads = [int(p) for p in ctx.attr("pads", [0] * (2 * spatial))]
    else:
        raise ctx.error(f"auto_pad '{auto_pad}' is not an ONNX value")
    attrs = {
        "kernel_shape": kernel,
        "strides": strides,
        "pads": pads,
        "dilations": dilations,
        "output_padding": out_pad,
        "group": int(ctx.attr("group", 1)),
    }
    ctx.output("deconv", [ctx.input(0), ctx.input(1), ctx.input(2)], attrs)


@onnx_rule("MaxPool")
def max_pool(ctx: NodeContext) -> None:
    """top.max_pool; the optional Indices output is not supported (storage_order only
    affects it). 8-bit inputs (opset 12) are pooled in f32 and cast back."""
    kernel = _kernel_shape(ctx, None)
    strides, pads, dilations = _window(ctx, kernel)
    attrs = {
        "kernel_shape": kernel,
        "strides": strides,
        "pads": pads,
        "dilations": dilations,
        "ceil_mode": bool(ctx.attr("ceil_mode", 0)),
    }
    typed_output(ctx, "max_pool", [ctx.input(0)], attrs, dtype=ctx.dtype(0))
    drop_outputs(ctx, 1, "Indices")


@onnx_rule("AveragePool")
def avg_pool(ctx: NodeContext) -> None:
    """top.avg_pool; with dilations (opset 19) a window sum divided by the tap counts."""
    kernel = _kernel_shape(ctx, None)
    strides, pads, dilations = _window(ctx, kernel)
    ceil_mode = bool(ctx.attr("ceil_mode", 0))
    include_pad = bool(ctx.attr("count_include_pad", 0))
    if any(d != 1 for d in dilations):
        total, out_shape = _window_sum(
            ctx, ctx.input(0), kernel, strides, pads, dilations, ceil_mode
        )
        counts = tap_counts(
            ctx.shape(0)[2:],
            out_shape[2:],
            kernel,
            strides,
            pads,
            dilations,
            include_pad,
        )
        ctx.output(
            "div",
            [total, const_weight(ctx, "counts", counts[None, None])],
            shapes_=[out_shape],
        )
        return
    attrs = {
        "kernel_shape": kernel,
        "strides": strides,
        "pads": pads,
        "ceil_mode": ceil_mode,
        "count_include_pad": include_pad,
    }
    ctx.output("avg_pool", [ctx.input(0)], attrs)


@onnx_rule("GlobalAveragePool", "GlobalMaxPool")
def global_pool(ctx: NodeContext) -> None:
    """Pooling with a kernel over all spatial dims."""
    kind = "avg_pool" if ctx.op_type == "GlobalAveragePool" else "max_pool"
    kernel = list(ctx.shape(0)[2:])
    ctx.output(kind, [ctx.input(0)], {"kernel_shape": kernel})


@onnx_rule("LpPool", "GlobalLpPool")
def lp_pool(ctx: NodeContext) -> None:
    """(sum over the window of |x|^p)^(1/p), p = 2 by default, padding contributing 0:
    a window sum of |x|^p, or for GlobalLpPool a reduction (l1/l2 for p = 1/2)."""
    p = float(ctx.attr("p", 2))
    if p <= 0:
        raise ctx.error(f"p = {p} must be positive")
    x, shape = ctx.input(0), ctx.shape(0)
    if ctx.op_type == "GlobalLpPool":
        if len(shape) < 3:
            # No spatial dims: a reduction over no axes would reduce every axis.
            raise ctx.error(f"the input {list(shape)} has no spatial dims (rank < 3)")
        out_shape = [*shape[:2], *[1] * (len(shape) - 2)]
        attrs = {"axes": list(range(2, len(shape))), "keepdims": True}
        if p in (1.0, 2.0):
            ctx.output(
                "reduce", [x], {"mode": f"l{int(p)}", **attrs}, shapes_=[out_shape]
            )
            return
        powered = _abs_pow(ctx, x, shape, p)
        (total,) = ctx.emit(
            "reduce", [powered], {"mode": "sum", **attrs}, shapes_=[out_shape]
        )
    else:
        kernel = _kernel_shape(ctx, None)
        strides, pads, dilations = _window(ctx, kernel)
        ceil_mode = bool(ctx.attr("ceil_mode", 0))
        powered = _abs_pow(ctx, x, shape, p)
        total, out_shape = _window_sum(
            ctx, powered, kernel, strides, pads, dilations, ceil_mode, output=p == 1.0
        )
    if p == 2.0:
        ctx.output("sqrt", [total], shapes_=[out_shape])
    elif p != 1.0:
        inv_p = const_weight(ctx, "inv_p", np.array(1.0 / p))
        ctx.output("pow", [total, inv_p], shapes_=[out_shape])


def _abs_pow(ctx: NodeContext, x: SSAValue, shape: Sequence[int], p: float) -> SSAValue:
    """|x|^p: abs for p = 1, x * x for p = 2, else pow(abs(x), p)."""
    if p == 2.0:
        return ctx.emit("mul", [x, x], shapes_=[shape])[0]
    (magnitude,) = ctx.emit("abs", [x], shapes_=[shape])
    if p == 1.0:
        return magnitude
    return ctx.emit(
        "pow", [magnitude, const_weight(ctx, "p", np.array(p))], shapes_=[shape]
    )[0]


def _window_sum(
    ctx: NodeContext,
    x: SSAValue,
    kernel: list[int],
    strides: list[int],
    pads: list[int],
    dilations: list[int],
    ceil_mode: bool,
    *,
    output: bool = False,
) -> tuple[SSAValue, list[int]]:
    """Sum of each pooling window (padding counts 0): a depthwise conv with ones.
    ceil_mode becomes extra end padding, so the conv yields the pool's output size."""
    shape = ctx.shape(0)
    pool_attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads,
                  "dilations": dilations, "ceil_mode": ceil_mode}  # fmt: skip
    (out_shape,) = shapes.infer_shapes("max_pool", [shape], pool_attrs)
    assert out_shape is not None, "max_pool always has a result"
    spatial = len(kernel)
    pads = list(pads)
    for i, (size, o, k, s, d) in enumerate(
        zip(shape[2:], out_shape[2:], kernel, strides, dilations)
    ):
        needed = (o - 1) * s + (k - 1) * d + 1 - (size + pads[i] + pads[i + spatial])
        pads[i + spatial] += max(0, needed)
    channels = shape[1]
    ones = const_weight(ctx, "ones", np.ones((channels, 1, *kernel)))
    attrs = {
        "kernel_shape": kernel,
        "strides": strides,
        "pads": pads,
        "dilations": dilations,
        "group": channels,
    }
    op = ctx.output if output else ctx.emit
    (total,) = op(
        "conv", [x, ones, ctx.importer.none_value()], attrs, shapes_=[list(out_shape)]
    )
    return total, list(out_shape)
