"""The HTML page of `tpu-xdsl report`: one self-contained file (inline CSS, SVG and a little
JavaScript, nothing from the network).

Sections: a header (model, chip, mode, input, stages, a summary line per pair of stages,
simulated cycles against the roofline); the layer graph drawn by `layered_layout`, each
layer filled by its cosine for the pair picked in a menu; every tensor with its numbers
per pair, worst first, sortable; with a device stage, the layer-group profile and the
timeline of the DMA and compute engines.
"""

from __future__ import annotations

import html
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tpu_xdsl.inspect.layer_graph import Layer, LayerGraph
from tpu_xdsl.inspect.stages import Stage
from tpu_xdsl.interp.compare import TensorComparison

if TYPE_CHECKING:
    from tpu_xdsl.tools.report import StagePair

# Fill of a layer by its cosine: (lowest cosine of the bin, color, legend). ColorBrewer's
# RdYlGn, finer near 1 where INT8 results live.
COSINE_BINS = (
    (0.99999, "#1a9850", "≥ 0.99999"),
    (0.9999, "#66bd63", "≥ 0.9999"),
    (0.999, "#a6d96a", "≥ 0.999"),
    (0.99, "#d9ef8b", "≥ 0.99"),
    (0.95, "#fee08b", "≥ 0.95"),
    (0.9, "#fdae61", "≥ 0.9"),
    (0.8, "#f46d43", "≥ 0.8"),
    (-math.inf, "#d73027", "< 0.8"),
)
NOT_COMPARED = "#e4e4e4"
MISMATCH = "#7b3294"  # shapes differ: no cosine
DARK_FILLS = frozenset({"#1a9850", "#d73027", MISMATCH})  # white text on these

# Layer groups, in the graph's outlines and the timeline (no red or green: those mean
# similarity here).
GROUP_COLORS = ("#1f77b4", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#393b79", "#6b6ecf")
UNGROUPED_COLORS = ("#9aa0a6", "#c3c7cb")


# -- colors and numbers ---------------------------------------------------------------------


def cosine_color(cosine: float) -> str:
    """The fill of a layer (and swatch of a tensor) with this cosine."""
    if math.isnan(cosine):
        return MISMATCH
    return next(color for low, color, _ in COSINE_BINS if cosine >= low)


def comparison_color(row: TensorComparison | None) -> str:
    if row is None:
        return NOT_COMPARED
    return MISMATCH if row.problem else cosine_color(row.cosine)


def worst(rows: Sequence[TensorComparison]) -> TensorComparison | None:
    """The comparison that looks worst: a mismatch, else the lowest cosine."""
    if not rows:
        return None
    return min(rows, key=lambda r: -math.inf if r.problem else r.cosine)


def group_color(index: int | None) -> str | None:
    return None if index is None else GROUP_COLORS[index % len(GROUP_COLORS)]


def fmt(value: float, digits: int = 6) -> str:
    if math.isnan(value):
        return "—"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}f}"


def fmt_g(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.3g}"


def sort_value(value: float) -> str:
    """A cell's sort key for the page's script: '' (always last) for no number."""
    if math.isnan(value):
        return ""
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(float(value))


def json_number(value: float) -> float | str | None:
    if math.isnan(value):
        return None
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def shape_text(shape: Sequence[int] | None) -> str:
    if shape is None:
        return "?"
    return "x".join(map(str, shape)) or "scalar"


def middle_cut(text: str, limit: int) -> str:
    """`text` shortened in the middle (tensor names differ at both ends)."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return f"{text[:head]}…{text[len(text) - (limit - 1 - head):]}"


def e(text: object) -> str:
    return html.escape(str(text), quote=True)


# -- the page -------------------------------------------------------------------------------


@dataclass
class DeviceRun:
    """The device stage's schedule: the model, its timeline, profile rows and chip."""

    model: Any  # TpuModel
    timeline: Any  # Timeline
    rows: list  # ProfileRow
    chip: Any  # ChipConfig


def default_pair(pairs: Sequence[StagePair]) -> int:
    """The pair the graph shows first: the one with the lowest cosine."""
    if not pairs:
        return 0

    def lowest(pair: StagePair) -> float:
        return min((-math.inf if r.problem else r.cosine for r in pair.rows.values()), default=1.0)

    return min(range(len(pairs)), key=lambda i: (lowest(pairs[i]), -i))


@dataclass
class Page:
    """What the page is built from."""

    model_name: str
    stages: list[Stage]
    input_path: str
    feeds: Mapping[str, np.ndarray]
    pairs: list[StagePair]
    graph: LayerGraph
    shapes: dict[str, tuple[int, ...]]
    device: DeviceRun | None
    shown_pair: int = 0

    def tensor_names(self) -> list[str]:
        """Every tensor of the graph and of a comparison, in program order."""
        names = [n for layer in self.graph.layers for n in layer.names]
        seen = set(names)
        for pair in self.pairs:
            for name in pair.rows:
                if name not in seen:
                    seen.add(name)
                    names.append(name)
        return names


