"""tpu-layer-group: the choice of groups (dynamic programming against every partition, the
greedy rule), the cost model against the device model's own timing, legality checks in
codegen, and a branch that meets in a concat computed bit for bit inside a group."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from tests.test_codegen import init, lower, model_of, node, weight
from tests.test_layer_group_codegen import conv_chain
from tpu_xdsl.backend.codegen import CodegenError, codegen
from tpu_xdsl.device.chip import chip_config
from tpu_xdsl.device.runtime import run_model
from tpu_xdsl.device.simulator import schedule
from tpu_xdsl.dialects.module import main_func
from tpu_xdsl.dialects.tpu import LgInfoAttr
from tpu_xdsl.interp.runner import ModuleRunner
from tpu_xdsl.transforms.tpu_assign_memory import assign_memory
from tpu_xdsl.transforms.tpu_layer_group import choose_dp, choose_greedy, layer_group
from tpu_xdsl.weights import weights_of


class TableCosts:
    """Group costs from a table: cost[i, j] cycles, None where ops i..j cannot be a group."""

    def __init__(self, table: dict[tuple[int, int], int | None]):
        self.table = table

    def plan(self, i: int, j: int):
        cycles = self.table[i, j]
        return None if cycles is None else SimpleNamespace(cycles=cycles)


def partitions(n: int):
    """Every split of ops 0..n-1 into consecutive groups, as (first, last) spans."""
    for cuts in itertools.product((False, True), repeat=n - 1):
        spans, start = [], 0
        for k, cut in enumerate(cuts, start=1):
            if cut:
                spans.append((start, k - 1))
                start = k
        spans.append((start, n - 1))
        yield spans


def random_table(rng, n: int):
    """Costs where a group that cannot be formed stays impossible when it grows to the
    left (as for real groups: more ops never fit where fewer did not)."""
    table = {}
    for j in range(n):
        longest = int(rng.integers(1, n + 1))
        for i in range(j + 1):
            table[i, j] = (
                None if j - i + 1 > longest else int(rng.integers(1, 100)) * (j - i + 1) - int(rng.integers(0, 50))
            )
    for k in range(n):
        table[k, k] = int(rng.integers(20, 120))
    return table


@pytest.mark.parametrize("seed", range(40))
def test_dynamic_programming_finds_the_cheapest_partition(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9))
    table = random_table(rng, n)
    costs = TableCosts(table)

    def total(spans):
        values = [table[span] for span in spans]
        return None if any(v is None for v in values) else sum(values)

    best = min(t for t in map(total, partitions(n)) if t is not None)
    spans = choose_dp(costs, n)
    assert [s for span in spans for s in range(span[0], span[1] + 1)] == list(range(n))
    assert total(spans) == best
    greedy = choose_greedy(costs, n)
    assert total(greedy) is not None and total(greedy) >= best


def test_greedy_joins_only_when_it_pays():
    # ops 0,1 together cost 15 < 10 + 10; adding op 2 costs 40 > 15 + 10; ops 2,3 cost 12.
    table = {(0, 0): 10, (1, 1): 10, (2, 2): 10, (3, 3): 10, (0, 1): 15, (1, 2): 30, (2, 3): 12,
             (0, 2): 40, (1, 3): 50, (0, 3): 60}
    assert choose_greedy(TableCosts(table), 4) == [(0, 1), (2, 3)]
    assert choose_dp(TableCosts(table), 4) == [(0, 1), (2, 3)]


@pytest.mark.parametrize(("scheme", "chip"), [("INT8", "cv183x"), ("INT8", "bm1684x"), ("BF16", "cv183x")])
def test_the_cost_model_predicts_the_device_model(scheme, chip, tmp_path):
    """The estimate the pass chooses groups by, against the cycles the device model takes
    for the instructions codegen emits for the group."""
    tpu, _ = lower(conv_chain(), scheme, chip, tmp_path)
    (plan,) = layer_group(tpu).plans
    assign_memory(tpu)
    model = codegen(tpu)
    grouped = [i for i in model.instructions if i.group == 0]
    assert len(grouped) == len(model.instructions)  # the whole graph is the group
    simulated = schedule(chip_config(chip), model.instructions).total_cycles
    assert abs(plan.cycles - simulated) <= 0.05 * simulated, (plan.cycles, simulated)


def test_codegen_refuses_a_group_whose_buffers_overlap(tmp_path):
    tpu, _ = lower(conv_chain(), "INT8", "cv183x", tmp_path)
    layer_group(tpu)
    assign_memory(tpu)
    group = next(op for op in main_func(tpu).body.block.ops if op.name == "tpu.group")
    convs = [op for op in group.regions[0].block.ops if op.name == "tpu.conv"]
    first, second = (c.attributes["ginfo"] for c in convs)
    # the second conv's output moved onto the first's
    params = list(second.parameters)
    params[0] = first.parameters[0]
    convs[1].attributes["ginfo"] = LgInfoAttr(*params)
    with pytest.raises(CodegenError, match="overlaps .*run tpu-layer-group again"):
        codegen(tpu)


def branch_model():
    """A 1x1 and a 3x3 conv of x, their concat along channels, a max pool."""
    nodes = [
        node("Conv", ["x", "wa", "ba"], ["a"], kernel_shape=[1, 1]),
        node("Conv", ["x", "wb", "bb"], ["b"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Concat", ["a", "b"], ["cat"], axis=1),
        node("MaxPool", ["cat"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
    ]
    inits = [weight("wa", [16, 8, 1, 1]), weight("ba", [16], 0.1), weight("wb", [24, 8, 3, 3]), weight("bb", [24], 0.1)]
    return model_of(nodes, [("x", [1, 8, 96, 64])], "y", inits)


@pytest.mark.parametrize("chip", ["cv183x", "bm1684x"])
def test_a_branch_meeting_in_a_concat_runs_in_one_group_bit_for_bit(chip, tmp_path):
    tpu, feeds = lower(branch_model(), "INT8", chip, tmp_path)
    expected = ModuleRunner(tpu, weights_of(tpu)).run(feeds)
    report = layer_group(tpu)
    assert any({"tpu.conv", "tpu.concat", "tpu.max_pool"} <= {op.name for op in plan.ops} for plan in report.plans)
    assign_memory(tpu)
    got = run_model(codegen(tpu), feeds).outputs
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def fpn_model(scale: float = 2.0, mode: str = "nearest"):
    """A feature pyramid's top-down step: a stride-2 conv of x resized back up (ONNX
    Resize), added to a 1x1 conv of x, then a 3x3 conv."""
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["low"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        node("Resize", ["low", "", "scales"], ["up"], mode=mode),
        node("Conv", ["x", "w2", "b2"], ["lat"], kernel_shape=[1, 1]),
        node("Add", ["up", "lat"], ["s"]),
        node("Conv", ["s", "w3", "b3"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    ]
    inits = [weight("w1", [16, 8, 3, 3]), weight("b1", [16], 0.1), init("scales", [1, 1, scale, scale]),
             weight("w2", [16, 8, 1, 1]), weight("b2", [16], 0.1), weight("w3", [8, 16, 3, 3]), weight("b3", [8], 0.1)]
    return model_of(nodes, [("x", [1, 8, 96, 64])], "y", inits, opset=13)


@pytest.mark.parametrize(("chip", "scheme"), [("cv183x", "INT8"), ("bm1684x", "INT8"), ("bm1684x", "F16")])
def test_a_nearest_resize_runs_inside_a_group_bit_for_bit(chip, scheme, tmp_path):
    """The upsampled map stays in local memory: each step of the group resizes the input
    rows its output rows copy, and the program equals the interpreter; grouped, it moves
    fewer DDR bytes than with the resize left out of groups."""
    from tests.test_layer_group_codegen import ddr_bytes
    from tpu_xdsl.backend.layer_groups import steps

    tpu, feeds = lower(fpn_model(), scheme, chip, tmp_path)
    expected = ModuleRunner(tpu, weights_of(tpu)).run(feeds)
    without = tpu.clone()
    from tpu_xdsl.weights import attach_weights

    attach_weights(without, dict(weights_of(tpu)))
    report = layer_group(tpu)
    (plan,) = [plan for plan in report.plans if "tpu.interp" in {op.name for op in plan.ops}]
    assert len(plan.steps) > 1 or chip == "bm1684x"  # cv183x's 32 KiB lanes cut it along rows
    assign_memory(tpu)
    grouped = codegen(tpu)
    got = run_model(grouped, feeds).outputs
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    original = steps.GROUPABLE
    steps.GROUPABLE = original - {"interp"}
    try:
        layer_group(without)
    finally:
        steps.GROUPABLE = original
    assign_memory(without)
    assert ddr_bytes(grouped) < ddr_bytes(codegen(without))


def test_a_linear_resize_stays_out_of_groups(tmp_path):
    tpu, _ = lower(fpn_model(mode="linear"), "INT8", "bm1684x", tmp_path)
    report = layer_group(tpu)
    assert all("tpu.interp" not in {op.name for op in plan.ops} for plan in report.plans)


def interleaved_branches():
    """Two chains of x, conv -> sigmoid -> conv, written as exporters interleave them
    (each step of one branch, then the same step of the other), then concatenated along
    rows (an op no group takes: no group can end where both chains meet)."""
    nodes = [
        node("Conv", ["x", "wa1", "ba1"], ["a1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Conv", ["x", "wb1", "bb1"], ["b1"], kernel_shape=[1, 1]),
        node("Sigmoid", ["a1"], ["sa"]),
        node("Sigmoid", ["b1"], ["sb"]),
        node("Conv", ["sa", "wa2", "ba2"], ["a2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Conv", ["sb", "wb2", "bb2"], ["b2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Concat", ["a2", "b2"], ["y"], axis=2),
    ]
    inits = [weight("wa1", [16, 8, 3, 3]), weight("ba1", [16], 0.1), weight("wb1", [16, 8, 1, 1]),
             weight("bb1", [16], 0.1), weight("wa2", [8, 16, 3, 3]), weight("ba2", [8], 0.1),
             weight("wb2", [8, 16, 3, 3]), weight("bb2", [8], 0.1)]
    return model_of(nodes, [("x", [1, 8, 128, 96])], "y", inits)


def _names(ops) -> list[str]:
    from tpu_xdsl.dialects.module import tensor_names

    return [(tensor_names(op) or [op.name])[0] for op in ops]


def test_chain_order_follows_each_branch_and_keeps_a_chain_as_it_is(tmp_path):
    from tpu_xdsl.backend.layer_groups.order import chain_order

    tpu, _ = lower(interleaved_branches(), "INT8", "bm1684x", tmp_path)
    ops = [op for op in main_func(tpu).body.block.ops if op.name.startswith("tpu.")]
    assert _names(ops) == ["x_int8", "a1", "b1", "sa", "sb", "a2", "b2", "y_int8", "y"]
    assert _names(chain_order(ops)) == ["x_int8", "a1", "sa", "a2", "b1", "sb", "b2", "y_int8", "y"]
    chain, _ = lower(conv_chain(), "INT8", "bm1684x", tmp_path)
    ops = [op for op in main_func(chain).body.block.ops if op.name.startswith("tpu.")]
    assert chain_order(ops) == ops


@pytest.mark.parametrize("chip", ["cv183x", "bm1684x"])
def test_interleaved_branches_are_grouped_chain_by_chain_bit_for_bit(chip, tmp_path):
    """tpu-layer-group reorders the branches (its cost model finds that cheaper) and
    groups each chain; the program equals the interpreter."""
    tpu, feeds = lower(interleaved_branches(), "INT8", chip, tmp_path)
    expected = ModuleRunner(tpu, weights_of(tpu)).run(feeds)
    report = layer_group(tpu)
    grouped = [_names(plan.ops) for plan in report.plans]
    assert any({"a1", "sa", "a2"} <= set(names) for names in grouped), grouped
    assert any({"b1", "sb", "b2"} <= set(names) for names in grouped), grouped
    assign_memory(tpu)
    got = run_model(codegen(tpu), feeds).outputs
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_weights_go_clear_of_the_group_before_first():
    from tpu_xdsl.backend.layer_groups.layout import _place_weights

    sizes = {"w0": 100, "w1": 350, "w2": 200}
    # [0, 1000): the group before uses [400, 800). w0 fits clear at 0; w1 fits neither in
    # [100, 400) nor in [800, 1000): it waits; w2 is clear at 100; then w1 goes first fit
    # into what is left, at 300 (it will be loaded when its own group starts).
    assert _place_weights(sizes, 0, 1000, [(400, 800)]) == {"w0": 0, "w1": 300, "w2": 100}
    # nothing to avoid: first fit in order
    assert _place_weights(sizes, 0, 1000, []) == {"w0": 0, "w1": 100, "w2": 450}
    assert _place_weights(sizes, 0, 600, []) is None


def test_a_group_loads_the_next_groups_weights_while_it_runs(tmp_path):
    """ResNet-50's groups follow each other; weights of a group that lie clear of the lane
    memory of the group before it are loaded before that group's last instruction."""
    from tpu_xdsl import zoo

    lowered = zoo.lower_model("light_resnet50", tmp_path, "INT8", "bm1684x", samples=2)
    layer_group(lowered.module)
    assign_memory(lowered.module)
    model = codegen(lowered.module)
    last = {}
    for instruction in model.instructions:
        last[instruction.group] = instruction.id
    early = [i for i in model.instructions if i.group > 0 and i.id < last.get(i.group - 1, -1)]
    assert early and all(type(i).__name__ == "DmaLoad" for i in early)


