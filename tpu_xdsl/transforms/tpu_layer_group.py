"""tpu-layer-group: runs of consecutive TPU ops become `tpu.group`s that work out of local
memory (DESIGN.md section 5, TPU-MLIR's layer group pass).

A group's inputs and weights enter its region through `tpu.load`, the tensors
used after the group leave through `tpu.store` and `tpu.yield`; everything else
stays in local memory. The group is cut along N, then H of its last op's
output (`n_slices` x `h_slices` steps); backward slice inference through every
op's window gives each tensor's box per step. Weights are loaded once and stay
resident while the steps run (a group right after another keeps as many as fit
clear of the lane memory the other uses, and codegen loads those while the other
computes); every other tensor has two buffers so that the loads of step i+1 and
the stores of step i-1 overlap the computes of step i (the 3-stage pipeline
codegen emits with dependency tokens). Every op inside carries `ginfo`
(#tpu.lg_info): its buffers' lane addresses and its slice at every step.

`opt=2` chooses the groups by dynamic programming over their estimated cycles,
`opt=1` greedily. Where the program interleaves independent branches, the ops are
first put in an order that follows each chain (`layer_groups.order`) when the groups
of that order are estimated cheaper. The logic lives in `backend.layer_groups` (choice, planning,
steps, local-memory layout, cost, the IR of a group); this file is the pass.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from tpu_xdsl.backend.deconv_blocks import convs_before_depth2space, split_block_deconvs
from tpu_xdsl.backend.first_conv import repack_first_convs
from tpu_xdsl.backend.layer_groups import (
    GroupPlanner,
    GroupReport,
    build_groups,
    choose_dp,
    choose_greedy,
    choose_groups,
)
from tpu_xdsl.backend.layer_groups.order import chain_order, place_in_order
from tpu_xdsl.device.chip import chip_config
from tpu_xdsl.dialects.module import main_func
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.transforms.lower_top_to_tpu import LOWERED_STATE, lowered_chip
from tpu_xdsl.weights import is_weight

__all__ = ["GROUPED_STATE", "LayerGroupError", "TpuLayerGroup", "choose_dp", "choose_greedy", "layer_group"]

GROUPED_STATE = "TPU_GROUPED"
_SKIPPED = ("top.input", "top.weight", "top.none", "func.return")


class LayerGroupError(TpuXdslError):
    """The module cannot be grouped (wrong stage, no chip, bad option)."""


def layer_group(module: ModuleOp, opt: int = 2) -> GroupReport:
    """Group the ops of a lowered TPU module (state TPU_LOWERED) for its chip."""
    if opt not in (1, 2):
        raise LayerGroupError(f"opt={opt}: use 1 (greedy) or 2 (dynamic programming)")
    chip = chip_config(
        lowered_chip(module, (LOWERED_STATE,), "tpu-layer-group takes a lowered TPU module", LayerGroupError)
    )
    repack_first_convs(module, chip)
    split_block_deconvs(module, chip)
    convs_before_depth2space(module, chip)
    block = main_func(module).body.block
    ops = [op for op in block.ops if op.name not in _SKIPPED]
    planner = GroupPlanner(chip, is_weight)
    report = choose_groups(planner, ops, opt)
    chained = chain_order(ops)
    if chained != ops:  # interleaved branches: keep the order whose groups cost less
        other = choose_groups(planner, chained, opt)
        if other.grouped_cycles < report.grouped_cycles:
            place_in_order(block, chained)
            report = other
    build_groups(report.plans)
    module.attributes["module.state"] = StringAttr(GROUPED_STATE)
    return report


@dataclass(frozen=True)
class TpuLayerGroup(ModulePass):
    """Group runs of TPU ops to work out of local memory (opt=1 greedy, opt=2 dynamic programming)."""

    name = "tpu-layer-group"

    opt: int = 2

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        report = layer_group(op, self.opt)
        print(report.summary(), file=sys.stderr)