def model_name(stages: Sequence[Stage]) -> str:
    for stage in stages:
        if stage.kind in ("top", "tpu"):
            name = stage.handle.attributes.get("module.name")
            if name is not None:
                return name.data
        if stage.kind == "device":
            return stage.handle.name
    return stages[0].path.stem


def chip_and_mode(stages: Sequence[Stage]) -> tuple[str, str]:
    for stage in reversed(stages):
        if stage.kind == "device":
            return stage.handle.chip, stage.handle.mode
        if stage.kind == "tpu":
            chip = stage.handle.attributes.get("module.chip")
            return getattr(chip, "data", "?"), stage.mode or "?"
    return "none (no TPU stage)", "F32"


def render_header(page: Page) -> str:
    chip, mode = chip_and_mode(page.stages)
    inputs = ", ".join(f"{e(name)}: {shape_text(np.shape(v))} {np.asarray(v).dtype}" for name, v in page.feeds.items())
    rows = [
        ("model", e(page.model_name)),
        ("chip, mode", f"{e(chip)}, {e(mode)}"),
        ("input", f"{e(Path(page.input_path).name)} ({inputs})"),
        ("stages", "<br>".join(e(s.describe()) for s in page.stages)),
    ]
    for pair in page.pairs:
        badge = '<span class="pass">pass</span>' if pair.ok else '<span class="fail">FAIL</span>'
        rows.append((e(pair.title), f"{badge} {e(pair.summary)}"))
    if page.device is not None:
        rows.append(("device model", device_summary(page.device)))
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return (
        f"<header><h1>{e(page.model_name)}</h1>"
        f"<p class=\"sub\">tpu-xdsl report: {len(page.stages)} stage(s) on {e(Path(page.input_path).name)}</p>"
        f"<table class=\"facts\">{body}</table>"
        "<nav><a href=\"#graph\">layer graph</a> · <a href=\"#tensors\">tensors</a>"
        + (" · <a href=\"#profile\">layer groups</a> · <a href=\"#timeline\">timeline</a>" if page.device else "")
        + "</nav></header>"
    )


def device_summary(device: DeviceRun) -> str:
    """The totals and roofline lines of `run --profile`."""
    from tpu_xdsl.device.runtime import total_lines

    return "<br>".join(e(line) for line in total_lines(device.model, device.timeline, device.chip))


NODE_W, NODE_H = 176, 38


def node_label(layer: Layer, pair: StagePair | None) -> tuple[str, str, str, bool]:
    """Fill, ink, the cosine text and failing for one pair."""
    row = worst([pair.rows[n] for n in layer.names if n in pair.rows]) if pair else None
    fill = comparison_color(row)
    if row is None:
        return fill, "#222", "", False
    failing = any(not pair.rows[n].passes(pair.tolerance) for n in layer.names if n in pair.rows)
    text = "shape!" if row.problem else fmt(row.cosine, 5)
    return fill, "#fff" if fill in DARK_FILLS else "#222", ("✗ " if failing else "") + text, failing


def layer_tooltip(layer: Layer, page: Page) -> str:
    lines = [", ".join(layer.names), f"{layer.op}  {shape_text(layer.shape)}"]
    if layer.group is not None:
        lines.append(f"layer group {layer.group}: {page.graph.groups[layer.group][0]}")
    for pair in page.pairs:
        row = worst([pair.rows[n] for n in layer.names if n in pair.rows])
        if row is None:
            lines.append(f"{pair.title}: not compared")
        elif row.problem:
            lines.append(f"{pair.title}: {row.problem}")
        else:
            mark = "pass" if row.passes(pair.tolerance) else "FAIL"
            lines.append(
                f"{pair.title}: cos {fmt(row.cosine)}, euclid {fmt(row.euclidean)}, "
                f"SQNR {fmt(row.sqnr_db, 2)} dB, max|d| {fmt_g(row.max_abs_diff)} {mark}"
            )
    return "\n".join(lines)


def short_op(op: str) -> str:
    return op.split(".", 1)[1] if op.startswith(("top.", "tpu.")) else op


