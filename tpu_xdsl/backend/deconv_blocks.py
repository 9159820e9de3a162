"""An INT8 deconvolution whose kernel equals its stride, as a 1x1 convolution over
OC x k x k output channels followed by a depth2space.

With kernel k x k and stride k (no padding, no dilation, one group) the taps of a
deconvolution never overlap: output pixel (k i + ky, k j + kx) of channel oc is
sum_ic x[ic, i, j] w[ic, oc, ky, kx] (plus the bias), requantized per oc. On the
array a deconvolution costs its taps over every output pixel with its OC on the
lanes, so PP-OCR's detection head (24 -> 1 channel, 2x2 stride 2) keeps one lane of
64 busy. As a 1x1 convolution the same sums come out as channel oc k^2 + ky k + kx
of [N, OC k^2, H, W] (each with oc's bias, multiplier and shift), one tap over the
input pixels with OC k^2 lanes busy, and depth2space (CRD) puts them in place: a
DMA copy. The int32 sums and their requantization are the same, so the results
are the interpreter's bit for bit.

Only where it pays: the array cycles saved (`timing`'s figures) must outweigh the copy.
A 1x1 convolution that reads such a depth2space (the next block deconvolution of a
DBNet head) then moves before it (`convs_before_depth2space`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Attribute, Operation, ParametrizedAttribute, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.dialects import op_class
from tpu_xdsl.dialects.attr_values import from_py, to_py
from tpu_xdsl.dialects.module import is_none, main_func, tensor_names
from tpu_xdsl.dialects.quant_types import qparams_of
from tpu_xdsl.weights import create_weight, weight_name, weights_of

_PER_CHANNEL = ("multiplier", "rshift")


def split_block_deconvs(module: ModuleOp, chip: ChipConfig) -> list[str]:
    """Rewrite every INT8 deconvolution with kernel == stride where that pays; the names
    of the deconvolutions rewritten."""
    done = []
    for op in list(main_func(module).body.block.ops):
        if op.name == "tpu.deconv" and _pays(op, chip, module):
            done.append(_rewrite(op, module))
    return done


def _shape(value: SSAValue) -> list[int]:
    return list(value.type.get_shape())  # type: ignore[attr-defined]


def _attr(op: Operation, name: str, default: Any = None) -> Any:
    attr = op.attributes.get(name)
    return default if attr is None else to_py(attr)


def _requantized_per_channel(op: Operation) -> bool:
    """An INT8 op requantized by a multiplier and a shift listed per output channel."""
    return _attr(op, "quant_mode") == "multiplier_shift" and all(
        isinstance(_attr(op, name), list) for name in _PER_CHANNEL)


def _pays(op: Operation, chip: ChipConfig, module: ModuleOp) -> bool:
    x, w, y = op.operands[0], op.operands[1], op.results[0]
    if not all(isinstance(v.type, TensorType) and len(_shape(v)) == 4 for v in (x, w, y)):
        return False
    owner = w.owner
    if not isinstance(owner, Operation) or owner.name != "top.weight":
        return False
    kernel = list(_attr(op, "kernel_shape", []))
    if len(kernel) != 2 or kernel[0] != kernel[1] or list(_attr(op, "strides", [1, 1])) != kernel:
        return False
    if kernel[0] < 2 or any(_attr(op, "pads", [0] * 4)) or any(_attr(op, "output_padding", [0, 0])):
        return False
    if int(_attr(op, "group", 1)) != 1 or any(d != 1 for d in _attr(op, "dilations", [1, 1])):
        return False
    if not _requantized_per_channel(op) or any(
        name.startswith("zero_point") or name.endswith("zero_point") for name in op.attributes
    ):
        return False
    out_qparams = qparams_of(y.type, weights_of(module))
    if out_qparams is None or getattr(out_qparams, "zero_point", 0):
        return False
    n, ic, h, width = _shape(x)
    oc = _shape(y)[1]
    taps = kernel[0] * kernel[1]
    pixels = chip.pixel_parallel["INT8"]
    ic_steps = math.ceil(ic / chip.ic_parallel["INT8"])
    before = math.ceil(oc / chip.npu_num) * ic_steps * taps * math.ceil(n * h * width * taps / pixels)
    after = math.ceil(oc * taps / chip.npu_num) * ic_steps * math.ceil(n * h * width / pixels)
    copy_rate = min(chip.ddr_to_lmem_bytes_per_s, chip.lmem_to_ddr_bytes_per_s) / chip.clock_hz
    copy = chip.dma_latency + n * oc * taps * h * width / copy_rate
    return before - after > copy


def _rewrite(op: Operation, module: ModuleOp) -> str:
    x, w, bias, y = op.operands[0], op.operands[1], op.operands[2], op.results[0]
    name = (tensor_names(op) or ["deconv"])[0]
    block = int(_attr(op, "kernel_shape")[0])
    taps = block * block
    n, _, h, width = _shape(x)
    oc = _shape(y)[1]
    store = weights_of(module)
    owner = w.owner
    assert isinstance(owner, Operation)
    filters = np.asarray(store[weight_name(owner)])  # [IC, OC, k, k]
    folded = np.ascontiguousarray(filters.transpose(1, 2, 3, 0).reshape(oc * taps, -1, 1, 1))
    new_w = create_weight(module, f"{weight_name(owner)}_1x1", folded, insert_before=op)
    operands: list[SSAValue] = [x, new_w, bias]
    if not is_none(bias):
        bias_owner = bias.owner
        assert isinstance(bias_owner, Operation)
        repeated = np.repeat(np.asarray(store[weight_name(bias_owner)]), taps)
        operands[2] = create_weight(module, f"{weight_name(bias_owner)}_1x1", repeated, insert_before=op)
    t = y.type
    assert isinstance(t, TensorType)
    attributes: dict[str, Attribute] = {
        key: value for key, value in op.attributes.items() if key not in ("output_padding",)
    }
    attributes["kernel_shape"] = from_py([1, 1])
    attributes["strides"] = from_py([1, 1])
    attributes["pads"] = from_py([0, 0, 0, 0])
    attributes["names"] = ArrayAttr([StringAttr(f"{name}_blocks")])
    for key in _PER_CHANNEL:
        attributes[key] = from_py([int(v) for v in np.repeat(np.asarray(_attr(op, key)), taps)])
    conv_type = TensorType(t.element_type, [n, oc * taps, h, width], _blocks_encoding(t, module, taps))
    conv = op_class("tpu.conv").build(operands=operands, result_types=[conv_type], attributes=attributes)
    space = op_class("tpu.depth2space").build(
        operands=[conv.results[0]], result_types=[t],
        attributes={"block_size": from_py(block), "mode": from_py("CRD"), "names": op.attributes["names"]},
    )
    Rewriter.insert_op([conv], InsertPoint.before(op))
    Rewriter.replace_op(op, space)
    if not owner.results[0].uses:
        Rewriter.erase_op(owner)
    return name


def _blocks_encoding(t: TensorType, module: ModuleOp, taps: int) -> Attribute:
    """The deconvolution's per-channel scales, each repeated for the k x k channels of its
    blocks (a new entry); a per-tensor encoding as it is."""
    return _spread_encoding(t, module, np.repeat(np.arange(t.get_shape()[1]), taps))


def convs_before_depth2space(module: ModuleOp, chip: ChipConfig) -> list[str]:
    """Move every INT8 1x1 convolution that alone reads a depth2space before it, where
    that pays; the names of the convolutions moved.

    A 1x1 convolution mixes the channels of each pixel, and a depth2space only moves
    pixels: conv(depth2space(x)) is depth2space(conv'(x)), where conv' gives output
    channel o of block position k from the input channels of that same block position
    (a block-diagonal filter, zeros elsewhere; bias, multiplier and shift repeated per
    position). The int32 sums have the same terms, so the results are the same bit for
    bit. A detection head of two block deconvolutions in a row (DBNet's: 96 -> 24 -> 1
    channels, each 2x2 stride 2) then copies its narrow output through DDR instead of
    its wide input, and the first block convolution's group computes the second.
    """
    done = []
    for op in list(main_func(module).body.block.ops):
        space = _moved_space(op)
        if space is not None and _move_pays(op, space, chip):
            done.append(_move_before_space(op, space, module))
    return done


def _moved_space(conv: Operation) -> Operation | None:
    """The depth2space an INT8 1x1 convolution alone reads, when the convolution can move
    before it; else None."""
    if conv.name != "tpu.conv" or not isinstance(conv.operands[0].owner, Operation):
        return None
    space = conv.operands[0].owner
    if space.name != "tpu.depth2space" or len(list(space.results[0].uses)) != 1:
        return None
    if _attr(space, "mode", "DCR") not in ("DCR", "CRD"):
        return None
    w = conv.operands[1]
    owner = w.owner
    if not isinstance(owner, Operation) or owner.name != "top.weight" or list(_shape(w)[2:]) != [1, 1]:
        return None
    if list(_attr(conv, "strides", [1, 1])) != [1, 1] or any(_attr(conv, "pads", [0] * 4)):
        return None
    if int(_attr(conv, "group", 1)) != 1:
        return None
    if not _requantized_per_channel(conv) or any("zero_point" in name for name in conv.attributes):
        return None
    bias = conv.operands[2] if len(conv.operands) > 2 else None
    if bias is not None and not is_none(bias):
        bias_owner = bias.owner
        if not isinstance(bias_owner, Operation) or bias_owner.name != "top.weight":
            return None
    return space


def _move_pays(conv: Operation, space: Operation, chip: ChipConfig) -> bool:
    """The array cycles and the copy (DMA bytes) after the move are fewer than before."""
    n, wide, h, width = _shape(space.operands[0])
    oc, ic = _shape(conv.operands[1])[:2]
    taps = wide // ic

    def array(out_channels: int, in_channels: int, pixels: int) -> int:
        return (math.ceil(out_channels / chip.npu_num) * math.ceil(in_channels / chip.ic_parallel["INT8"])
                * math.ceil(pixels / chip.pixel_parallel["INT8"]))

    copy_rate = min(chip.ddr_to_lmem_bytes_per_s, chip.lmem_to_ddr_bytes_per_s) / chip.clock_hz
    before = array(oc, ic, n * h * width * taps) + n * wide * h * width / copy_rate
    after = array(oc * taps, wide, n * h * width) + n * oc * taps * h * width / copy_rate
    return after < before


def _block_channels(mode: str, channels: int, taps: int) -> np.ndarray:
    """For each channel of a depth2space's input, (its channel after, its block position)."""
    index = np.arange(channels * taps)
    if mode == "CRD":
        return np.stack([index // taps, index % taps], axis=1)
    return np.stack([index % channels, index // channels], axis=1)


def _move_before_space(conv: Operation, space: Operation, module: ModuleOp) -> str:
    x, w, y = space.operands[0], conv.operands[1], conv.results[0]
    bias = conv.operands[2] if len(conv.operands) > 2 else None
    name = (tensor_names(conv) or ["conv"])[0]
    mode = str(_attr(space, "mode", "DCR"))
    n, wide, h, width = _shape(x)
    oc, ic = _shape(w)[:2]
    taps = wide // ic
    store = weights_of(module)
    owner = w.owner
    assert isinstance(owner, Operation)
    filters = np.asarray(store[weight_name(owner)])[:, :, 0, 0]  # [OC, IC]
    inputs, outputs = _block_channels(mode, ic, taps), _block_channels(mode, oc, taps)
    same_block = outputs[:, 1][:, None] == inputs[:, 1][None, :]
    folded = np.where(same_block, filters[outputs[:, 0]][:, inputs[:, 0]], 0).astype(filters.dtype)
    new_w = create_weight(module, f"{weight_name(owner)}_blocks", folded[:, :, None, None], insert_before=conv)
    operands: list[SSAValue] = [x, new_w, *conv.operands[2:]]
    if bias is not None and not is_none(bias):
        bias_owner = bias.owner
        assert isinstance(bias_owner, Operation)
        spread = np.asarray(store[weight_name(bias_owner)]).reshape(-1)[outputs[:, 0]]
        operands[2] = create_weight(module, f"{weight_name(bias_owner)}_blocks", spread, insert_before=conv)
    t = y.type
    assert isinstance(t, TensorType)
    attributes: dict[str, Attribute] = dict(conv.attributes)
    attributes["names"] = ArrayAttr([StringAttr(f"{name}_before_space")])
    for key in _PER_CHANNEL:
        values = np.asarray(_attr(conv, key))
        attributes[key] = from_py([int(v) for v in (values[outputs[:, 0]] if values.size > 1 else values)])
    encoding = _spread_encoding(t, module, outputs[:, 0])
    moved = op_class("tpu.conv").build(operands=operands, result_types=[
        TensorType(t.element_type, [n, oc * taps, h, width], encoding)], attributes=attributes)
    after = op_class("tpu.depth2space").build(
        operands=[moved.results[0]], result_types=[t],
        attributes={"block_size": space.attributes["block_size"], "mode": from_py(mode),
                    "names": conv.attributes["names"]},
    )
    Rewriter.insert_op([moved], InsertPoint.before(conv))
    Rewriter.replace_op(conv, after)
    Rewriter.erase_op(space)
    if not owner.results[0].uses:
        Rewriter.erase_op(owner)
    if bias is not None and not is_none(bias) and isinstance(bias.owner, Operation) and not bias.uses:
        Rewriter.erase_op(bias.owner)
    return name


def _spread_encoding(t: TensorType, module: ModuleOp, channels: np.ndarray) -> Attribute:
    """A per-channel encoding with channel i's scale taken from channel `channels[i]` (a
    new entry); a per-tensor encoding as it is."""
    encoding = t.encoding
    entry = getattr(encoding, "scales", None)
    if entry is None or not isinstance(encoding, ParametrizedAttribute):
        return encoding
    store = weights_of(module)
    new_entry = store.unique_name(f"{entry.data}_blocks")
    store[new_entry] = np.asarray(store[entry.data])[channels]
    parameters = list(encoding.parameters)
    parameters[parameters.index(entry)] = StringAttr(new_entry)
    return type(encoding).new(parameters)
