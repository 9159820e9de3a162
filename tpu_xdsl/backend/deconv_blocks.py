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
    if _attr(op, "quant_mode") != "multiplier_shift" or any(
        name.startswith("zero_point") or name.endswith("zero_point") for name in op.attributes
    ):
        return False
    out_qparams = qparams_of(y.type, weights_of(module))
    if out_qparams is None or getattr(out_qparams, "zero_point", 0):
        return False
    for name in _PER_CHANNEL:
        values = _attr(op, name)
        if not isinstance(values, list):
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
    encoding = t.encoding
    entry = getattr(encoding, "scales", None)
    if entry is None or not isinstance(encoding, ParametrizedAttribute):
        return encoding
    store = weights_of(module)
    new_entry = store.unique_name(f"{entry.data}_blocks")
    store[new_entry] = np.repeat(np.asarray(store[entry.data]), taps)
    parameters = list(encoding.parameters)
    parameters[parameters.index(entry)] = StringAttr(new_entry)
    return type(encoding).new(parameters)