def render_graph(page: Page, layout) -> str:
    graph = page.graph
    pair = page.pairs[page.shown_pair] if page.pairs else None
    parts = [
        (f'<svg id="graph-svg" width="{layout.width:.0f}" height="{layout.height:.0f}" '
         f'viewBox="0 0 {layout.width:.0f} {layout.height:.0f}" role="img" aria-label="layer graph">'),
        ('<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
         'orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" fill="#8a8f98"/></marker></defs>'),
        '<g class="edges">',
    ]
    for (u, v, tensor), points in zip(graph.edges, layout.edges, strict=True):
        if not points:
            continue
        d = [f"M{points[0][0]:.1f},{points[0][1]:.1f}"]
        for (x0, y0), (x1, y1) in itertools.pairwise(points):
            if abs(x0 - x1) < 0.5:
                d.append(f"L{x1:.1f},{y1:.1f}")
            else:
                mid = (y0 + y1) / 2
                d.append(f"C{x0:.1f},{mid:.1f} {x1:.1f},{mid:.1f} {x1:.1f},{y1:.1f}")
        parts.append(
            f'<path class="edge" data-from="{u}" data-to="{v}" d="{" ".join(d)}" marker-end="url(#arrow)">'
            f"<title>{e(tensor)}</title></path>"
        )
    parts.append('</g><g class="nodes">')
    for layer in graph.layers:
        x, y = layout.x[layer.index] - NODE_W / 2, layout.y[layer.index]
        fill, ink, cos_text, failing = node_label(layer, pair)
        stroke = group_color(layer.group)
        outline = f'stroke="{stroke}" stroke-width="3.5"' if stroke else 'stroke="#6b7078" stroke-width="1"'
        tag = (f'<text class="gtag" x="{NODE_W - 4}" y="-3" text-anchor="end" fill="{stroke}">'
               f"g{layer.group}</text>") if stroke else ""
        parts.append(
            f'<g class="node{" failing" if failing else ""}" id="node-{layer.index}" data-node="{layer.index}" '
            f'data-name="{e(layer.names[0])}" transform="translate({x:.1f},{y:.1f})">'
            f"<title>{e(layer_tooltip(layer, page))}</title>"
            f'<rect width="{NODE_W}" height="{NODE_H}" rx="5" fill="{fill}" {outline}/>'
            f'<text class="op" x="7" y="15" fill="{ink}">{e(middle_cut(short_op(layer.op), 16))}</text>'
            f'<text class="cos" x="{NODE_W - 7}" y="15" text-anchor="end" fill="{ink}">{e(cos_text)}</text>'
            f'<text class="nm" x="7" y="31" fill="{ink}">{e(middle_cut(layer.names[0], 30))}</text>{tag}</g>'
        )
    parts.append("</g></svg>")
    return "".join(parts)


def render_legend(page: Page) -> str:
    items = [(color, label) for _, color, label in COSINE_BINS]
    items += [(NOT_COMPARED, "not compared"), (MISMATCH, "shape mismatch")]
    swatches = "".join(f'<span class="key"><i style="background:{c}"></i>{e(t)}</span>' for c, t in items)
    groups = ""
    if page.graph.groups:
        groups = ('<span class="key"><i class="outline"></i>thick outline, tag gN: member of layer group N '
                  "(colored as in the timeline)</span>")
    return (f'<div class="legend"><b>cosine</b> {swatches}<span class="key">✗ below tolerance</span>{groups}</div>')


def render_graph_section(page: Page, layout) -> str:
    options = "".join(
        f'<option value="{i}"{" selected" if i == page.shown_pair else ""}>{e(p.title)}</option>'
        for i, p in enumerate(page.pairs)
    )
    picker = (f'<label>color by <select id="pair-select">{options}</select></label>' if page.pairs
              else "<span>one stage: nothing compared</span>")
    return (
        '<section id="graph"><h2>Layer graph</h2>'
        f'<p class="hint">{len(page.graph.layers)} {e(page.graph.source)}, top to bottom by depth from the inputs. '
        "Hover a layer for its numbers, click it to select its tensors in the table.</p>"
        f'<div class="controls">{picker}</div>{render_legend(page)}'
        f'<div class="graph-row"><div id="graph-box" class="scroll">{render_graph(page, layout)}</div>'
        '<aside id="details"><p class="hint">Click a layer to see its similarities here.</p></aside></div>'
        "</section>"
    )


def tensor_order_key(page: Page, name: str) -> tuple:
    """Worst first: failing tensors, then by lowest cosine over the pairs; not compared last."""
    rows = [p.rows[name] for p in page.pairs if name in p.rows]
    if not rows:
        return (2, 0.0)
    failing = any(not p.rows[name].passes(p.tolerance) for p in page.pairs if name in p.rows)
    lowest = min(-math.inf if r.problem else r.cosine for r in rows)
    return (0 if failing else 1, lowest)


