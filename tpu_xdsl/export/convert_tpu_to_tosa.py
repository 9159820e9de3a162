"""`convert-tpu-to-tosa`: a TPU module (F32, F16, BF16 or INT8, as lowering leaves it)
becomes a TOSA 1.0 module that upstream MLIR tools and IREE read.

Float TPU ops export by the TOP rules (`rules.py`), f16 and bf16 ones computing in f32
between a widening cast and one rounding to the storage type (the TPU's arithmetic); INT8 ops by
`int8_rules.py`: i32 accumulation and `tosa.rescale` with the op's own multipliers and
shifts, lookup tables as `tosa.table`. Interface, weights and module attributes as in
`convert-top-to-tosa`. A module deployed with `--round-mode half_up` exports to TOSA that
computes its INT8 codes bit for bit; with the default rounding, negative ties differ by
one code. A layer-grouped module (deploy's N_int8.mlir beside a .tpumodel) exports as the
same module with its groups' ops inlined: a group only says where the chip keeps tensors,
its `tpu.load` and `tpu.store` pass them through.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from xdsl.context import Context as XdslContext
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from tpu_xdsl.dialects.module import main_func
from tpu_xdsl.export.convert_top_to_tosa import export_tosa, replace_module
from tpu_xdsl.export.int8_rules import tpu_rules
from tpu_xdsl.export.rules import ExportError


def export_tpu_tosa(module: ModuleOp, weights: Mapping[str, np.ndarray] | None = None) -> ModuleOp:
    """A new TOSA module computing what the TPU module's @main computes."""
    state = module.attributes.get("module.state")
    shown = state.data if isinstance(state, StringAttr) else "missing"
    if not shown.startswith("TPU"):
        raise ExportError(f"module.state is {shown}: convert-tpu-to-tosa takes a TPU module from lower-top-to-tpu")
    if any(op.name == "tpu.group" for op in main_func(module).body.block.ops):
        module = without_groups(module)
    return export_tosa(module, weights, rules=tpu_rules())


def without_groups(module: ModuleOp) -> ModuleOp:
    """A copy of the module with every tpu.group's ops in @main in its place, its loads and
    stores gone (they pass tensors through) and its results the values its tpu.yield gives."""
    module = module.clone()
    block = main_func(module).body.block
    for group in [op for op in block.ops if op.name == "tpu.group"]:
        body = group.regions[0].block
        for op in list(body.ops):
            if op.name in ("tpu.load", "tpu.store"):
                op.results[0].replace_all_uses_with(op.operands[0])
                body.erase_op(op)
            elif op.name == "tpu.yield":
                for result, value in zip(group.results, op.operands, strict=True):
                    result.replace_all_uses_with(value)
                body.erase_op(op)
            else:
                op.detach()
                block.insert_op_before(op, group)
        block.erase_op(group)
    return module


class ConvertTpuToTosa(ModulePass):
    """Replace the TPU @main by its TOSA form (weights from the module's weight file)."""

    name = "convert-tpu-to-tosa"

    def apply(self, ctx: XdslContext, op: ModuleOp) -> None:
        replace_module(op, export_tpu_tosa(op))
