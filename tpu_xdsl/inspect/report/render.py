"""The whole page: its sections, the data the page's script reads, the inline assets."""

from __future__ import annotations

import json

from tpu_xdsl.inspect.layered_layout import layered_layout
from tpu_xdsl.inspect.report.assets import SCRIPT, STYLE
from tpu_xdsl.inspect.report.format import e, json_number, shape_text
from tpu_xdsl.inspect.report.model import Page
from tpu_xdsl.inspect.report.svg import NODE_H, NODE_W, node_label, render_graph_section
from tpu_xdsl.inspect.report.tables import (
    render_header,
    render_profile,
    render_tensor_table,
)
from tpu_xdsl.inspect.report.timeline import render_timeline


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


def render_page(page: Page) -> str:
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
