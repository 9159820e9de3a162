"""The layer graph as SVG: one box per layer, filled by its cosine for the pair shown,
outlined in its layer group's color, placed by `layered_layout`; its legend and the
section around it (the pair menu, the details panel)."""

from __future__ import annotations

import itertools

from tpu_xdsl.inspect.layer_graph import Layer
from tpu_xdsl.inspect.report.format import (
    COSINE_BINS,
    DARK_FILLS,
    MISMATCH,
    NOT_COMPARED,
    comparison_color,
    e,
    fmt,
    fmt_g,
    group_color,
    middle_cut,
    shape_text,
    short_op,
    worst,
)
from tpu_xdsl.inspect.report.model import Page, StagePair

NODE_W, NODE_H = 176, 38


def node_label(layer: Layer, pair: StagePair | None) -> tuple[str, str, str, bool]:
    """Fill, ink, the cosine text and failing for one pair."""
    row = worst([pair.rows[n] for n in layer.names if n in pair.rows]) if pair else None
    fill = comparison_color(row)
    if row is None or pair is None:
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
