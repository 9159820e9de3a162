"""LSTM and GRU as the TPU computes them: an input projection and one cell per time step,
each a kernel that works on any block of hidden units (the TPU interpreter's `tpu.lstm` /
`tpu.gru` and the device's per-lane instructions).

The device splits a recurrent layer by hidden unit: each lane holds the rows of W and R
(every gate) of the units it owns, or streams them from DDR in chunks of units when they
do not fit. For the device to equal the interpreter bit for bit, the value of one unit
must not depend on how many units are computed with it, so the dot products are not BLAS
GEMMs (whose summation order follows the shape of the call): each is one BLAS dot of a
row and a vector (`np.vecdot`), whose order depends only on the row's length. The gate
math is elementwise. States stay float32 between steps (in lane memory on the device);
only what is stored (Y, Y_h, Y_c) is rounded to the storage type.

Layouts: units first, so a block of units is a block of lanes. Weights per unit
`[units, gates, size]` (ONNX's W/R rows regrouped by unit), biases `[units, gates]`,
states and outputs transposed `[units, batch]`, projections `[steps, units, gates, batch]`.
Gates are ONNX's: i, o, f, c (LSTM) and z, r, h (GRU).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from tpu_xdsl.kernels import Kernel, ResultSpec
from tpu_xdsl.kernels.activation import sigmoid_of

F32 = np.dtype(np.float32)


@overload
def wide(x: np.ndarray) -> np.ndarray: ...
@overload
def wide(x: None) -> None: ...
def wide(x: np.ndarray | None) -> np.ndarray | None:
    """An f16/bf16 (or f32) array as float32 (exact); None (an absent input) stays None."""
    return None if x is None else np.asarray(x, F32)


def dots(rows: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """rows [units, gates, K] (any float type, widened to float32: exact) . vectors
    [batch, K] -> [units, gates, batch]: each element one BLAS dot (`np.vecdot` calls
    sdot per element) of a unit-stride row and vector, whose summation order depends on
    K alone, so it is the same for any block of units."""
    rows = wide(rows)
    if rows.strides[-1] != F32.itemsize:  # a strided dot would take BLAS's other loop
        rows = np.ascontiguousarray(rows)
    vectors = np.ascontiguousarray(wide(vectors))
    return np.vecdot(rows[:, :, None, :], vectors[None, None, :, :])


def project(
    x: np.ndarray,
    w: np.ndarray,
    w_bias: np.ndarray | None,
    r_bias: np.ndarray | None,
    recurrent_bias_gates: int,
) -> np.ndarray:
    """x [steps, batch, input] W^T + biases -> [steps, units, gates, batch]; the recurrent
    bias joins the input bias on the first `recurrent_bias_gates` gates (GRU's h gate keeps
    it apart with linear_before_reset)."""
    bias = None
    if w_bias is not None:
        bias = np.array(w_bias, F32)
        if r_bias is not None and recurrent_bias_gates:
            bias[:, :recurrent_bias_gates] += wide(r_bias[:, :recurrent_bias_gates])
    out = np.empty((x.shape[0], *w.shape[:2], x.shape[1]), F32)
    for t in range(x.shape[0]):
        out[t] = dots(w, x[t])
        if bias is not None:
            out[t] += bias[:, :, None]
    return out


def _recurrent(rows: np.ndarray, h: np.ndarray | None, batch: int) -> np.ndarray:
    """h R^T for the rows' units ([units, gates, batch]); zeros before the first state."""
    if h is None:
        return np.zeros((*rows.shape[:2], batch), F32)
    return dots(rows, np.ascontiguousarray(h.T))


