"""Codegen of tpu.lstm and tpu.gru: the layer split over the lanes by hidden unit.

Lane l owns the hidden units j with j % lanes == l: it holds the rows of W and R of
every gate of those units, their biases, their states (float32, transposed to
[units, batch]) and their part of each step's projection. A step's cell for a block
of units reads the whole previous h (every lane's) and writes the block's new h, c and
output (`kernels.recurrent_cells`, whose results do not depend on the block, so the
device equals the TPU interpreter bit for bit).

Per direction, the sequence runs in blocks of steps: the input projection of a block
(x W^T + biases, one instruction, or one per step and block of units when W is
streamed) into lane memory, then its steps, each a cell per block of units (GRU without
linear_before_reset: a first pass for z and r*h over every block, then the second).
W and R stay resident when they fit; otherwise they are streamed from DDR in blocks
of units (R once per step, W once per block of steps), double-buffered so the DMA of
the next block overlaps the compute of this one, and the timing counts every byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.device.isa import (
    DTYPE_SIZES,
    Compute,
    DdrView,
    DmaLoad,
    DmaStore,
    LocalTensor,
)

F32 = "float32"


class RecurrentFitError(ValueError):
    """No split of a recurrent layer fits local memory."""


@dataclass(frozen=True)
class RecurrentShape:
    """What the codegen of one recurrent layer needs to know: sizes and element types."""

    gates: int  # 4 (LSTM) or 3 (GRU)
    hidden: int
    input_size: int
    batch: int
    seq: int
    data_dtype: str  # x and the outputs
    weight_dtype: str
    # R's gate ranges, one cell pass each: LSTM and GRU with linear_before_reset one pass
    # over every gate; GRU otherwise z and r first, then h.
    passes: tuple[tuple[int, int], ...]
    outputs_c: bool = False  # an LSTM whose Y_c is stored


@dataclass(frozen=True)
class RecurrentPlan:
    """A split that fits: units per block (a multiple of the lanes, or all), whether W and
    R stay resident, buffers per streamed block, steps per projection block, and the lane
    address of every region."""

    units: int
    w_resident: bool
    r_resident: bool
    buffers: int
    steps: int
    regions: dict[str, int] = field(default_factory=dict)
    lane_bytes: int = 0


def _plane(row_bytes: int, eu_bytes: int) -> int:
    return -(-row_bytes // eu_bytes) * eu_bytes


class _Layout:
    """Sizes per lane of the regions of one split."""

    def __init__(self, chip: ChipConfig, shape: RecurrentShape):
        self.chip = chip
        self.shape = shape
        self.planes = -(-shape.hidden // chip.npu_num)

    def units_bytes(self, units: int, row: int, dtype: str) -> int:
        return -(-units // self.chip.npu_num) * _plane(row * DTYPE_SIZES[dtype], self.chip.eu_bytes)

    def regions(self, units: int, w_resident: bool, r_resident: bool, buffers: int, steps: int) -> dict[str, int]:
        """Bytes per lane of each region."""
        s, hidden, batch = self.shape, self.shape.hidden, self.shape.batch
        sizes = {"h0": self.units_bytes(hidden, batch, F32), "h1": self.units_bytes(hidden, batch, F32)}
        if s.gates == 4:
            sizes["c"] = self.units_bytes(hidden, batch, F32)
        if len(s.passes) > 1:
            sizes["z"] = self.units_bytes(hidden, batch, F32)
            sizes["rh"] = self.units_bytes(hidden, batch, F32)
        if s.data_dtype != F32 and s.outputs_c:  # Y_c rounded to the storage type
            sizes["c_out"] = self.units_bytes(hidden, batch, s.data_dtype)
        cell_units = hidden if r_resident else units
        for b in range(2):
            sizes[f"y{b}"] = self.units_bytes(cell_units, batch, s.data_dtype)
        for name in ("wb", "rb"):
            sizes[name] = self.units_bytes(hidden, s.gates, s.weight_dtype)
        if s.gates == 3 and len(s.passes) == 1:  # GRU's h-gate recurrent bias, kept apart
            sizes["rbh"] = self.units_bytes(hidden, 1, s.weight_dtype)
        w_units = hidden if w_resident else units
        for b in range(1 if w_resident else buffers):
            sizes[f"w{b}"] = self.units_bytes(w_units, s.gates * s.input_size, s.weight_dtype)
        for p, (_, count) in enumerate(s.passes):
            for b in range(1 if r_resident else buffers):
                sizes[f"r{p}_{b}"] = self.units_bytes(hidden if r_resident else units, count * hidden, s.weight_dtype)
        sizes["x"] = self.units_bytes(steps * batch, s.input_size, s.data_dtype)
        sizes["pre"] = steps * self.planes * _plane(s.gates * batch * 4, self.chip.eu_bytes)
        return sizes


def plan_recurrent(chip: ChipConfig, shape: RecurrentShape) -> RecurrentPlan:
    """The split that keeps most resident: W and R resident, else W streamed, else both
    streamed in the largest blocks of units that fit (two buffers, else one); then as many
    steps per projection block as fit. Raises RecurrentFitError when nothing fits."""
    layout = _Layout(chip, shape)
    lanes, planes = chip.npu_num, layout.planes
    options = [(shape.hidden, True, True, 1)]
    for buffers in (2, 1):
        options += [(k * lanes, False, True, buffers) for k in range(planes, 0, -1)]
    for buffers in (2, 1):
        options += [(k * lanes, False, False, buffers) for k in range(planes, 0, -1)]
    for units, w_resident, r_resident, buffers in options:
        units = min(units, shape.hidden)
        steps = shape.seq
        while steps >= 1:
            sizes = layout.regions(units, w_resident, r_resident, buffers, steps)
            total = sum(-(-v // chip.eu_bytes) * chip.eu_bytes for v in sizes.values())
            if total <= chip.lmem_bytes:
                regions, addr = {}, 0
                for name, size in sizes.items():
                    regions[name] = addr
                    addr += -(-size // chip.eu_bytes) * chip.eu_bytes
                return RecurrentPlan(units, w_resident, r_resident, buffers, steps, regions, total)
            steps = steps // 2 if steps > 1 else 0
    raise RecurrentFitError(
        f"even one block of {lanes} hidden units (hidden size {shape.hidden}, input size {shape.input_size}, "
        f"batch {shape.batch}) does not fit local memory ({lanes} lanes of {chip.lmem_bytes} bytes) with its "
        "weights streamed from DDR: use a smaller batch, or a chip with larger lanes"
    )


# -- emitting ---------------------------------------------------------------------------------


@dataclass
class RecurrentPlaces:
    """DDR places (address, shape, dtype) of the layer's operands and results (None: absent)."""

    x: DdrView
    w: DdrView
    r: DdrView
    b: DdrView | None
    h0: DdrView | None
    c0: DdrView | None
    y: DdrView | None
    y_h: DdrView | None
    y_c: DdrView | None


