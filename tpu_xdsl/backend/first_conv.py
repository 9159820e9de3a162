"""The "3ic" repacking of an INT8 convolution on few input channels (TPU-MLIR's
`use_3ic_optimize`): its kernel rows folded into its input channels.

A stem such as ResNet-50's 7x7 stride-2 convolution on 3 channels keeps 3 of the
array's 64 input-channel slots busy for 49 taps. Folded, its input becomes
[N, kh x C, OH, W], channel ky x C + c holding the padded input's rows ky, ky + sh,
ky + 2 sh, ... of channel c, and the convolution a 1 x kw one over kh x C channels with
stride (1, sw): kh times fewer taps for the same MACs. The repacked input is a pad
(the H padding, with the input's zero point), one strided slice per kernel row and a
concat along channels: ops that only move data, which codegen emits as DMA copies. The
filter is the same integers reordered to [OC, kh x C, 1, kw]; the int32 sums are the
same, so the results are the interpreter's bit for bit.

Only where it pays: the taps saved on the array must outweigh the DMA copies
(`timing`'s figures), and kh x C must fit the array's input-channel parallelism.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.dialects import op_class
from tpu_xdsl.dialects.attr_values import from_py
from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.dialects.quant_types import qparams_of
from tpu_xdsl.kernels.quant import QParams
from tpu_xdsl.weights import create_weight, weight_name, weights_of

_INTEGER = (np.int8, np.uint8)


def repack_first_convs(module: ModuleOp, chip: ChipConfig) -> list[str]:
    """Fold the kernel rows of every INT8 convolution where that pays into its input
    channels; the names of the convolutions repacked."""
    repacked = []
    for op in list(main_func(module).body.block.ops):
        if op.name == "tpu.conv" and _pays(op, chip, module):
            repacked.append(_repack(op, module))
    return repacked


def _ints(op: Operation, name: str, default: list[int]) -> list[int]:
    attr = op.attributes.get(name)
    return default if attr is None else [int(a.value.data) for a in attr.data]  # type: ignore[attr-defined]


def _shape(value: SSAValue) -> list[int]:
    return list(value.type.get_shape())  # type: ignore[attr-defined]


def _pays(op: Operation, chip: ChipConfig, module: ModuleOp) -> bool:
    x, w = op.operands[0], op.operands[1]
    if not isinstance(x.type, TensorType) or len(_shape(x)) != 4 or len(_shape(w)) != 4:
        return False
    owner = w.owner
    if not isinstance(owner, Operation) or owner.name != "top.weight":
        return False
    group = op.attributes.get("group")
    if group is not None and int(group.value.data) != 1:  # type: ignore[attr-defined]
        return False
    if any(d != 1 for d in _ints(op, "dilations", [1, 1])):
        return False
    qparams = qparams_of(x.type, weights_of(module))
    if not isinstance(qparams, QParams) or qparams.zero_point or qparams.dtype not in _INTEGER:
        return False
    n, c, h, width = _shape(x)
    oc, _, kh, kw = _shape(w)
    _, _, oh, ow = _shape(op.results[0])
    sh, _ = _ints(op, "strides", [1, 1])
    top = _ints(op, "pads", [0, 0, 0, 0])[0]
    if kh < 2 or kh * c > chip.ic_parallel["INT8"] or (oh - 1) * sh + kh - h - top < 0:
        return False
    saved = math.ceil(oc / chip.npu_num) * (kh - 1) * kw * math.ceil(n * oh * ow / chip.pixel_parallel["INT8"])
    copy_rate = min(chip.ddr_to_lmem_bytes_per_s, chip.lmem_to_ddr_bytes_per_s) / chip.clock_hz
    moved = n * c * ((oh - 1) * sh + kh) * width + 2 * kh * n * c * oh * width
    cost = moved / copy_rate + (2 * kh + 2) * chip.dma_latency
    return saved > 2 * cost


def _named(kind: str, operands: list, result: TensorType, name: str, **attrs) -> Operation:
    attributes = {key: from_py(value) for key, value in attrs.items()}
    attributes["names"] = ArrayAttr([StringAttr(name)])
    return op_class(f"tpu.{kind}").build(operands=operands, result_types=[result], attributes=attributes)


def _repack(op: Operation, module: ModuleOp) -> str:
    x, w = op.operands[0], op.operands[1]
    name = (tensor_names(op) or ["conv"])[0]
    n, c, h, width = _shape(x)
    oc, _, kh, kw = _shape(w)
    oh = _shape(op.results[0])[2]
    sh, sw = _ints(op, "strides", [1, 1])
    top, left, _, right = _ints(op, "pads", [0, 0, 0, 0])
    rows = (oh - 1) * sh + kh
    t = x.type
    assert isinstance(t, TensorType)
    element, encoding = t.element_type, t.encoding
    ops: list[Operation] = []
    pad = _named("pad", [x], TensorType(element, [n, c, rows, width], encoding), f"{name}_3ic_pad",
                 pads=[0, 0, top, 0, 0, 0, rows - h - top, 0], mode="constant", value=0.0)
    ops.append(pad)
    parts = []
    for ky in range(kh):
        part = _named("slice", [pad.results[0]], TensorType(element, [n, c, oh, width], encoding),
                      f"{name}_3ic_row{ky}", starts=[ky], ends=[ky + (oh - 1) * sh + 1], axes=[2], steps=[sh])
        ops.append(part)
        parts.append(part.results[0])
    concat = _named("concat", [parts],  # type: ignore[list-item]  (one variadic operand)
                    TensorType(element, [n, kh * c, oh, width], encoding), f"{name}_3ic",
                    axis=1)
    ops.append(concat)
    Rewriter.insert_op(ops, InsertPoint.before(op))
    owner = w.owner
    assert isinstance(owner, Operation)
    filters = np.asarray(weights_of(module)[weight_name(owner)])
    folded = np.ascontiguousarray(filters.transpose(0, 2, 1, 3).reshape(oc, kh * c, 1, kw))
    new_w = create_weight(module, f"{weight_name(owner)}_3ic", folded, insert_before=op)
    attributes = dict(op.attributes)
    attributes["kernel_shape"] = from_py([1, kw])
    attributes["strides"] = from_py([1, sw])
    attributes["pads"] = from_py([0, left, 0, right])
    operands = [concat.results[0], new_w, *op.operands[2:]]
    conv = op_class("tpu.conv").build(
        operands=operands, result_types=[r.type for r in op.results], attributes=attributes
    )
    Rewriter.replace_op(op, conv)
    if not owner.results[0].uses:
        Rewriter.erase_op(owner)
    return name

