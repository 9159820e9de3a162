"""The "3ic" repacking of an INT8 convolution on few input channels (TPU-MLIR's
`use_3ic_optimize`): its kernel taps folded into its input channels.

A stem such as ResNet-50's 7x7 stride-2 convolution, or a MobileNet's 3x3 one, on 3
channels keeps 3 of the array's 64 input-channel slots busy for every tap. Folded, its
input becomes `tpu.fold_taps` of the padded input: channel (i x kw + j) x C + c holds tap
(i, j)'s window of channel c. All kh x kw taps fold when kh x kw x C fit the array's
input-channel parallelism, and the convolution becomes a 1 x 1 one; else the kernel rows
fold, and it becomes a 1 x kw one with stride (1, sw) over kh x C channels. The fold only
moves data. Folded whole, it joins the conv's layer group (with the op computing its
input, the model input's cast say) as a move of local memory across lanes, which the
chip's DMA engine does (`timing.local_move_cycles`); folded by rows, its output keeps the
input's width, and it runs on its own (loaded, moved, stored; priced here as the DDR
copies that would do the same). The filter is the same integers reordered; the int32
sums are the same, so the results are the interpreter's bit for bit.

Only where it pays: the taps saved on the array must outweigh twice the local move, or
the DDR copies and what they cost the op before (`timing`'s figures).
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tpu_xdsl.backend.codegen.dma import fold_plan
from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.device.timing import local_move_cycles
from tpu_xdsl.dialects import op_class
from tpu_xdsl.dialects.attr_values import from_py
from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.dialects.quant_types import qparams_of
from tpu_xdsl.kernels.dtypes import numpy_dtype
from tpu_xdsl.kernels.quant import QParams
from tpu_xdsl.weights import create_weight, weight_name, weights_of

_INTEGER = (np.int8, np.uint8)


def repack_first_convs(module: ModuleOp, chip: ChipConfig) -> list[str]:
    """Fold the kernel rows of every INT8 convolution where that pays into its input
    channels; the names of the convolutions repacked."""
    repacked = []
    for op in list(main_func(module).body.block.ops):
        fold = _paying_fold(op, chip, module) if op.name == "tpu.conv" else None
        if fold is not None:
            repacked.append(_repack(op, module, fold))
    return repacked


def _ints(op: Operation, name: str, default: list[int]) -> list[int]:
    attr = op.attributes.get(name)
    return default if attr is None else [int(a.value.data) for a in attr.data]  # type: ignore[attr-defined]


def _shape(value: SSAValue) -> list[int]:
    return list(value.type.get_shape())  # type: ignore[attr-defined]


def _paying_fold(op: Operation, chip: ChipConfig, module: ModuleOp) -> tuple[int, int] | None:
    """The conv's fold (`_fold`) where it pays, else None."""
    fold = _fold(op, chip, module)
    if fold is None:
        return None
    fh, fw = fold
    n, c, _, width = _shape(op.operands[0])
    oc, _, kh, kw = _shape(op.operands[1])
    _, _, oh, ow = _shape(op.results[0])
    rows = math.ceil(oc / chip.npu_num) * math.ceil(n * oh * ow / chip.pixel_parallel["INT8"])
    saved = rows * (kh * kw - (kh // fh) * (kw // fw))
    if fw > 1:  # every tap: the fold runs in the conv's layer group, a local move
        return fold if saved > 2 * local_move_cycles(chip, n * fh * fw * c * oh * ow) else None
    copy_rate = min(chip.ddr_to_lmem_bytes_per_s, chip.lmem_to_ddr_bytes_per_s) / chip.clock_hz
    folded = (n, fh * c, oh, width)  # by rows: the columns stay the conv's
    plan = fold_plan(tuple(_shape(op.operands[0])), folded, _fold_attrs(op, fh, fw))
    instructions = sum(1 + len(strips) for *_, strips in plan)  # a copy per tap, fills of its padding
    cost = math.prod(folded) / copy_rate + instructions * chip.dma_latency + _split_cost(op.operands[0], chip)
    return fold if saved > 2 * cost else None


def _fold_attrs(op: Operation, fh: int, fw: int) -> dict[str, list[int]]:
    """The `tpu.fold_taps` attributes of a conv's fold of (fh, fw) taps: with fw = 1 the
    columns stay the conv's, with their pads."""
    sh, sw = _ints(op, "strides", [1, 1])
    top, left, bottom, right = _ints(op, "pads", [0, 0, 0, 0])
    if fw == 1:
        return {"kernel_shape": [fh, 1], "strides": [sh, 1], "pads": [top, 0, bottom, 0]}
    return {"kernel_shape": [fh, fw], "strides": [sh, sw], "pads": [top, left, bottom, right]}


def _split_cost(x: SSAValue, chip: ChipConfig) -> float:
    """Cycles lost when the fold, a DDR copy, comes between the conv and the op computing
    its input (the model input's cast, say): that op no longer runs in the conv's layer
    group, its loads no longer overlap the conv's compute and its result goes through DDR."""
    owner = x.owner
    if not isinstance(owner, Operation) or not owner.name.startswith("tpu."):
        return 0.0
    loaded = sum(_bytes(v) for v in owner.operands if isinstance(v.type, TensorType))
    load_rate = chip.ddr_to_lmem_bytes_per_s / chip.clock_hz
    return loaded / load_rate + _bytes(x) / (chip.lmem_to_ddr_bytes_per_s / chip.clock_hz)


def _bytes(value: SSAValue) -> int:
    t = value.type
    assert isinstance(t, TensorType)
    return numpy_dtype(t.element_type).itemsize * math.prod(t.get_shape())


def _fold(op: Operation, chip: ChipConfig, module: ModuleOp) -> tuple[int, int] | None:
    """The taps (rows, columns) that fold into channels: (kh, kw) when they all fit the
    array's input-channel parallelism, else (kh, 1); None when the conv does not qualify."""
    x, w = op.operands[0], op.operands[1]
    if not isinstance(x.type, TensorType) or len(_shape(x)) != 4 or len(_shape(w)) != 4:
        return None
    owner = w.owner
    if not isinstance(owner, Operation) or owner.name != "top.weight":
        return None
    group = op.attributes.get("group")
    if group is not None and int(group.value.data) != 1:  # type: ignore[attr-defined]
        return None
    if any(d != 1 for d in _ints(op, "dilations", [1, 1])):
        return None
    qparams = qparams_of(x.type, weights_of(module))
    if not isinstance(qparams, QParams) or qparams.zero_point or qparams.dtype not in _INTEGER:
        return None
    c = _shape(x)[1]
    _, _, kh, kw = _shape(w)
    parallel = chip.ic_parallel["INT8"]
    if kh < 2 or kh * c > parallel:
        return None
    return (kh, kw) if kh * kw * c <= parallel else (kh, 1)


def _named(kind: str, operands: list, result: TensorType, name: str, **attrs) -> Operation:
    attributes = {key: from_py(value) for key, value in attrs.items()}
    attributes["names"] = ArrayAttr([StringAttr(name)])
    return op_class(f"tpu.{kind}").build(operands=operands, result_types=[result], attributes=attributes)


def _repack(op: Operation, module: ModuleOp, fold: tuple[int, int]) -> str:
    x, w = op.operands[0], op.operands[1]
    fh, fw = fold
    name = (tensor_names(op) or ["conv"])[0]
    n, c, _, width = _shape(x)
    oc, _, kh, kw = _shape(w)
    _, _, oh, ow = _shape(op.results[0])
    sw = _ints(op, "strides", [1, 1])[1]
    _, left, _, right = _ints(op, "pads", [0, 0, 0, 0])
    kept, folded_w = ([1, kw], width) if fw == 1 else ([1, 1], ow)
    t = x.type
    assert isinstance(t, TensorType)
    fold_op = _named("fold_taps", [x], TensorType(t.element_type, [n, fh * fw * c, oh, folded_w], t.encoding),
                     f"{name}_3ic", **_fold_attrs(op, fh, fw))
    Rewriter.insert_op(fold_op, InsertPoint.before(op))
    owner = w.owner
    assert isinstance(owner, Operation)
    filters = np.asarray(weights_of(module)[weight_name(owner)])
    if fw == 1:  # channel i * C + c, column j
        reordered = filters.transpose(0, 2, 1, 3).reshape(oc, kh * c, 1, kw)
    else:  # channel (i * kw + j) * C + c
        reordered = filters.transpose(0, 2, 3, 1).reshape(oc, kh * kw * c, 1, 1)
    new_w = create_weight(module, f"{weight_name(owner)}_3ic", np.ascontiguousarray(reordered), insert_before=op)
    attributes = dict(op.attributes)
    attributes["kernel_shape"] = from_py(kept)
    attributes["strides"] = from_py([1, sw if fw == 1 else 1])
    attributes["pads"] = from_py([0, left if fw == 1 else 0, 0, right if fw == 1 else 0])
    operands = [fold_op.results[0], new_w, *op.operands[2:]]
    conv = op_class("tpu.conv").build(
        operands=operands, result_types=[r.type for r in op.results], attributes=attributes
    )
    Rewriter.replace_op(op, conv)
    if not owner.results[0].uses:
        Rewriter.erase_op(owner)
    return name
