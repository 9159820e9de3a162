"""TOP convolutions and pools -> TOSA: channels-last, weights reordered at export time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from tpu_xdsl.export.rules import (
    Context,
    ExportError,
    ShapedOp,
    acc_type,
    optional_operand,
    result_element,
    result_shape,
    rule,
    weight_array,
)
from tpu_xdsl.export.tosa_builder import Val, array_i64, int32, numpy_dtype, tensor_type

# -- convolutions and pools -------------------------------------------------------------------


def _trimmed(size: int, kernel: int, before: int, after: int, stride: int, dilation: int) -> tuple[int, int]:
    """TOSA's divisibility rule, `(size - 1 + before + after - (kernel - 1) * dilation) %
    stride == 0`, met without changing the output: the end padding less the remainder, and
    when that is not enough, how many trailing rows of the input to crop (they are never
    read)."""
    remainder = (size - 1 + before + after - (kernel - 1) * dilation) % stride
    trim = min(after, remainder)
    return after - trim, remainder - trim


@rule("conv")
def conv(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    x, w, bias = inputs[0], inputs[1], optional_operand(inputs, 2)
    spatial = len(attrs["kernel_shape"])
    if spatial == 1:  # a 1-D conv is a 2-D conv of height 1
        return _conv1d(ctx, op, x, w, bias, attrs)
    if spatial != 2:
        raise ExportError(f"{op.name}: only 1-D and 2-D convolutions export to TOSA, not {spatial}-D")
    out_shape, element = result_shape(op), result_element(op)
    group = int(attrs.get("group", 1))
    strides = list(attrs.get("strides") or [1, 1])
    dilations = list(attrs.get("dilations") or [1, 1])
    pads = list(attrs.get("pads") or [0, 0, 0, 0])  # ONNX: [top, left, bottom, right]
    tosa_pad = [pads[0], pads[2], pads[1], pads[3]]
    crop = [0, 0]
    for i in range(2):
        tosa_pad[2 * i + 1], crop[i] = _trimmed(x.shape[2 + i], w.shape[2 + i], tosa_pad[2 * i],
                                                tosa_pad[2 * i + 1], strides[i], dilations[i])
    weight = weight_array(op, w, "filter")
    channels = x.shape[1]
    bias_array = weight_array(op, bias, "bias") if bias is not None and bias.const is not None else None
    if bias is not None and bias_array is None:
        raise ExportError(f"{op.name}: a bias computed at run time does not export")
    out_channels = out_shape[1]
    if bias_array is None:
        bias_array = np.zeros(out_channels, numpy_dtype(element))
    zp = ctx.b.zero_point(element)
    props = {"pad": array_i64(tosa_pad), "stride": array_i64(strides), "dilation": array_i64(dilations),
                 "acc_type": acc_type(element)}
    physical = [out_shape[0], out_shape[2], out_shape[3], out_channels]
    source = ctx.b.channels_last(x)
    if any(crop):
        kept = [x.shape[0], x.shape[2] - crop[0], x.shape[3] - crop[1], channels]
        source = ctx.b.op("slice", [source, ctx.b.shape([0, 0, 0, 0]), ctx.b.shape(kept)], tensor_type(kept, element))
    in_h, in_w = x.shape[2] - crop[0], x.shape[3] - crop[1]
    if group == 1:
        w_arr = ctx.b.const(weight.transpose(0, 2, 3, 1))  # OIHW -> OHWI
        out = ctx.b.op("conv2d", [source, w_arr, ctx.b.const(bias_array), zp, zp], tensor_type(physical, element),
                       **props)
    elif group == channels and weight.shape[1] == 1:  # depthwise: [C*M, 1, KH, KW] -> [KH, KW, C, M]
        m = out_channels // channels
        w_arr = ctx.b.const(weight.reshape(channels, m, *weight.shape[2:]).transpose(2, 3, 0, 1))
        out = ctx.b.op("depthwise_conv2d", [source, w_arr, ctx.b.const(bias_array), zp, zp],
                       tensor_type(physical, element), **props)
    else:  # grouped: one conv per group on its channels, concatenated
        per_in, per_out = channels // group, out_channels // group
        parts = []
        for g in range(group):
            piece = ctx.b.op("slice", [source, ctx.b.shape([0, 0, 0, g * per_in]),
                                       ctx.b.shape([x.shape[0], in_h, in_w, per_in])],
                             tensor_type([x.shape[0], in_h, in_w, per_in], element))
            w_arr = ctx.b.const(weight[g * per_out:(g + 1) * per_out].transpose(0, 2, 3, 1))
            b_arr = ctx.b.const(bias_array[g * per_out:(g + 1) * per_out])
            parts.append(ctx.b.op("conv2d", [piece, w_arr, b_arr, zp, zp],
                                  tensor_type([*physical[:3], per_out], element), **props))
        out = ctx.b.op("concat", parts, tensor_type(physical, element), axis=int32(3))
    y = ctx.new(out, out_shape, element, channels_last=True)
    return [ctx.fused_relu(y, attrs)]


def _conv1d(ctx: Context, op: Operation, x: Val, w: Val, bias: Val | None, attrs: dict[str, Any]) -> list[Val]:
    """[N, C, L] conv as [N, C, 1, L]: the rule for 2-D on reshaped operands."""
    out_shape = result_shape(op)
    x4 = ctx.new(ctx.b.reshape(ctx.b.logical(x), [*x.shape[:2], 1, x.shape[2]]), [*x.shape[:2], 1, x.shape[2]],
                 x.element)
    weight = weight_array(op, w, "filter")
    w4 = Val((*weight.shape[:2], 1, weight.shape[2]), w.element, const=weight.reshape(*weight.shape[:2], 1, -1))
    pads = list(attrs.get("pads") or [0, 0])
    attrs2 = {**attrs, "kernel_shape": [1, attrs["kernel_shape"][0]],
              "strides": [1, *(attrs.get("strides") or [1])], "dilations": [1, *(attrs.get("dilations") or [1])],
              "pads": [0, pads[0], 0, pads[1]]}
    shim = ShapedOp(op, [out_shape[0], out_shape[1], 1, out_shape[2]])
    (y4,) = conv(ctx, shim, [x4, w4, *([bias] if bias is not None else [])], attrs2)  # pyright: ignore[reportArgumentType]
    return [ctx.new(ctx.b.reshape(ctx.b.logical(y4), out_shape), out_shape, y4.element)]


@rule("deconv")
def deconv(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """tosa.transpose_conv2d; a dilated kernel is the kernel with dilation - 1 zero rows
    between its taps (the same sums), and groups are one deconvolution per group."""
    x, w, bias = inputs[0], inputs[1], optional_operand(inputs, 2)
    if len(attrs["kernel_shape"]) != 2:
        raise ExportError(f"{op.name}: only 2-D deconvolutions export to TOSA (TOSA has no 1-D or 3-D form)")
    out_shape, element = result_shape(op), result_element(op)
    weight = weight_array(op, w, "filter")  # [C_in, C_out / group, KH, KW]
    bias_array = weight_array(op, bias, "bias") if bias is not None else np.zeros(out_shape[1], numpy_dtype(element))
    zp = ctx.b.zero_point(element)
    out = transpose_conv(ctx, x, weight, bias_array, attrs, out_shape, element, [zp, zp])
    return [ctx.fused_relu(ctx.new(out, out_shape, element, True), attrs)]


def transpose_conv(ctx: Context, x: Val, weight: np.ndarray, bias: np.ndarray, attrs: dict[str, Any],
                   out_shape: Sequence[int], result: Attribute, zero_points: Sequence[SSAValue]) -> SSAValue:
    """An ONNX ConvTranspose (weight [C_in, C_out / group, KH, KW]) as `tosa.transpose_conv2d`
    on `x` channels-last, results of element type `result` (the float rule's element, the INT8
    rule's i32 sums): a dilated kernel is the kernel with dilation - 1 zero rows between its
    taps (the same sums), pads and output_padding become out_pad, and groups are one
    deconvolution per group's channels, concatenated."""
    dilations = list(attrs.get("dilations") or [1, 1])
    if any(d != 1 for d in dilations):
        kh, kw = weight.shape[2:]
        dilated = np.zeros((*weight.shape[:2], (kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1), weight.dtype)
        dilated[:, :, ::dilations[0], ::dilations[1]] = weight
        weight = dilated
    pads = list(attrs.get("pads") or [0, 0, 0, 0])
    extra = list(attrs.get("output_padding") or [0, 0])  # grows the bottom/right edge
    out_pad = [-pads[0], -pads[2] + extra[0], -pads[1], -pads[3] + extra[1]]
    props = {"out_pad": array_i64(out_pad), "stride": array_i64(list(attrs.get("strides") or [1, 1])),
             "acc_type": acc_type(result)}
    physical = [out_shape[0], out_shape[2], out_shape[3], out_shape[1]]
    source = ctx.b.channels_last(x)
    source_type = source.type
    assert isinstance(source_type, TensorType)
    group = int(attrs.get("group", 1))
    per_in, per_out = x.shape[1] // group, out_shape[1] // group
    parts = []
    for g in range(group):
        piece = source
        if group > 1:
            sizes = [x.shape[0], x.shape[2], x.shape[3], per_in]
            piece = ctx.b.op("slice", [source, ctx.b.shape([0, 0, 0, g * per_in]), ctx.b.shape(sizes)],
                             tensor_type(sizes, source_type.element_type))
        w_g = weight[g * per_in:(g + 1) * per_in].transpose(1, 2, 3, 0)  # [C_out / group, KH, KW, C_in / group]
        parts.append(ctx.b.op("transpose_conv2d", [piece, ctx.b.const(np.ascontiguousarray(w_g)),
                                                   ctx.b.const(bias[g * per_out:(g + 1) * per_out]), *zero_points],
                              tensor_type([*physical[:3], per_out], result), **props))
    return parts[0] if group == 1 else ctx.b.op("concat", parts, tensor_type(physical, result), axis=int32(3))


def _pool(ctx: Context, op: Operation, x: Val, attrs: dict[str, Any], name: str) -> Val:
    out_shape, element = result_shape(op), result_element(op)
    kernel = list(attrs["kernel_shape"])
    if len(kernel) == 1:  # [N, C, L] as [N, C, 1, L]
        x4 = ctx.new(ctx.b.reshape(ctx.b.logical(x), [*x.shape[:2], 1, x.shape[2]]), [*x.shape[:2], 1, x.shape[2]],
                     x.element)
        pads = list(attrs.get("pads") or [0, 0])
        attrs2 = {**attrs, "kernel_shape": [1, kernel[0]], "strides": [1, *(attrs.get("strides") or [1])],
                  "pads": [0, pads[0], 0, pads[1]]}
        y4 = _pool(ctx, ShapedOp(op, [*out_shape[:2], 1, out_shape[2]]), x4, attrs2, name)  # pyright: ignore[reportArgumentType]
        return ctx.new(ctx.b.reshape(ctx.b.logical(y4), out_shape), out_shape, element)
    if len(kernel) != 2:
        raise ExportError(f"{op.name}: 3-D pools do not export to TOSA (it has 2-D pools only)")
    strides = list(attrs.get("strides") or [1, 1])
    pads = list(attrs.get("pads") or [0, 0, 0, 0])
    tosa_pad = [pads[0], pads[2], pads[1], pads[3]]
    source = ctx.b.channels_last(x)
    in_h, in_w = x.shape[2], x.shape[3]
    if name == "avg_pool2d" and attrs.get("count_include_pad") and any(tosa_pad):
        padded = [x.shape[0], in_h + tosa_pad[0] + tosa_pad[1], in_w + tosa_pad[2] + tosa_pad[3], x.shape[1]]
        source = ctx.b.op("pad", [source, ctx.b.shape([0, 0, *tosa_pad, 0, 0]), ctx.b.zero_point(element)],
                          tensor_type(padded, element))
        in_h, in_w, tosa_pad = padded[1], padded[2], [0, 0, 0, 0]
    # ceil_mode and the divisibility rule: the bottom/right padding is what makes the
    # declared output size come out exactly; where it would be negative, the last window
    # ends before the input does and the rows after it are cropped (never read).
    crop = [0, 0]
    for i, (size, out) in enumerate(((in_h, out_shape[2]), (in_w, out_shape[3]))):
        tosa_pad[2 * i + 1] = (out - 1) * strides[i] + kernel[i] - size - tosa_pad[2 * i]
        if tosa_pad[2 * i + 1] < 0:
            crop[i], tosa_pad[2 * i + 1] = -tosa_pad[2 * i + 1], 0
    if any(crop):
        kept = [x.shape[0], in_h - crop[0], in_w - crop[1], x.shape[1]]
        source = ctx.b.op("slice", [source, ctx.b.shape([0, 0, 0, 0]), ctx.b.shape(kept)], tensor_type(kept, element))
    # TOSA leaves padding out of avg_pool2d's divisor, as ONNX's count_include_pad=0 does.
    physical = [out_shape[0], out_shape[2], out_shape[3], out_shape[1]]
    props: dict[str, Attribute] = {
        "kernel": array_i64(kernel), "stride": array_i64(strides), "pad": array_i64(tosa_pad),
    }
    operands = [source]
    if name == "avg_pool2d":
        zp = ctx.b.zero_point(element)
        operands += [zp, zp]
        props["acc_type"] = acc_type(element)
    out = ctx.b.op(name, operands, tensor_type(physical, element), **props)
    return ctx.fused_relu(ctx.new(out, out_shape, element, True), attrs)


@rule("max_pool")
def max_pool(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    if any(d != 1 for d in attrs.get("dilations") or []):
        raise ExportError(f"{op.name}: dilated max pools do not export to TOSA")
    return [_pool(ctx, op, inputs[0], attrs, "max_pool2d")]


@rule("avg_pool")
def avg_pool(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    return [_pool(ctx, op, inputs[0], attrs, "avg_pool2d")]
