"""The timeline of the DMA and compute engines as SVG: a lane of spans per layer group or
layer (pipelined groups overlap, so spans pack into rows), a bar per run of one layer's
instructions on an engine, an axis the page's script redraws when zooming."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tpu_xdsl.inspect.report.format import (
    GROUP_COLORS,
    UNGROUPED_COLORS,
    e,
    group_color,
)
from tpu_xdsl.inspect.report.model import Page


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
