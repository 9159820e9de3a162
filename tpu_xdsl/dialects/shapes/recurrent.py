"""Shape rules of the recurrent layers: ONNX LSTM and GRU."""

from __future__ import annotations

from tpu_xdsl.dialects.shapes.helpers import (
    _expect,
    _int,
    _rank,
    _require,
    _str,
    fmt_value,
)
from tpu_xdsl.dialects.shapes.registry import (
    Attrs,
    Declared,
    Operands,
    Shape,
    ShapeError,
    shape_rule,
)


def _rnn(ins: Operands, attrs: Attrs, gates: int) -> tuple[Shape, Shape]:
    """Check an ONNX LSTM/GRU's operands; return the shapes of Y and of a state."""
    x, w, r, b, h0 = ins[:5]
    layout = _int(attrs, "layout", 0)
    if layout not in (0, 1):
        raise ShapeError(f"attribute 'layout' = {layout} must be 0 or 1")
    directions = ("forward", "reverse", "bidirectional")
    direction = _str(attrs, "direction", "forward", directions)
    nd = 2 if direction == "bidirectional" else 1
    x = _rank("input", x, 3)
    seq, batch, size = (x[1], x[0], x[2]) if layout else x
    r = _rank("r", r, 3)
    hidden = _int(attrs, "hidden_size", r[2])
    why = f"for direction {fmt_value(direction)} and hidden_size {hidden}"
    _expect("w", _require("w", w), (nd, gates * hidden, size), why)
    _expect("r", r, (nd, gates * hidden, hidden), why)
    _expect("b", b, (nd, 2 * gates * hidden), why)
    state = (batch, nd, hidden) if layout else (nd, batch, hidden)
    _expect("initial_h", h0, state, why)
    y = (batch, seq, nd, hidden) if layout else (seq, nd, batch, hidden)
    return y, state


@shape_rule("lstm", operands=("input", "w", "r", "b", "initial_h", "initial_c"))
def lstm(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """ONNX LSTM: y [seq, dirs, batch, hidden] (layout 1: [batch, seq, dirs,
    hidden]); y_h, y_c [dirs, batch, hidden] (layout 1: [batch, dirs, hidden])."""
    y, state = _rnn(ins, attrs, 4)
    _expect("initial_c", ins[5], state, "(the shape of a state)")
    return [y, state, state]


@shape_rule("gru", operands=("input", "w", "r", "b", "initial_h"))
def gru(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """ONNX GRU: y and y_h as for LSTM, three gates instead of four."""
    y, state = _rnn(ins, attrs, 3)
    return [y, state]