def render_tensor_table(page: Page) -> str:
    layer_of = {n: layer for layer in page.graph.layers for n in layer.names}
    names = page.tensor_names()
    number = {n: i for i, n in enumerate(names)}
    head1 = '<tr><th colspan="4"></th>' + "".join(
        f'<th colspan="5" class="pair">{e(p.title)} <span class="tol">(tolerance {p.tolerance.cosine:g}, '
        f"{p.tolerance.euclidean:g})</span></th>" for p in page.pairs
    ) + "</tr>"
    columns = [("#", "num"), ("tensor", "text"), ("op", "text"), ("shape", "text")]
    for _ in page.pairs:
        columns += [("cosine", "num"), ("euclid", "num"), ("SQNR dB", "num"), ("max |d|", "num"), ("ok", "num")]
    head2 = "<tr>" + "".join(
        f'<th data-col="{i}" data-type="{kind}" title="click to sort">{e(label)}</th>'
        for i, (label, kind) in enumerate(columns)
    ) + "</tr>"
    body = []
    for name in sorted(names, key=lambda n: tensor_order_key(page, n)):
        layer = layer_of.get(name)
        shape = page.shapes.get(name, layer.shape if layer else None)
        cells = [
            f'<td data-v="{number[name]}">{number[name]}</td>',
            f'<td class="name">{e(name)}</td>',
            f"<td>{e(short_op(layer.op)) if layer else ''}</td>",
            f"<td>{e(shape_text(shape))}</td>",
        ]
        failing = False
        for pair in page.pairs:
            row = pair.rows.get(name)
            if row is None:
                cells += ['<td data-v="" class="none">—</td>'] * 4 + ['<td data-v=""></td>']
                continue
            ok = row.passes(pair.tolerance)
            failing |= not ok
            swatch = f'<i class="sw" style="background:{comparison_color(row)}"></i>'
            if row.problem:
                cells.append(f'<td data-v="-Infinity" title="{e(row.problem)}">{swatch}{e(row.problem)}</td>')
                cells += ['<td data-v="">—</td>'] * 3
            else:
                cells += [
                    f'<td data-v="{sort_value(row.cosine)}">{swatch}{fmt(row.cosine)}</td>',
                    f'<td data-v="{sort_value(row.euclidean)}">{fmt(row.euclidean)}</td>',
                    f'<td data-v="{sort_value(row.sqnr_db)}">{fmt(row.sqnr_db, 2)}</td>',
                    f'<td data-v="{sort_value(row.max_abs_diff)}">{fmt_g(row.max_abs_diff)}</td>',
                ]
            cells.append(f'<td data-v="{int(ok)}" class="{"pass" if ok else "fail"}">{"pass" if ok else "FAIL"}</td>')
        node = f' data-node="{layer.index}"' if layer else ""
        mark = ' class="failing"' if failing else ""
        body.append(f'<tr data-name="{e(name)}"{node}{mark}>{"".join(cells)}</tr>')
    return (
        '<section id="tensors"><h2>Tensors</h2>'
        f'<p class="hint">{len(names)} tensors, worst first (failing, then lowest cosine). Click a column header to '
        "sort by it, again to reverse; # is the program order. Click a row to find its layer in the graph.</p>"
        '<div id="tensor-box" class="scroll table-box"><table id="tensor-table" class="sortable">'
        f"<thead>{head1}{head2}</thead><tbody>{''.join(body)}</tbody></table></div></section>"
    )


def render_profile(page: Page) -> str:
    from tpu_xdsl.device.runtime import peak_macs_per_cycle

    device = page.device
    assert device is not None
    total = max(1, device.timeline.total_cycles)
    peak = peak_macs_per_cycle(device.model, device.chip)
    group_index = {g.name: i for i, g in enumerate(device.model.groups)}
    columns = [("#", "num"), ("group or layer", "text"), ("ops", "num"), ("slices n×h", "text"),
               ("first cycle", "num"), ("cycles", "num"), ("share", "num"), ("compute busy", "num"),
               ("DMA busy", "num"), ("compute %", "num"), ("DMA %", "num"), ("MACs", "num"),
               ("MAC util", "num"), ("DMA bytes", "num")]
    head = "<tr>" + "".join(
        f'<th data-col="{i}" data-type="{kind}" title="click to sort">{e(label)}</th>'
        for i, (label, kind) in enumerate(columns)
    ) + "</tr>"
    body = []
    for n, row in enumerate(device.rows):
        span, compute, dma = row.span, row.busy("compute"), row.busy("dma")
        util = row.macs / (compute * peak) if compute and row.macs else 0.0
        if row.group is not None:
            index = group_index.get(row.name, row.scheduled[0].instruction.group)
            color = group_color(index)
            label = f'<i class="sw" style="background:{color}"></i>group {index}: {e(row.name)}'
            members, ops, slices = row.group.ops, len(row.group.ops), f"{row.group.n_slices}×{row.group.h_slices}"
        else:
            label, members, ops, slices = e(row.name), (row.name,), 1, "—"
        share = span / total
        cells = [
            (n, str(n)), (None, label), (ops, str(ops)), (None, slices), (row.first, str(row.first)),
            (span, str(span)), (share, f"{share:.1%}"), (compute, str(compute)), (dma, str(dma)),
            (compute / max(1, span), f"{compute / max(1, span):.0%}"), (dma / max(1, span), f"{dma / max(1, span):.0%}"),
            (row.macs, str(row.macs)), (util, f"{util:.0%}"), (row.dma_bytes, str(row.dma_bytes)),
        ]
        tds = []
        for i, (value, text) in enumerate(cells):
            sort = f' data-v="{value!r}"' if value is not None else ""
            bar = (f' class="bar" style="background:linear-gradient(90deg,#cfe0f5 {share * 100:.1f}%,'
                   f'transparent {share * 100:.1f}%)"' if i == 6 else "")
            tds.append(f"<td{sort}{bar}>{text}</td>")
        body.append(f'<tr data-members="{e(json.dumps(list(members)))}">{"".join(tds)}</tr>')
    return (
        '<section id="profile"><h2>Layer groups and layers on the device</h2>'
        f'<p class="hint">{len(device.rows)} rows: one per layer group (its ops run slice by slice out of local '
        "memory) and per layer outside groups, in the order they start. cycles = first start to last finish; busy = "
        "cycles the row's own instructions keep an engine busy. Click a row to select its layers in the graph.</p>"
        '<div class="scroll table-box"><table id="profile-table" class="sortable">'
        f"<thead>{head}</thead><tbody>{''.join(body)}</tbody></table></div></section>"
    )