def lstm_cell(
    pre: np.ndarray, h: np.ndarray | None, c: np.ndarray | None, r: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One step for a block of units: pre [units, 4, batch], h [H, batch] (all units, None:
    zeros), c [units, batch] (None: zeros), R rows [units, 4, H] -> new h and c [units, batch]."""
    gates = pre + _recurrent(r, h, pre.shape[2])
    i = sigmoid_of(gates[:, 0])
    o = sigmoid_of(gates[:, 1])
    f = sigmoid_of(gates[:, 2])
    candidate = np.tanh(gates[:, 3])
    c = i * candidate if c is None else f * c + i * candidate
    return o * np.tanh(c), c


def gru_cell(
    pre: np.ndarray, h: np.ndarray | None, own: np.ndarray | None, r: np.ndarray,
    rh_bias: np.ndarray | None,
) -> np.ndarray:
    """One GRU step with linear_before_reset for a block of units: pre [units, 3, batch],
    h [H, batch] (None: zeros), own: the block's rows of h, R rows [units, 3, H], the h
    gate's recurrent bias [units, 1] -> new h [units, batch]."""
    recurrent = _recurrent(r, h, pre.shape[2])
    z = sigmoid_of(pre[:, 0] + recurrent[:, 0])
    reset = sigmoid_of(pre[:, 1] + recurrent[:, 1])
    hidden = recurrent[:, 2] if rh_bias is None else recurrent[:, 2] + wide(rh_bias)
    n = np.tanh(pre[:, 2] + reset * hidden)
    return n - z * n if own is None else n + z * (own - n)


def gru_gates(
    pre: np.ndarray, h: np.ndarray | None, own: np.ndarray | None, r_zr: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A GRU step's first half (without linear_before_reset): z and r * h for a block of
    units; the second half needs r * h of every unit."""
    recurrent = _recurrent(r_zr, h, pre.shape[2])
    z = sigmoid_of(pre[:, 0] + recurrent[:, 0])
    reset = sigmoid_of(pre[:, 1] + recurrent[:, 1])
    return z, np.zeros_like(reset) if own is None else reset * own


def gru_update(
    pre: np.ndarray, rh: np.ndarray, own: np.ndarray | None, z: np.ndarray, r_h: np.ndarray
) -> np.ndarray:
    """A GRU step's second half: n = tanh(pre_h + (r*h) Rh^T), h = n + z (h - n)."""
    n = np.tanh(pre[:, 2] + dots(r_h, np.ascontiguousarray(rh.T))[:, 0])
    return n - z * n if own is None else n + z * (own - n)


# -- the device's instructions: kernels on lane tensors (views reshaped to the layouts above)


def _as(x: np.ndarray | None, shape: Sequence[int]) -> np.ndarray | None:
    return None if x is None else np.asarray(x).reshape(shape)


def _rnn_project(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    x, w, w_bias, r_bias = inputs
    steps, units, gates, batch = results[0].shape
    w = w.reshape(units, gates, -1)
    first = int(attrs.get("first_step", 0))  # a block of steps held whole, projected one step at a time
    x = x.reshape(-1, batch, w.shape[2])[first : first + steps]
    pre = project(x, w, _as(w_bias, (units, gates)), _as(r_bias, (units, gates)),
                  int(attrs["recurrent_bias_gates"]))
    return [pre]


def _lstm_cell(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    pre, h, c, r = inputs
    units, batch = results[0].shape
    pre = pre.reshape(units, 4, batch)
    h_new, c_new = lstm_cell(pre, _as(h, (-1, batch)), _as(c, (units, batch)), r.reshape(units, 4, -1))
    return [h_new, c_new, h_new]


def _gru_cell(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    pre, h, own, r, rh_bias = inputs
    units, batch = results[0].shape
    h_new = gru_cell(pre.reshape(units, 3, batch), _as(h, (-1, batch)), _as(own, (units, batch)),
                     r.reshape(units, 3, -1), _as(rh_bias, (units, 1)))
    return [h_new, h_new]


def _gru_gates(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    pre, h, own, r_zr = inputs
    units, batch = results[0].shape
    z, rh = gru_gates(pre.reshape(units, 3, batch), _as(h, (-1, batch)), _as(own, (units, batch)),
                      r_zr.reshape(units, 2, -1))
    return [z, rh]


def _gru_update(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray]:
    pre, rh, own, z, r_h = inputs
    units, batch = results[0].shape
    h_new = gru_update(pre.reshape(units, 3, batch), rh.reshape(-1, batch), _as(own, (units, batch)),
                       z.reshape(units, batch), r_h.reshape(units, 1, -1))
    return [h_new, h_new]


# -- the whole layer (tpu.lstm, tpu.gru): the same kernels over all units ----------------------


def _directions(attrs: dict[str, Any]) -> list[bool]:
    direction = attrs.get("direction", "forward")
    return {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[direction]


def by_unit(matrix: np.ndarray, gates: int) -> np.ndarray:
    """ONNX's [gates*H, K] (gate-major rows) as [H, gates, K]."""
    return np.ascontiguousarray(matrix.reshape(gates, -1, matrix.shape[-1]).transpose(1, 0, 2))


def _layer(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec], gates: int
) -> list[np.ndarray | None]:
    lstm = gates == 4
    x, w, r, b, h0 = (wide(v) for v in inputs[:5])
    c0 = wide(inputs[5]) if lstm else None
    layout = attrs.get("layout", 0)
    hidden = attrs["hidden_size"]
    before_reset = bool(attrs.get("linear_before_reset", False))
    x = np.swapaxes(x, 0, 1) if layout else x
    seq, batch = x.shape[:2]
    dirs = _directions(attrs)
    h0 = None if h0 is None else (np.swapaxes(h0, 0, 1) if layout else h0)
    c0 = None if c0 is None else (np.swapaxes(c0, 0, 1) if layout else c0)
    y = np.empty((seq, len(dirs), batch, hidden), F32)
    finals_h, finals_c = [], []
    for d, backwards in enumerate(dirs):
        w_d, r_d = by_unit(w[d], gates), by_unit(r[d], gates)
        w_bias = None if b is None else np.ascontiguousarray(b[d, : gates * hidden].reshape(gates, hidden).T)
        r_bias = None if b is None else np.ascontiguousarray(b[d, gates * hidden :].reshape(gates, hidden).T)
        joined = gates if lstm or not before_reset else 2
        pre = project(x, w_d, w_bias, r_bias, joined)
        h = None if h0 is None else np.ascontiguousarray(h0[d].T, F32)
        c = None if c0 is None else np.ascontiguousarray(c0[d].T, F32)
        r_zr, r_h = np.ascontiguousarray(r_d[:, :2]), np.ascontiguousarray(r_d[:, 2:])
        rh_bias = None if r_bias is None else r_bias[:, 2:]
        for t in reversed(range(seq)) if backwards else range(seq):
            if lstm:
                h, c = lstm_cell(pre[t], h, c, r_d)
            elif before_reset:
                h = gru_cell(pre[t], h, h, r_d, rh_bias)
            else:
                z, rh = gru_gates(pre[t], h, h, r_zr)
                h = gru_update(pre[t], rh, h, z, r_h)
            y[t, d] = h.T
        if h is None:  # an empty sequence
            h = np.zeros((hidden, batch), F32)
        finals_h.append(h.T)
        finals_c.append(None if c is None else c.T)
    outputs = [y, np.stack(finals_h)]
    if lstm:
        outputs.append(np.stack(finals_c))
    if layout:
        outputs = [outputs[0].transpose(2, 0, 1, 3), *(s.transpose(1, 0, 2) for s in outputs[1:])]
    return [None if spec.shape == () else np.ascontiguousarray(v) for v, spec in zip(outputs, results, strict=True)]


def _tpu_lstm(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray | None]:
    return _layer(inputs, attrs, results, 4)


def _tpu_gru(inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]) -> list[np.ndarray | None]:
    return _layer(inputs, attrs, results, 3)


# The TPU's kernels. They take f16/bf16 operands as they are (widened exactly where they
# are multiplied, not copied whole each step) and return float32; `run_tpu_kernel` rounds
# the results to their storage type.
TPU_RECURRENT_KERNELS: dict[str, Kernel] = {
    "lstm": _tpu_lstm,
    "gru": _tpu_gru,
    "rnn_project": _rnn_project,
    "lstm_cell": _lstm_cell,
    "gru_cell": _gru_cell,
    "gru_gates": _gru_gates,
    "gru_update": _gru_update,
}