class _Hazards:
    """Dependencies between the engines, by region of lane memory: a load waits for the
    computes that read or wrote the region, a compute for the DMA that last touched its
    regions, a store for the compute that wrote its region."""

    def __init__(self) -> None:
        self.dma: dict[str, int] = {}
        self.computed: dict[str, int] = {}

    def load_deps(self, region: str) -> list[int]:
        return [self.computed[region]] if region in self.computed else []

    def compute_deps(self, regions: Sequence[str]) -> list[int]:
        return [self.dma[r] for r in regions if r in self.dma]


@dataclass
class _Item:
    """One unit of work: loads, then computes, then stores."""

    loads: list[tuple[DdrView, LocalTensor, str]] = field(default_factory=list)
    computes: list[tuple[str, tuple, tuple, dict, tuple[str, ...], tuple[str, ...], int]] = field(default_factory=list)
    stores: list[tuple[LocalTensor, DdrView, str, str]] = field(default_factory=list)


def _strides(view: DdrView, layout: int) -> tuple[int, int, int]:
    """(step, direction-or-batch ..., ) strides of a [seq, dirs, batch, H]-like view: here
    the element strides of (time, direction, batch) of Y (layout 0 or 1)."""
    if layout:
        st_b, st_t, st_d, _ = view.strides
    else:
        st_t, st_d, st_b, _ = view.strides
    return st_t, st_d, st_b


