"""Import rules that resize: Upsample and Resize, as top.interp."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.ir import SSAValue

from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule
from tpu_xdsl.frontend.rules.elementwise import (
    cast_output,
    shape_of,
)
from tpu_xdsl.frontend.rules.tensor.common import (
    const_input,
    data_dtype,
    data_value,
    ints_of,
    moved,
    norm_axes,
)

_COORDINATE_MODES = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _interp(
    ctx: NodeContext,
    x: SSAValue,
    scales: Sequence[float],
    target: Sequence[int],
    mode: str,
    coordinate_mode: str,
    nearest_mode: str | None,
    *,
    last: bool,
) -> SSAValue:
    """One top.interp to `target`; `last` makes it the node's output."""
    source = shape_of(x)
    if list(target[:2]) != list(source[:2]):
        raise ctx.error(
            f"resizing N or C ({list(source)} -> {list(target)}) is not supported"
        )
    attrs = {
        "mode": mode,
        "coordinate_mode": coordinate_mode,
        "nearest_mode": nearest_mode if mode == "nearest" else None,
        "scales": [float(s) for s in scales],
    }
    if not last:
        return ctx.emit("interp", [x], attrs, shapes_=[list(target)])[0]
    dtype = data_dtype(ctx)
    if dtype.kind in "iu" and mode != "nearest":
        # Integer results round half to even and saturate, as ONNX's reference.
        (y,) = ctx.emit("interp", [x], attrs, shapes_=[list(target)])
        (y,) = ctx.emit("round", [y])
        info = np.iinfo(dtype)
        (y,) = ctx.emit("clip", [y], {"min": float(info.min), "max": float(info.max)})
        return cast_output(ctx, y, dtype)
    return moved(ctx, "interp", [x], attrs, target)


def _scaled_size(source: Sequence[int], scales: Sequence[float]) -> list[int]:
    """floor(dim * scale), computed in double as ONNX's reference does."""
    return [math.floor(d * float(s)) for d, s in zip(source, scales)]


def _resize_asymmetric(ctx: NodeContext, scales: Sequence[float], mode: str) -> None:
    """Upsample and opset-10 Resize: asymmetric coordinates (x / scale); nearest
    rounds down when enlarging and up when shrinking (onnxruntime's rule), so
    mixed scales take one interp per direction."""
    source = ctx.shape(0)
    if len(scales) != len(source):
        raise ctx.error(
            f"scales {list(scales)} must have one entry per input dim ({len(source)})"
        )
    if any(s <= 0 for s in scales):
        raise ctx.error(f"scales {list(scales)} must be positive")
    if mode in ("linear", "bilinear"):
        _interp(
            ctx,
            ctx.input(0),
            scales,
            _scaled_size(source, scales),
            "linear",
            "asymmetric",
            None,
            last=True,
        )
        return
    if mode != "nearest":
        raise ctx.error(f"mode '{mode}' is not supported (nearest, linear)")
    target = _scaled_size(source, scales)
    integral = all(float(s).is_integer() for s in scales)
    if len(source) == 4 and integral and scales[0] == scales[1] == 1:
        attrs = {"scale_h": int(scales[2]), "scale_w": int(scales[3])}
        moved(ctx, "upsample", [data_value(ctx)], attrs, target)
        return
    shrinks, grows = any(s < 1 for s in scales), any(s > 1 for s in scales)
    x = ctx.input(0)
    if shrinks and grows:
        down = [min(s, 1.0) for s in scales]
        x = _interp(
            ctx,
            x,
            down,
            _scaled_size(source, down),
            "nearest",
            "asymmetric",
            "ceil",
            last=False,
        )
        _interp(
            ctx,
            x,
            [max(s, 1.0) for s in scales],
            target,
            "nearest",
            "asymmetric",
            "floor",
            last=True,
        )
        return
    _interp(
        ctx,
        x,
        scales,
        target,
        "nearest",
        "asymmetric",
        "ceil" if shrinks else "floor",
        last=True,
    )


@onnx_rule("Upsample", until=6)
def upsample_v1(ctx: NodeContext) -> None:
    """Opset 1: height_scale and width_scale of NCHW."""
    scales = [
        1.0,
        1.0,
        float(ctx.attr("height_scale", 1.0)),
        float(ctx.attr("width_scale", 1.0)),
    ]
    _resize_asymmetric(ctx, scales, ctx.attr("mode", "nearest"))


