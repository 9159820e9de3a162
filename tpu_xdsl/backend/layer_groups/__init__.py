"""Layer groups: runs of consecutive TPU ops that work out of local memory (TPU-MLIR's
layer groups; DESIGN.md section 5).

A group is cut along N, then H of its last op's output into steps; backward slice
inference through every op's window gives each tensor's box per step. Weights are
loaded once and stay resident; every other tensor has two buffers so that the loads
of step i+1 and the stores of step i-1 overlap the computes of step i.

- `steps`: members, the steps of a cut and the fewest steps that fit (no xDSL);
- `layout`: the lane addresses of a group's buffers and weights (no xDSL);
- `cost`: the device's timing of what codegen emits for a group (no xDSL);
- `plan`: a group of IR ops planned (`GroupPlanner`, `GroupPlan`);
- `choice`: which runs of ops become groups (dynamic programming or greedy);
- `group_ir`: the `tpu.group` built from a plan, and its layout read back.

The `tpu-layer-group` pass (transforms/tpu_layer_group.py) chooses and builds groups
with these; codegen (backend/codegen) plans each `tpu.group` again to emit it.
"""

from tpu_xdsl.backend.layer_groups.choice import (
    GroupReport,
    choose_dp,
    choose_greedy,
    choose_groups,
)
from tpu_xdsl.backend.layer_groups.group_ir import build_groups, ginfo_layout
from tpu_xdsl.backend.layer_groups.layout import Layout
from tpu_xdsl.backend.layer_groups.plan import GroupPlan, GroupPlanner
from tpu_xdsl.backend.layer_groups.steps import Member, Step

__all__ = [
    "GroupPlan", "GroupPlanner", "GroupReport", "Layout", "Member", "Step",
    "build_groups", "choose_dp", "choose_greedy", "choose_groups", "ginfo_layout",
]