@dataclass
class Bar:
    """Consecutive instructions of one layer on one engine, drawn as one bar."""

    engine: str
    layer: str
    group: int
    start: int
    finish: int
    count: int = 1


def timeline_bars(scheduled) -> list[Bar]:
    bars: list[Bar] = []
    last: dict[str, Bar] = {}
    for item in scheduled:
        instruction = item.instruction
        bar = last.get(instruction.engine)
        if (bar is not None and bar.layer == instruction.layer and bar.group == instruction.group
                and item.start <= bar.finish):
            bar.finish, bar.count = max(bar.finish, item.finish), bar.count + 1
            continue
        bar = Bar(instruction.engine, instruction.layer, instruction.group, item.start, item.finish)
        last[instruction.engine] = bar
        bars.append(bar)
    return bars


TIMELINE_LEFT, TIMELINE_WIDTH, AXIS_H = 78, 1240, 22
ENGINE_LANE_H, SPAN_LANE_H = 24, 14  # an engine's lane; one row of group spans
ENGINE_NAMES = {"dma": "DMA", "compute": "compute"}


def bar_color(group: int, layer: str, layer_colors: dict[str, str]) -> str:
    if group >= 0:
        return group_color(group) or GROUP_COLORS[0]
    return layer_colors.setdefault(layer, UNGROUPED_COLORS[len(layer_colors) % len(UNGROUPED_COLORS)])


def pack_spans(spans: Sequence[tuple[int, int]]) -> list[int]:
    """A row for each (start, finish) so that spans in one row do not overlap (pipelined
    groups overlap in time): the first row free at its start."""
    free_at: list[int] = []
    rows = []
    for start, finish in spans:
        row = next((i for i, free in enumerate(free_at) if free <= start), len(free_at))
        if row == len(free_at):
            free_at.append(finish)
        free_at[row] = finish
        rows.append(row)
    return rows


def render_timeline(page: Page) -> str:
    device = page.device
    assert device is not None
    total = max(1, device.timeline.total_cycles)
    scale = TIMELINE_WIDTH / total
    spans = [(row.first, row.first + row.span) for row in device.rows]
    span_rows = pack_spans(spans)
    spans_height = SPAN_LANE_H * (max(span_rows, default=0) + 1) + 6
    lane_top = {"spans": AXIS_H, "dma": AXIS_H + spans_height, "compute": AXIS_H + spans_height + ENGINE_LANE_H}
    height = lane_top["compute"] + ENGINE_LANE_H + 6
    width = TIMELINE_LEFT + TIMELINE_WIDTH + 12
    layer_colors: dict[str, str] = {}
    parts = [
        (f'<svg id="timeline-svg" width="{width}" height="{height}" data-total="{total}" '
         f'data-left="{TIMELINE_LEFT}" data-width="{TIMELINE_WIDTH}" role="img" aria-label="engine timeline">'),
        '<g class="axis" id="timeline-axis">',
    ]
    for cycle, label in axis_ticks(total, TIMELINE_WIDTH):
        x = TIMELINE_LEFT + cycle * scale
        parts.append(f'<g data-c="{cycle}"><line x1="{x:.1f}" x2="{x:.1f}" y1="16" y2="{height - 4}"/>'
                     f'<text x="{x:.1f}" y="12" text-anchor="middle">{label}</text></g>')
    parts.append("</g>")
    for key, name in (("spans", "groups"), ("dma", "DMA"), ("compute", "compute")):
        parts.append(f'<text class="lane" x="4" y="{lane_top[key] + 16}">{name}</text>')
    parts.append('<g class="bars">')

    def rect(start: int, finish: int, y: float, h: float, color: str, tip: str, cls: str) -> str:
        x, w = TIMELINE_LEFT + start * scale, max((finish - start) * scale, 0.6)
        return (f'<rect class="{cls}" data-s="{start}" data-f="{finish}" x="{x:.2f}" y="{y}" width="{w:.2f}" '
                f'height="{h}" fill="{color}"><title>{e(tip)}</title></rect>')

    group_index = {g.name: i for i, g in enumerate(device.model.groups)}
    for row, (start, finish), lane in zip(device.rows, spans, span_rows, strict=True):
        index = group_index.get(row.name, -1) if row.group is not None else -1
        color = bar_color(index, row.name, layer_colors)
        what = f"group {index}: {row.name} ({len(row.group.ops)} ops)" if row.group is not None else row.name
        tip = (f"{what}\ncycles {start}–{finish} ({row.span}); compute busy {row.busy('compute')}, "
               f"DMA busy {row.busy('dma')}")
        parts.append(rect(start, finish, lane_top["spans"] + 3 + lane * SPAN_LANE_H, SPAN_LANE_H - 3, color, tip,
                          "span"))
    for bar in timeline_bars(device.timeline.scheduled):
        color = bar_color(bar.group, bar.layer, layer_colors)
        where = f" (group {bar.group}: {device.model.groups[bar.group].name})" if bar.group >= 0 else ""
        tip = (f"{bar.layer}{where}\n{ENGINE_NAMES[bar.engine]}: cycles {bar.start}–{bar.finish} "
               f"({bar.finish - bar.start}), {bar.count} instruction(s)")
        parts.append(rect(bar.start, bar.finish, lane_top[bar.engine] + 3, ENGINE_LANE_H - 6, color, tip, bar.engine))
    parts.append("</g></svg>")
    return (
        '<section id="timeline"><h2>Timeline of the engines</h2>'
        f'<p class="hint">{device.timeline.total_cycles} cycles; one bar per run of instructions of a layer on an '
        "engine, colored by layer group (gray: layers outside groups); the top lanes span each group or layer "
        "(pipelined groups overlap). Hover a bar for its numbers.</p>"
        '<div class="controls"><button type="button" data-zoom="2">zoom in</button> '
        '<button type="button" data-zoom="0.5">zoom out</button> <button type="button" data-zoom="0">fit</button></div>'
        f'<div id="timeline-box" class="scroll">{"".join(parts)}</div></section>'
    )