@onnx_rule("Upsample", since=7)
def upsample(ctx: NodeContext) -> None:
    """Scales per dim: an attribute in opsets 7-8, input 1 from opset 9."""
    if ctx.opset < 9:
        scales = ctx.attr("scales")
        if scales is None:
            raise ctx.error("the 'scales' attribute is required")
    else:
        scales = ctx.require_const(1, "scales").reshape(-1).tolist()
    _resize_asymmetric(ctx, [float(s) for s in scales], ctx.attr("mode", "nearest"))


@onnx_rule("Resize", until=10)
def resize_v10(ctx: NodeContext) -> None:
    """Opset 10: scales (input 1) with Upsample's asymmetric coordinates."""
    scales = ctx.require_const(1, "scales").reshape(-1).tolist()
    _resize_asymmetric(ctx, [float(s) for s in scales], ctx.attr("mode", "nearest"))


def _resize_sizes(
    ctx: NodeContext, sizes_input: np.ndarray, axes: list[int]
) -> tuple[list[float], list[int]]:
    """Scales and output size from `sizes` (with opset 18's keep_aspect_ratio_policy)."""
    source = ctx.shape(0)
    sizes = ints_of(sizes_input)
    if len(sizes) != len(axes):
        raise ctx.error(
            f"sizes {sizes} must have one entry per resized axis ({len(axes)})"
        )
    target, scales = list(source), [1.0] * len(source)
    for axis, s in zip(axes, sizes):
        target[axis], scales[axis] = s, s / source[axis]
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    if policy == "stretch":
        return scales, target
    if policy not in ("not_larger", "not_smaller"):
        raise ctx.error(f"keep_aspect_ratio_policy '{policy}' is not an ONNX value")
    pick = min if policy == "not_larger" else max
    scale = pick(scales[a] for a in axes)
    for axis in axes:
        scales[axis] = scale
        target[axis] = int(scale * source[axis] + 0.5)
    return scales, target


@onnx_rule("Resize", since=11)
def resize(ctx: NodeContext) -> None:
    """Scales (input 2) or sizes (input 3), over `axes` from opset 18; modes
    nearest, linear (N-linear) and cubic (a = -0.75, exclude_outside 0)."""
    source = ctx.shape(0)
    rank = len(source)
    mode = ctx.attr("mode", "nearest")
    coordinate_mode = ctx.attr("coordinate_transformation_mode", "half_pixel")
    nearest_mode = ctx.attr("nearest_mode", "round_prefer_floor")
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.error(f"mode '{mode}' is not an ONNX value")
    if coordinate_mode not in _COORDINATE_MODES:
        raise ctx.error(
            f"coordinate_transformation_mode '{coordinate_mode}' is not supported ({', '.join(_COORDINATE_MODES)})"
        )
    if mode == "nearest" and nearest_mode not in _NEAREST_MODES:
        raise ctx.error(f"nearest_mode '{nearest_mode}' is not an ONNX value")
    if mode == "cubic" and (
        ctx.attr("cubic_coeff_a", -0.75) != -0.75 or ctx.attr("exclude_outside", 0)
    ):
        raise ctx.error(
            "cubic mode is supported with cubic_coeff_a = -0.75 and exclude_outside = 0 only"
        )
    axes = (
        list(range(rank))
        if ctx.attr("axes") is None
        else norm_axes(ctx, ints_of(ctx.attr("axes")), rank)
    )
    scales_in = const_input(ctx, 2, "scales")
    sizes = const_input(ctx, 3, "sizes")
    if (scales_in is None) == (sizes is None):
        raise ctx.error(
            "exactly one of scales (input 2) and sizes (input 3) must be given"
        )
    if sizes is not None:
        scales, target = _resize_sizes(ctx, sizes, axes)
    else:
        assert scales_in is not None, "exactly one of scales and sizes is given"
        given = scales_in.reshape(-1).tolist()
        if len(given) != len(axes):
            raise ctx.error(
                f"scales {given} must have one entry per resized axis ({len(axes)})"
            )
        if any(s <= 0 for s in given):
            raise ctx.error(f"scales {given} must be positive")
        scales = [1.0] * rank
        for axis, s in zip(axes, given):
            scales[axis] = float(s)
        target = _scaled_size(source, scales)
    if ctx.attr("antialias", 0) and mode != "nearest" and any(s < 1 for s in scales):
        raise ctx.error("antialias when downsampling is not supported")
    _interp(
        ctx,
        ctx.input(0),
        scales,
        target,
        mode,
        coordinate_mode,
        nearest_mode,
        last=True,
    )
