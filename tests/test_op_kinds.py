"""Every TOP and TPU op is in a group of `tpu_xdsl.kernels.op_kinds`, every kind a group or a
pass's table names is an op, and the passes ask the groups."""

from __future__ import annotations

from tpu_xdsl.dialects import Top, Tpu
from tpu_xdsl.kernels import op_kinds

TOP_KINDS = {op.name.split(".", 1)[1] for op in Top.operations}
TPU_KINDS = {op.name.split(".", 1)[1] for op in Tpu.operations}


def test_every_op_of_both_dialects_is_classified():
    classified = set().union(*op_kinds.GROUPS.values())
    assert not (TOP_KINDS | TPU_KINDS) - classified, "ops in no group of op_kinds.GROUPS"


def test_every_kind_named_is_an_op():
    named = {name: kinds for name, kinds in vars(op_kinds).items() if isinstance(kinds, frozenset)}
    for name, kinds in named.items():
        assert kinds <= TOP_KINDS | TPU_KINDS, f"op_kinds.{name} names {sorted(kinds - TOP_KINDS - TPU_KINDS)}"


def test_the_device_cost_table_names_ops():
    from tpu_xdsl.device import timing

    assert set(timing._PASSES) <= TOP_KINDS | TPU_KINDS


def test_the_groups_that_partition_compute_ops_do_not_overlap():
    """An op computes one way: its elementwise, MAC, pooling, normalization, reduction and
    recurrent groups are disjoint."""
    compute = ["UNARY", "BINARY", "CHANNELWISE", "SELECT", "CONVERT", "GEMM", "POOL", "NORMALIZATION",
               "REDUCTION", "RECURRENT", "STRUCTURE"]
    for i, a in enumerate(compute):
        for b in compute[i + 1:]:
            assert not op_kinds.GROUPS[a] & op_kinds.GROUPS[b], (a, b)
