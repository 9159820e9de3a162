"""The page's header (model, chip, mode, input, stages, a line per pair, the device's
totals) and its tables: every tensor per pair of stages, worst first, and the device's
cycles per layer group and layer."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from tpu_xdsl.device.runtime import peak_macs_per_cycle, total_lines
from tpu_xdsl.inspect.report.format import (
    comparison_color,
    e,
    fmt,
    fmt_g,
    group_color,
    shape_text,
    short_op,
    sort_value,
)
from tpu_xdsl.inspect.report.model import DeviceRun, Page, chip_and_mode


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
    return "<br>".join(e(line) for line in total_lines(device.model, device.timeline, device.chip))


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
            (n, str(n)),
            (None, label),
            (ops, str(ops)),
            (None, slices),
            (row.first, str(row.first)),
            (span, str(span)),
            (share, f"{share:.1%}"),
            (compute, str(compute)),
            (dma, str(dma)),
            (compute / max(1, span), f"{compute / max(1, span):.0%}"),
            (dma / max(1, span), f"{dma / max(1, span):.0%}"),
            (row.macs, str(row.macs)),
            (util, f"{util:.0%}"),
            (row.dma_bytes, str(row.dma_bytes)),
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