def _at(view: DdrView, offset: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> DdrView:
    return DdrView(view.addr + offset * DTYPE_SIZES[view.dtype], view.dtype, shape, strides)


class RecurrentEmitter:
    """Emits one tpu.lstm / tpu.gru as instructions through `emit(cls, *args, deps, layer, **kw)`."""

    def __init__(self, chip: ChipConfig, emit, shape: RecurrentShape, places: RecurrentPlaces, attrs: dict,
                 layer: str):
        self.chip = chip
        self.emit_instruction = emit
        self.shape = shape
        self.places = places
        self.attrs = attrs
        self.layer = layer
        self.plan = plan_recurrent(chip, shape)
        self.layout = _Layout(chip, shape)
        self.hazards = _Hazards()
        self.written: dict[str, int] = {}  # "y", "y_h", "y_c" -> the last store writing it

    # -- lane tensors -------------------------------------------------------------------

    def _units(self, region: str, units: int, row: int, dtype: str, first: int = 0) -> LocalTensor:
        """The rows of `units` units from unit `first` (a multiple of the lanes) of a region
        holding one row per unit."""
        plane = _plane(row * DTYPE_SIZES[dtype], self.chip.eu_bytes)
        addr = self.plan.regions[region] + first // self.chip.npu_num * plane
        return LocalTensor(addr, dtype, (1, units, 1, row), (units, row))

    def _pre(self, steps: int, units: int, first: int, step: int) -> LocalTensor:
        """The projection of `steps` steps from `step` of the block, for `units` units from
        `first` (several steps only for every unit)."""
        s = self.shape
        plane = _plane(s.gates * s.batch * 4, self.chip.eu_bytes)
        addr = self.plan.regions["pre"] + (step * self.layout.planes + first // self.chip.npu_num) * plane
        return LocalTensor(addr, F32, (steps, units, 1, s.gates * s.batch), (steps, units, s.gates, s.batch))

    # -- DDR views --------------------------------------------------------------------------

    def _rows(self, view: DdrView, d: int, gate0: int, gates: int, first: int, units: int) -> DdrView:
        """Rows of W or R [dirs, G*H, K] of gates gate0.. for units first.. as [units, gates, K]."""
        k = view.shape[2]
        hidden = self.shape.hidden
        offset = d * view.strides[0] + (gate0 * hidden + first) * k
        return _at(view, offset, (units, gates, k), (k, hidden * k, 1))

    def _bias(self, d: int, start: int, gates: int) -> DdrView:
        """B[d, start + g*H + j] as [H, gates]."""
        b = self.places.b
        assert b is not None
        return _at(b, d * b.strides[0] + start, (self.shape.hidden, gates), (1, self.shape.hidden))

    def _state_view(self, view: DdrView, d: int, first: int, units: int) -> DdrView:
        """A state [dirs, batch, H] (layout 1: [batch, dirs, H]) of direction d as [units, batch]."""
        st_d, st_b = (view.strides[1], view.strides[0]) if self.attrs.get("layout", 0) else view.strides[:2]
        return _at(view, d * st_d + first, (units, self.shape.batch), (1, st_b))

    def _y_view(self, t: int, d: int, first: int, units: int) -> DdrView:
        y = self.places.y
        assert y is not None
        st_t, st_d, st_b = _strides(y, self.attrs.get("layout", 0))
        return _at(y, t * st_t + d * st_d + first, (units, self.shape.batch), (1, st_b))

    def _x_view(self, t0: int, steps: int) -> DdrView:
        x = self.places.x
        if self.attrs.get("layout", 0):
            st_b, st_t = x.strides[0], x.strides[1]
        else:
            st_t, st_b = x.strides[0], x.strides[1]
        return _at(x, t0 * st_t, (steps, self.shape.batch, self.shape.input_size), (st_t, st_b, 1))

    # -- the program -------------------------------------------------------------------------

    def run(self) -> None:
        directions = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[
            self.attrs.get("direction", "forward")
        ]
        items: list[_Item] = []
        for d, backwards in enumerate(directions):
            items += self._direction(d, backwards)
        self._emit(items)

    def _blocks(self, units: int) -> list[tuple[int, int]]:
        hidden = self.shape.hidden
        return [(j, min(units, hidden - j)) for j in range(0, hidden, units)]

    def _direction(self, d: int, backwards: bool) -> list[_Item]:
        s, plan, places = self.shape, self.plan, self.places
        hidden, batch, gates = s.hidden, s.batch, s.gates
        setup = _Item()
        if places.b is not None:
            setup.loads.append((self._bias(d, 0, gates), self._units("wb", hidden, gates, s.weight_dtype), "wb"))
            setup.loads.append((self._bias(d, gates * hidden, gates), self._units("rb", hidden, gates, s.weight_dtype),
                                "rb"))
            if len(s.passes) == 1 and gates == 3:
                setup.loads.append((self._bias(d, 5 * hidden, 1), self._units("rbh", hidden, 1, s.weight_dtype), "rbh"))
        if plan.w_resident:
            setup.loads.append((self._rows(places.w, d, 0, gates, 0, hidden),
                                self._units("w0", hidden, gates * s.input_size, s.weight_dtype), "w0"))
        if plan.r_resident:
            for p, (g0, count) in enumerate(s.passes):
                setup.loads.append((self._rows(places.r, d, g0, count, 0, hidden),
                                    self._units(f"r{p}_0", hidden, count * hidden, s.weight_dtype), f"r{p}_0"))
        # The states before the first step: h in buffer 1 (step 0 writes buffer 0).
        states = {"h": places.h0 is not None, "c": places.c0 is not None}
        setups = [setup]
        for name, view, region in (("h", places.h0, "h1"), ("c", places.c0, "c")):
            if view is None or (name == "c" and gates != 4):
                continue
            state = self._state_view(view, d, 0, hidden)
            target = self._units(region, hidden, batch, F32)
            if s.data_dtype == F32:
                setup.loads.append((state, target, region))
            else:
                # Loaded in the storage type into h buffer 0 (free until step 0 writes it; its
                # float32 planes hold the narrower rows), then widened to float32.
                held = self._units("h0", hidden, batch, s.data_dtype)
                item = _Item(loads=[(state, held, "h0")])
                item.computes.append(("cast", (held,), (target,), {}, ("h0",), (region,), 0))
                setups.append(item)
        items = setups
        order = list(range(s.seq))
        blocks = [order[i : i + plan.steps] for i in range(0, s.seq, plan.steps)]
        if backwards:
            blocks = [list(reversed(b)) for b in reversed(blocks)]
        counter = {"w": 0, "r": 0, "y": 0, "step": 0}
        for block in blocks:
            items += self._projection(d, min(block), len(block), counter)
            for t in block:
                items += self._step(d, t, min(block), t == block[-1] and block is blocks[-1], states, counter)
        return items

    def _projection(self, d: int, t0: int, steps: int, counter: dict) -> list[_Item]:
        s, plan = self.shape, self.plan
        x = LocalTensor(self.plan.regions["x"], s.data_dtype, (1, steps * s.batch, 1, s.input_size),
                        (steps * s.batch, s.input_size))
        first = _Item(loads=[(self._x_view(t0, steps), x, "x")])
        bias_regions = ("wb", "rb") if self.places.b is not None else ()
        joined = s.gates if s.gates == 4 or len(s.passes) > 1 else 2
        attrs = {"recurrent_bias_gates": joined}
        items = [first]
        units = s.hidden if plan.w_resident else plan.units
        for j0, u in self._blocks(units):
            if plan.w_resident:
                item, region = first, "w0"
            else:
                region = f"w{counter['w'] % plan.buffers}"
                counter["w"] += 1
                item = _Item(loads=[(self._rows(self.places.w, d, 0, s.gates, j0, u),
                                     self._units(region, u, s.gates * s.input_size, s.weight_dtype), region)])
                items.append(item)
            w = self._units(region, u, s.gates * s.input_size, s.weight_dtype)
            wb, rb = (self._units(n, u, s.gates, s.weight_dtype, j0) if self.places.b is not None else None
                      for n in ("wb", "rb"))
            macs = s.batch * u * s.gates * s.input_size
            if u == s.hidden:
                item.computes.append(("rnn_project", (x, w, wb, rb), (self._pre(steps, u, 0, 0),), attrs,
                                      ("x", region, *bias_regions), ("pre",), macs * steps))
                continue
            for k in range(steps):  # a block of units: one step at a time (its rows of each step)
                item.computes.append((
                    "rnn_project", (x, w, wb, rb), (self._pre(1, u, j0, k),), {**attrs, "first_step": k},
                    ("x", region, *bias_regions), ("pre",), macs,
                ))
        return items

    def _step(self, d: int, t: int, t0: int, last: bool, states: dict, counter: dict) -> list[_Item]:
        s, plan, places = self.shape, self.plan, self.places
        hidden, batch = s.hidden, s.batch
        lstm = s.gates == 4
        index = counter["step"]
        counter["step"] += 1
        new, old = f"h{index % 2}", f"h{(index + 1) % 2}"
        has_h = index > 0 or states["h"]
        has_c = index > 0 or states["c"]
        h_all = self._units(old, hidden, batch, F32) if has_h else None
        units = hidden if plan.r_resident else plan.units
        items = []
        for p, (g0, count) in enumerate(s.passes):
            for j0, u in self._blocks(units):
                if plan.r_resident:
                    region, item = f"r{p}_0", _Item()
                else:
                    region = f"r{p}_{counter['r'] % plan.buffers}"
                    counter["r"] += 1
                    item = _Item(loads=[(self._rows(places.r, d, g0, count, j0, u),
                                         self._units(region, u, count * hidden, s.weight_dtype), region)])
                items.append(item)
                r = self._units(region, u, count * hidden, s.weight_dtype)
                pre = self._pre(1, u, j0, t - t0)
                own = self._units(old, u, batch, F32, j0) if has_h else None
                h_new = self._units(new, u, batch, F32, j0)
                macs = batch * u * count * hidden
                reads = ["pre", region] + ([old] if has_h else [])
                if len(s.passes) > 1 and p == 0:
                    outs = (self._units("z", u, batch, F32, j0), self._units("rh", u, batch, F32, j0))
                    item.computes.append(("gru_gates", (pre, h_all, own, r), outs, {}, tuple(reads), ("z", "rh"),
                                          macs))
                    continue
                y_region = f"y{counter['y'] % 2}"
                counter["y"] += 1
                y = self._units(y_region, u, batch, s.data_dtype)
                if lstm:
                    c = self._units("c", u, batch, F32, j0)
                    item.computes.append(("lstm_cell", (pre, h_all, c if has_c else None, r), (h_new, c, y), {},
                                          (*reads, "c"), (new, "c", y_region), macs))
                elif len(s.passes) == 1:
                    rbh = self._units("rbh", u, 1, s.weight_dtype, j0) if places.b is not None else None
                    item.computes.append(("gru_cell", (pre, h_all, own, r, rbh), (h_new, y), {},
                                          (*reads, "rbh"), (new, y_region), macs))
                else:
                    rh = self._units("rh", hidden, batch, F32)
                    z = self._units("z", u, batch, F32, j0)
                    reads = ["pre", region, "rh", "z"] + ([old] if has_h else [])
                    item.computes.append(("gru_update", (pre, rh, own, z, r), (h_new, y), {}, tuple(reads),
                                          (new, y_region), batch * u * hidden))
                if places.y is not None:
                    item.stores.append((y, self._y_view(t, d, j0, u), y_region, "y"))
                if last and places.y_h is not None:
                    item.stores.append((y, self._state_view(places.y_h, d, j0, u), y_region, "y_h"))
                if last and lstm and places.y_c is not None:
                    if s.data_dtype == F32:
                        item.stores.append((c, self._state_view(places.y_c, d, j0, u), "c", "y_c"))
                    else:
                        held = self._units("c_out", u, batch, s.data_dtype, j0)
                        item.computes.append(("cast", (c,), (held,), {}, ("c",), ("c_out",), 0))
                        item.stores.append((held, self._state_view(places.y_c, d, j0, u), "c_out", "y_c"))
        return items

    def _emit(self, items: list[_Item]) -> None:
        """Items in order; the loads of the next item go ahead of this item's computes when
        they touch no region this item uses (double buffers), so DMA overlaps compute."""
        emitted_loads: set[int] = set()

        def regions_of(item: _Item) -> set[str]:
            used = set()
            for compute in item.computes:
                used.update(compute[4])
                used.update(compute[5])
            return used

        for i, item in enumerate(items):
            if i not in emitted_loads:
                self._loads(item)
                emitted_loads.add(i)
            following = items[i + 1] if i + 1 < len(items) else None
            if following is not None and not ({r for *_, r in following.loads} & regions_of(item)):
                self._loads(following)
                emitted_loads.add(i + 1)
            for kind, inputs, outputs, attrs, reads, writes, macs in item.computes:
                deps = self.hazards.compute_deps((*reads, *writes))
                index = self.emit_instruction(Compute, kind, inputs, outputs, attrs, deps=deps, layer=self.layer,
                                              macs=macs)
                for region in (*reads, *writes):
                    self.hazards.computed[region] = index
            for src, dst, region, output in item.stores:
                deps = [self.hazards.computed[region]] if region in self.hazards.computed else []
                index = self.emit_instruction(DmaStore, src, dst, deps=deps, layer=self.layer)
                self.hazards.dma[region] = index
                self.written[output] = index

    def _loads(self, item: _Item) -> None:
        for src, dst, region in item.loads:
            index = self.emit_instruction(DmaLoad, src, dst, deps=self.hazards.load_deps(region), layer=self.layer)
            self.hazards.dma[region] = index


def recurrent_shape(kind: str, attrs: dict, x_shape: Sequence[int], data_dtype: str, weight_dtype: str,
                    outputs_c: bool) -> RecurrentShape:
    """The RecurrentShape of a tpu.lstm / tpu.gru from its attributes and X's shape."""
    layout = attrs.get("layout", 0)
    seq, batch = (x_shape[1], x_shape[0]) if layout else (x_shape[0], x_shape[1])
    gates = 4 if kind == "lstm" else 3
    if gates == 4 or attrs.get("linear_before_reset"):
        passes: tuple[tuple[int, int], ...] = ((0, gates),)
    else:
        passes = ((0, 2), (2, 1))
    return RecurrentShape(gates, int(attrs["hidden_size"]), int(x_shape[2]), int(batch), int(seq), data_dtype,
                          weight_dtype, passes, outputs_c)

