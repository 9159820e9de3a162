"""`convert-tpu-to-tosa`: a TPU module (F32, F16, BF16 or INT8, as lowering leaves it)
becomes a TOSA 1.0 module that upstream MLIR tools and IREE read.

Float TPU ops export by the TOP rules (`rules.py`), f16 and bf16 ones computing in f32
between a widening cast and one rounding to the storage type (the TPU's arithmetic); INT8 ops by
`int8_rules.py`: i32 accumulation and `tosa.rescale` with the op's own multipliers and
shifts, lookup tables as `tosa.table`. Interface, weights and module attributes as in
`convert-top-to-tosa`. A module deployed with `--round-mode half_up` exports to TOSA that
computes its INT8 codes bit for bit; with the default rounding, negative ties differ by
one code. Layer-grouped modules (`tpu.group`) are refused: export the module before
tpu-layer-group.
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
        raise ExportError(
            "the module holds layer groups (tpu.group): export the TPU module lowering wrote, before tpu-layer-group"
        )
    return export_tosa(module, weights, rules=tpu_rules())


class ConvertTpuToTosa(ModulePass):
    """Replace the TPU @main by its TOSA form (weights from the module's weight file)."""

    name = "convert-tpu-to-tosa"

    def apply(self, ctx: XdslContext, op: ModuleOp) -> None:
        replace_module(op, export_tpu_tosa(op))
