"""TOP LSTM and GRU -> TOSA: the sequence unrolled, one step per time index.

The input projection of all steps is one tosa.matmul; each step slices its row, adds the
recurrent tosa.matmul and applies the gates with tosa.sigmoid and tosa.tanh (ONNX's
default activations, as the interpreter's kernels compute them). Weights are constants,
reordered at export time; the result is exact up to float rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from tpu_xdsl.export.rules import Context, is_none, rule, weight_array
from tpu_xdsl.export.tosa_builder import Val, int32, numpy_dtype, tensor_type


class _Steps:
    """Matmuls, slices and gate math on [batch, width] values of one element type."""

    def __init__(self, ctx: Context, element: Attribute):
        self.ctx, self.element = ctx, element
        self.zp = ctx.b.zero_point(element)

    def val(self, value: SSAValue, shape: Sequence[int]) -> Val:
        return self.ctx.new(value, shape, self.element)

    def matmul(self, a: Val, weight: np.ndarray) -> Val:
        """a [M, K] times a constant [K, N]."""
        m, k = a.shape
        n = weight.shape[1]
        b = self.ctx.b
        left = b.reshape(b.logical(a), [1, m, k])
        right = b.const(np.ascontiguousarray(weight.reshape(1, k, n)).astype(numpy_dtype(self.element)))
        out = b.op("matmul", [left, right, self.zp, self.zp], tensor_type([1, m, n], self.element))
        return self.val(b.reshape(out, [m, n]), [m, n])

    def columns(self, a: Val, start: int, width: int) -> Val:
        rows = a.shape[0]
        b = self.ctx.b
        out = b.op("slice", [b.logical(a), b.shape([0, start]), b.shape([rows, width])],
                   tensor_type([rows, width], self.element))
        return self.val(out, [rows, width])

    def add(self, a: Val, c: Val) -> Val:
        return self.ctx.elementwise("add", [a, c], a.shape, self.element)

    def sub(self, a: Val, c: Val) -> Val:
        return self.ctx.elementwise("sub", [a, c], a.shape, self.element)

    def mul(self, a: Val, c: Val) -> Val:
        return self.ctx.mul(a, c, a.shape)

    def sigmoid(self, a: Val) -> Val:
        return self.ctx.unary("sigmoid", a)

    def tanh(self, a: Val) -> Val:
        return self.ctx.unary("tanh", a)

    def const(self, array: np.ndarray) -> Val:
        return Val(array.shape, self.element, const=array.astype(numpy_dtype(self.element)))


def _sequence(ctx: Context, x: Val, layout: int) -> Val:
    """X as [seq, batch, input]."""
    if not layout:
        return x
    shape = (x.shape[1], x.shape[0], x.shape[2])
    return ctx.new(ctx.b.transpose(ctx.b.logical(x), [1, 0, 2]), shape, x.element)


def _initial(steps: _Steps, state: Val | None, layout: int, direction: int, batch: int, hidden: int) -> Val:
    if state is None or is_none(state):
        return steps.const(np.zeros((batch, hidden)))
    if state.const is not None:
        array = state.const.swapaxes(0, 1) if layout else state.const
        return steps.const(array[direction])
    b = steps.ctx.b
    value = b.logical(state)
    if layout:
        value = b.transpose(value, [1, 0, 2])
    piece = b.op("slice", [value, b.shape([direction, 0, 0]), b.shape([1, batch, hidden])],
                 tensor_type([1, batch, hidden], steps.element))
    return steps.val(b.reshape(piece, [batch, hidden]), [batch, hidden])


def _outputs(ctx: Context, op: Operation, element: Attribute, ys: list[list[Val]], finals: list[list[Val]],
             layout: int) -> list[Val]:
    """Y [seq, dirs, batch, H] and the final states [dirs, batch, H] (layout 1: batch first);
    a result the model does not use (no tensor shape) gets a placeholder."""
    b = ctx.b
    seq, dirs = len(ys[0]), len(ys)
    batch, hidden = ys[0][0].shape

    def stacked(parts: list[SSAValue], shape: list[int], axis: int) -> SSAValue:
        return parts[0] if len(parts) == 1 else b.op("concat", parts, tensor_type(shape, element), axis=int32(axis))

    per_dir = [stacked([b.reshape(b.logical(h), [1, 1, batch, hidden]) for h in y], [seq, 1, batch, hidden], 0)
               for y in ys]
    y = stacked(per_dir, [seq, dirs, batch, hidden], 1)
    states = [stacked([b.reshape(b.logical(h), [1, batch, hidden]) for h in final], [dirs, batch, hidden], 0)
              for final in finals]
    if layout:
        y = b.transpose(y, [2, 0, 1, 3])
        states = [b.transpose(s, [1, 0, 2]) for s in states]
    out = []
    for result, value in zip(op.results, [y, *states], strict=True):
        kind = result.type
        if not isinstance(kind, TensorType) or not kind.get_shape():
            out.append(Val((), element))
            continue
        shape = tuple(kind.get_shape())
        out.append(ctx.new(b.reshape(value, shape), shape, element))
    return out


def _directions(attrs: dict[str, Any]) -> list[bool]:
    direction = attrs.get("direction", "forward")
    return {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[direction]


def _weights(op: Operation, inputs: list[Val], gates: int, hidden: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    w = weight_array(op, inputs[1], "W")
    r = weight_array(op, inputs[2], "R")
    bias = inputs[3]
    if is_none(bias):
        b = np.zeros((w.shape[0], 2 * gates * hidden), w.dtype)
    else:
        b = weight_array(op, bias, "B")
    return w, r, b


@rule("lstm")
def lstm(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """c = f*c + i*tanh(.), h = o*tanh(c), gates i, o, f, c (ONNX's order)."""
    x = inputs[0]
    layout, hidden = int(attrs.get("layout", 0) or 0), int(attrs["hidden_size"])
    w, r, b = _weights(op, inputs, 4, hidden)
    steps = _Steps(ctx, x.element)
    seq_x = _sequence(ctx, x, layout)
    seq, batch, size = seq_x.shape
    flat = steps.val(ctx.b.reshape(ctx.b.logical(seq_x), [seq * batch, size]), [seq * batch, size])
    ys, h_finals, c_finals = [], [], []
    for d, backwards in enumerate(_directions(attrs)):
        projected = steps.add(steps.matmul(flat, w[d].T), steps.const((b[d, :4 * hidden] + b[d, 4 * hidden:])[None]))
        h = _initial(steps, inputs[4] if len(inputs) > 4 else None, layout, d, batch, hidden)
        c = _initial(steps, inputs[5] if len(inputs) > 5 else None, layout, d, batch, hidden)
        y: list[Val] = [h] * seq
        for t in reversed(range(seq)) if backwards else range(seq):
            row = steps.val(ctx.b.op("slice", [ctx.b.logical(projected), ctx.b.shape([t * batch, 0]),
                                                ctx.b.shape([batch, 4 * hidden])],
                                     tensor_type([batch, 4 * hidden], x.element)), [batch, 4 * hidden])
            gates = steps.add(row, steps.matmul(h, r[d].T))
            i = steps.sigmoid(steps.columns(gates, 0, hidden))
            o = steps.sigmoid(steps.columns(gates, hidden, hidden))
            f = steps.sigmoid(steps.columns(gates, 2 * hidden, hidden))
            g = steps.tanh(steps.columns(gates, 3 * hidden, hidden))
            c = steps.add(steps.mul(f, c), steps.mul(i, g))
            h = steps.mul(o, steps.tanh(c))
            y[t] = h
        ys.append(y)
        h_finals.append(h)
        c_finals.append(c)
    return _outputs(ctx, op, x.element, ys, [h_finals, c_finals], layout)


@rule("gru")
def gru(ctx: Context, op: Operation, inputs: list[Val], attrs: dict[str, Any]) -> list[Val]:
    """h = n + z*(h - n), z and r sigmoids, n = tanh(x Wh^T + (r*h) Rh^T + biases), or with
    linear_before_reset n = tanh(x Wh^T + Wbh + r*(h Rh^T + Rbh)); gates z, r, h."""
    x = inputs[0]
    layout, hidden = int(attrs.get("layout", 0) or 0), int(attrs["hidden_size"])
    before_reset = bool(attrs.get("linear_before_reset", False))
    w, r, b = _weights(op, inputs, 3, hidden)
    steps = _Steps(ctx, x.element)
    seq_x = _sequence(ctx, x, layout)
    seq, batch, size = seq_x.shape
    flat = steps.val(ctx.b.reshape(ctx.b.logical(seq_x), [seq * batch, size]), [seq * batch, size])
    ys, finals = [], []
    for d, backwards in enumerate(_directions(attrs)):
        r_bias = b[d, 3 * hidden:]
        bias = b[d, :3 * hidden].copy()
        bias[:2 * hidden] += r_bias[:2 * hidden]
        if not before_reset:
            bias[2 * hidden:] += r_bias[2 * hidden:]
        projected = steps.add(steps.matmul(flat, w[d].T), steps.const(bias[None]))
        h = _initial(steps, inputs[4] if len(inputs) > 4 else None, layout, d, batch, hidden)
        y: list[Val] = [h] * seq
        for t in reversed(range(seq)) if backwards else range(seq):
            row = steps.val(ctx.b.op("slice", [ctx.b.logical(projected), ctx.b.shape([t * batch, 0]),
                                                ctx.b.shape([batch, 3 * hidden])],
                                     tensor_type([batch, 3 * hidden], x.element)), [batch, 3 * hidden])
            zr = steps.sigmoid(steps.add(steps.columns(row, 0, 2 * hidden), steps.matmul(h, r[d, :2 * hidden].T)))
            z, reset = steps.columns(zr, 0, hidden), steps.columns(zr, hidden, hidden)
            candidate = steps.columns(row, 2 * hidden, hidden)
            if before_reset:
                recurrent = steps.add(steps.matmul(h, r[d, 2 * hidden:].T), steps.const(r_bias[2 * hidden:][None]))
                candidate = steps.add(candidate, steps.mul(reset, recurrent))
            else:
                candidate = steps.add(candidate, steps.matmul(steps.mul(reset, h), r[d, 2 * hidden:].T))
            n = steps.tanh(candidate)
            h = steps.add(n, steps.mul(z, steps.sub(h, n)))
            y[t] = h
        ys.append(y)
        finals.append(h)
    return _outputs(ctx, op, x.element, ys, [finals], layout)