def axis_ticks(total: int, width: float) -> list[tuple[int, str]]:
    """About one tick per 110 pixels at a 1-2-5 step of cycles (the page's script does the
    same when zooming)."""
    raw = total / max(1.0, width / 110)
    power = 10 ** math.floor(math.log10(max(raw, 1)))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [(c, cycle_label(c)) for c in range(0, total + 1, int(step))]


def cycle_label(cycle: int) -> str:
    if cycle >= 1_000_000:
        return f"{cycle / 1e6:g}M"
    if cycle >= 1000:
        return f"{cycle / 1e3:g}k"
    return str(cycle)


def page_data(page: Page) -> dict:
    """What the page's script needs: per layer, its numbers and fill for every pair."""
    layers = []
    for layer in page.graph.layers:
        per_pair = []
        for pair in page.pairs:
            fill, ink, text, failing = node_label(layer, pair)
            rows = [pair.rows[n] for n in layer.names if n in pair.rows]
            per_pair.append({
                "fill": fill, "ink": ink, "text": text, "failing": failing,
                "tensors": [{
                    "name": r.name, "cos": json_number(r.cosine), "euc": json_number(r.euclidean),
                    "sqnr": json_number(r.sqnr_db), "maxd": json_number(r.max_abs_diff),
                    "ok": r.passes(pair.tolerance), "problem": r.problem,
                } for r in rows],
            })
        group = page.graph.groups[layer.group][0] if layer.group is not None else None
        layers.append({"names": layer.names, "op": layer.op, "shape": shape_text(layer.shape),
                       "group": layer.group, "groupName": group, "pairs": per_pair})
    return {"pairs": [p.title for p in page.pairs], "layers": layers}


STYLE = """
:root{--ink:#1d2025;--muted:#5f6670;--line:#d5d9de;--bg:#f6f7f9;--accent:#1f6feb}
*{box-sizing:border-box}
body{margin:0;padding:0 20px 40px;font:13px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
color:var(--ink);background:#fff}
h1{font-size:22px;margin:18px 0 0}h2{font-size:17px;margin:26px 0 4px}
.sub,.hint{color:var(--muted);margin:2px 0 8px}
table{border-collapse:collapse}
.facts th{text-align:left;vertical-align:top;padding:3px 14px 3px 0;white-space:nowrap;color:var(--muted);font-weight:600}
.facts td{padding:3px 0}
nav{margin:10px 0 0}nav a{color:var(--accent)}
.pass{color:#11703a;font-weight:600}.fail{color:#b3261e;font-weight:700}
.scroll{overflow:auto;border:1px solid var(--line);border-radius:6px;background:var(--bg)}
.controls{margin:4px 0 6px}select,button{font:inherit;padding:2px 6px}
.legend{margin:4px 0 8px;display:flex;flex-wrap:wrap;gap:4px 12px;align-items:center}
.key{display:inline-flex;align-items:center;gap:4px;white-space:nowrap}
.key i{display:inline-block;width:16px;height:12px;border:1px solid #888;border-radius:2px}
.key i.outline{background:#fff;border:3px solid #1f77b4}
.graph-row{display:flex;gap:12px;align-items:flex-start}
#graph-box{flex:1;max-height:72vh;min-height:200px}
#graph-svg{display:block;margin:0 auto}
#details{width:300px;flex:none;border:1px solid var(--line);border-radius:6px;padding:8px 10px;max-height:72vh;
overflow:auto;overflow-wrap:anywhere}
#details h3{font-size:14px;margin:0 0 4px}#details h4{font-size:13px;margin:10px 0 2px}#details p{margin:2px 0}
#details table td{padding:1px 8px 1px 0;vertical-align:top}#details .metrics td:last-child{font-variant-numeric:tabular-nums}
.edge{fill:none;stroke:#8a8f98;stroke-width:1.2}
.edge.hl{stroke:var(--accent);stroke-width:2.4}
.node{cursor:pointer}.node text{font-size:11px}.node .op{font-weight:600}.node .cos{font-variant-numeric:tabular-nums}
.node.failing .cos{font-weight:700}.node .gtag{font-size:10px;font-weight:700}
.node.sel rect{stroke:#000;stroke-width:4}.node.member rect{stroke:#000;stroke-dasharray:5 3;stroke-width:3}
.table-box{max-height:60vh;position:relative;background:#fff}
.sortable th{position:sticky;background:#eef1f4;padding:4px 8px;border-bottom:1px solid var(--line);white-space:nowrap}
.sortable thead tr:first-child th{top:0}.sortable thead tr:nth-child(2) th{top:26px}
.sortable thead tr:only-child th{top:0}
.sortable th[data-col]{cursor:pointer;user-select:none}
.sortable th[data-dir=asc]::after{content:" ▲"}.sortable th[data-dir=desc]::after{content:" ▼"}
th.pair{text-align:center;border-left:2px solid var(--line)}.tol{font-weight:400;color:var(--muted)}
.sortable td{padding:2px 8px;border-bottom:1px solid #eceef1;white-space:nowrap;font-variant-numeric:tabular-nums}
.sortable td.name{max-width:360px;overflow:hidden;text-overflow:ellipsis}
.sortable tbody tr{cursor:pointer}.sortable tbody tr:hover{background:#f2f6fc}
.sortable tbody tr.hl{background:#fff3c4}
.sortable td.bar{min-width:90px}
tr.failing td.name{color:#b3261e;font-weight:600}
i.sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;border:1px solid #0003}
#timeline-box{background:#fff}
#timeline-svg text{font-size:11px;fill:var(--muted)}#timeline-svg .lane{fill:var(--ink);font-weight:600}
#timeline-svg .axis line{stroke:#e6e8eb}
"""

