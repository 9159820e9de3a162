"""How the page shows numbers: a layer's fill by its cosine, layer-group colors, numbers
as text and as sort keys, names cut to fit, HTML escaping."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from tpu_xdsl.interp.compare import TensorComparison

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


def short_op(op: str) -> str:
    return op.split(".", 1)[1] if op.startswith(("top.", "tpu.")) else op
