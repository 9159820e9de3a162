"""Shape rule of grid_sample: the input read at a grid of points."""

from __future__ import annotations

from tpu_xdsl.dialects.shapes.helpers import (
    _min_rank,
    _str,
    fmt,
)
from tpu_xdsl.dialects.shapes.registry import (
    Attrs,
    Declared,
    Operands,
    Shape,
    ShapeError,
    shape_rule,
)


@shape_rule("grid_sample", operands=("input", "grid"))
def grid_sample(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """input [N, C, *spatial] read at grid [N, *out, len(spatial)]: [N, C, *out]."""
    x = _min_rank("input", ins[0], 3)
    g = _min_rank("grid", ins[1], 3)
    _str(attrs, "mode", "linear", ("linear", "nearest", "cubic"))
    _str(attrs, "padding_mode", "zeros", ("zeros", "border", "reflection"))
    if len(g) != len(x) or g[0] != x[0] or g[-1] != len(x) - 2:
        raise ShapeError(
            f"operand 'grid' {fmt(g)} must be [N, *output, {len(x) - 2}] for operand "
            f"'input' {fmt(x)}"
        )
    return [(x[0], x[1], *g[1:-1])]