SCRIPT = r"""
(function(){
const data = JSON.parse(document.getElementById('report-data').textContent);
const svg = document.getElementById('graph-svg');
const details = document.getElementById('details');
const tensorBox = document.getElementById('tensor-box');
const graphBox = document.getElementById('graph-box');
let pair = 0;
const select = document.getElementById('pair-select');
if (select) { pair = +select.value; select.addEventListener('change', () => { pair = +select.value; recolor(); }); }
function recolor(){
  for (const node of svg.querySelectorAll('.node')) {
    const p = data.layers[+node.dataset.node].pairs[pair];
    if (!p) continue;
    node.querySelector('rect').setAttribute('fill', p.fill);
    for (const t of node.querySelectorAll('.op,.cos,.nm')) t.setAttribute('fill', p.ink);
    node.querySelector('.cos').textContent = p.text;
    node.classList.toggle('failing', p.failing);
  }
}
function num(v, d){ if (v === null) return '—'; if (typeof v === 'string') return v; return v.toFixed(d); }
function esc(s){ return String(s).replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c])); }
function show(index){
  const layer = data.layers[index];
  let h = '<h3>' + esc(layer.names.join(', ')) + '</h3><table><tr><td>op</td><td>' + esc(layer.op) +
    '</td></tr><tr><td>shape</td><td>' + esc(layer.shape) + '</td></tr>';
  if (layer.group !== null) h += '<tr><td>group</td><td>' + layer.group + ': ' + esc(layer.groupName) + '</td></tr>';
  h += '</table>';
  data.pairs.forEach((title, i) => {
    h += '<h4>' + esc(title) + '</h4>';
    const p = layer.pairs[i];
    if (!p.tensors.length) h += '<p class="hint">not compared</p>';
    for (const t of p.tensors) {
      const mark = t.ok ? '<span class="pass">pass</span>' : '<span class="fail">FAIL</span>';
      h += '<p>' + (layer.names.length > 1 ? esc(t.name) + ' ' : '') + mark + '</p>';
      if (t.problem) { h += '<p>' + esc(t.problem) + '</p>'; continue; }
      h += '<table class="metrics"><tr><td>cosine</td><td>' + num(t.cos, 6) + '</td></tr><tr><td>euclidean</td><td>' +
        num(t.euc, 6) + '</td></tr><tr><td>SQNR</td><td>' + num(t.sqnr, 2) + ' dB</td></tr><tr><td>max |d|</td><td>' +
        (t.maxd === null ? '—' : Number(t.maxd).toPrecision(3)) + '</td></tr></table>';
    }
  });
  details.innerHTML = h;
}
function clearMarks(){
  for (const el of document.querySelectorAll('.node.sel,.node.member,.edge.hl,tr.hl'))
    el.classList.remove('sel', 'member', 'hl');
}
function selectNode(index, scrollTable){
  clearMarks();
  const node = document.getElementById('node-' + index);
  if (!node) return;
  node.classList.add('sel');
  for (const edge of svg.querySelectorAll('.edge[data-from="' + index + '"],.edge[data-to="' + index + '"]'))
    edge.classList.add('hl');
  let first = null;
  for (const row of document.querySelectorAll('#tensor-table tbody tr[data-node="' + index + '"]')) {
    row.classList.add('hl'); first = first || row;
  }
  if (first && scrollTable) tensorBox.scrollTop = first.offsetTop - 60;
  show(index);
}
function scrollToNode(node){
  const box = node.getBBox(), m = node.transform.baseVal.consolidate().matrix;
  graphBox.scrollTop = m.f - graphBox.clientHeight / 2;
  graphBox.scrollLeft = m.e + box.width / 2 - graphBox.clientWidth / 2;
}
svg.addEventListener('click', ev => {
  const node = ev.target.closest('.node');
  if (node) selectNode(+node.dataset.node, true);
});
document.querySelector('#tensor-table tbody').addEventListener('click', ev => {
  const row = ev.target.closest('tr');
  if (!row || row.dataset.node === undefined) return;
  selectNode(+row.dataset.node, false);
  row.classList.add('hl');
  scrollToNode(document.getElementById('node-' + row.dataset.node));
});
const profile = document.querySelector('#profile-table tbody');
if (profile) profile.addEventListener('click', ev => {
  const row = ev.target.closest('tr');
  if (!row) return;
  clearMarks();
  row.classList.add('hl');
  const members = new Set(JSON.parse(row.dataset.members));
  let first = null;
  for (const node of svg.querySelectorAll('.node')) {
    if (data.layers[+node.dataset.node].names.some(n => members.has(n))) { node.classList.add('member'); first = first || node; }
  }
  if (first) scrollToNode(first);
});
function sortBy(th){
  const table = th.closest('table'), body = table.tBodies[0], col = +th.dataset.col;
  const dir = th.dataset.dir === 'asc' ? 'desc' : 'asc';
  for (const h of table.querySelectorAll('th[data-col]')) delete h.dataset.dir;
  th.dataset.dir = dir;
  const sign = dir === 'asc' ? 1 : -1, numeric = th.dataset.type === 'num';
  const key = row => { const c = row.cells[col]; return c.dataset.v !== undefined ? c.dataset.v : c.textContent; };
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = key(a), y = key(b);
    if (numeric) {
      if (x === '' || y === '') return (x === '') - (y === '');
      const u = parseFloat(x), v = parseFloat(y);
      return u === v ? 0 : (u < v ? -sign : sign);
    }
    return sign * x.localeCompare(y);
  });
  body.append(...rows);
}
for (const th of document.querySelectorAll('table.sortable th[data-col]')) th.addEventListener('click', () => sortBy(th));
const tl = document.getElementById('timeline-svg');
if (tl) {
  const total = +tl.dataset.total, left = +tl.dataset.left, base = +tl.dataset.width;
  let zoom = 1;
  const label = c => c >= 1e6 ? +(c / 1e6).toPrecision(6) + 'M' : c >= 1e3 ? +(c / 1e3).toPrecision(6) + 'k' : String(c);
  function draw(){
    const width = base * zoom, scale = width / total, h = +tl.getAttribute('height');
    tl.setAttribute('width', left + width + 12);
    for (const r of tl.querySelectorAll('rect')) {
      r.setAttribute('x', left + r.dataset.s * scale);
      r.setAttribute('width', Math.max((r.dataset.f - r.dataset.s) * scale, 0.6));
    }
    const raw = total / Math.max(1, width / 110), power = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1))));
    const step = [1, 2, 5, 10].map(m => m * power).find(s => s >= raw);
    let axis = '';
    for (let c = 0; c <= total; c += step) {
      const x = (left + c * scale).toFixed(1);
      axis += '<g data-c="' + c + '"><line x1="' + x + '" x2="' + x + '" y1="16" y2="' + (h - 4) +
        '"/><text x="' + x + '" y="12" text-anchor="middle">' + label(c) + '</text></g>';
    }
    document.getElementById('timeline-axis').innerHTML = axis;
  }
  for (const b of document.querySelectorAll('button[data-zoom]')) b.addEventListener('click', () => {
    const f = +b.dataset.zoom; zoom = f === 0 ? 1 : Math.min(Math.max(zoom * f, 1), 4096); draw();
  });
}
const first = document.getElementById('node-0');
if (first) scrollToNode(first);
document.body.dataset.ready = 'yes';
})();
"""


def render_page(page: Page) -> str:
    from tpu_xdsl.inspect.layered_layout import layered_layout

    graph = page.graph
    layout = layered_layout([layer.index for layer in graph.layers], [(u, v) for u, v, _ in graph.edges],
                            node_width=NODE_W, node_height=NODE_H)
    sections = [render_header(page), render_graph_section(page, layout), render_tensor_table(page)]
    if page.device is not None:
        sections += [render_profile(page), render_timeline(page)]
    data = json.dumps(page_data(page), separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(page.model_name)} — tpu-xdsl report</title><style>{STYLE}</style></head><body>"
        + "".join(sections)
        + f'<script type="application/json" id="report-data">{data}</script><script>{SCRIPT}</script>'
        "</body></html>\n"
    )