def test_buffers_are_bank_aligned_only_when_that_fits():
    from tpu_xdsl.backend.layer_groups.layout import allocate, areas
    from tpu_xdsl.backend.layer_groups.steps import Member, plan_steps
    from tpu_xdsl.backend.slicing import OpShape

    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1], "dilations": [1, 1], "group": 1}
    act, w = (1, 8, 16, 16), (8, 8, 3, 3)
    members = [
        Member(OpShape("conv", attrs, (act, w, None), (False, True, False), (act,)), ("x", "w1", None), ("c1",)),
        Member(OpShape("conv", attrs, (act, w, None), (False, True, False), (act,)), ("c1", "w2", None), ("c2",)),
    ]
    steps = plan_steps(members, {"w1", "w2"}, 1, 1)
    assert steps is not None
    dtypes = dict.fromkeys(("x", "c1", "c2", "w1", "w2"), "int8")

    def lane_bytes(dtype, box, constant, eu_align=True):
        return 100 if constant else 3000

    # three tensors of 3000 bytes: 3 x 4096 bank-aligned, 3 x 3008 packed (16-byte units)
    banked = allocate(members, steps, {"w1", "w2"}, lane_bytes, dtypes, 20000, 4096, 16)
    assert banked is not None and banked.banked and sorted(banked.streamed.values()) == [0, 4096, 8192]
    packed = allocate(members, steps, {"w1", "w2"}, lane_bytes, dtypes, 10000, 4096, 16)
    assert packed is not None and not packed.banked and sorted(packed.streamed.values()) == [0, 3008, 6016]
    assert max(end for _, end in areas(packed)) <= 10000
    assert allocate(members, steps, {"w1", "w2"}, lane_bytes, dtypes, 9000, 4096, 16) is None
