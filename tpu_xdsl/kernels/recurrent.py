"""LSTM and GRU kernels (ONNX semantics, default activations).

The input projection of every time step is one BLAS matmul up front; the loop
over time steps does the recurrent matmul (also BLAS) and the gate math on
[batch, hidden] arrays. A reverse direction walks time backwards and writes
each step's state at its own time index, as ONNX does.

Weights follow ONNX: W [dirs, gates*H, input], R [dirs, gates*H, H],
B [dirs, 2*gates*H] (input biases, then recurrent biases); gate order is
i, o, f, c for LSTM and z, r, h for GRU. Layout 1 puts batch first in X, Y and
the states.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpu_xdsl.kernels import ResultSpec, kernel
from tpu_xdsl.kernels.activation import sigmoid_of


def _directions(attrs: dict[str, Any]) -> list[bool]:
    """One entry per direction: True when it runs backwards in time."""
    direction = attrs.get("direction", "forward")
    return {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[
        direction
    ]


def _seq_first(x: np.ndarray, layout: int) -> np.ndarray:
    """X as [seq, batch, input]."""
    return np.swapaxes(x, 0, 1) if layout else x


def _project(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x W^T for every time step at once: one 2-D GEMM [seq*batch, input] x [input, gates*H]."""
    seq, batch, size = x.shape
    return (x.reshape(seq * batch, size) @ w.T).reshape(seq, batch, w.shape[0])


def _state(
    value: np.ndarray | None, layout: int, shape: tuple[int, int, int], dtype: np.dtype
) -> np.ndarray:
    """An initial state as [dirs, batch, hidden] (zeros when absent)."""
    if value is None:
        return np.zeros(shape, dtype)
    return np.swapaxes(value, 0, 1) if layout else value


def _outputs(
    ys: list[np.ndarray],
    finals: list[list[np.ndarray]],
    layout: int,
    results: Sequence[ResultSpec],
) -> list[np.ndarray | None]:
    """Y [seq, dirs, batch, H] and the final states [dirs, batch, H] (layout 1:
    batch first), in the result dtype; None for a `none` result (its spec has
    shape (), which no real Y or state has)."""
    y = np.stack(ys, axis=1)
    states = [np.stack(f, axis=0) for f in finals]
    if layout:
        y = y.transpose(2, 0, 1, 3)
        states = [s.transpose(1, 0, 2) for s in states]
    return [
        None
        if spec.shape == ()
        else np.ascontiguousarray(v).astype(spec.dtype, copy=False)
        for v, spec in zip([y, *states], results, strict=True)
    ]


@kernel("lstm")
def lstm(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray | None]:
    """c = f*c + i*tanh(.), h = o*tanh(c), with i, o, f sigmoids of x W^T + h R^T + biases."""
    x, w, r, b, h0, c0 = inputs
    layout = attrs.get("layout", 0)
    hidden = attrs["hidden_size"]
    x = _seq_first(x, layout)
    seq, batch = x.shape[:2]
    dirs = _directions(attrs)
    state_shape = (len(dirs), batch, hidden)
    h0 = _state(h0, layout, state_shape, x.dtype)
    c0 = _state(c0, layout, state_shape, x.dtype)
    ys, h_finals, c_finals = [], [], []
    for d, backwards in enumerate(dirs):
        projected = _project(x, w[d])  # [seq, batch, 4H]
        if b is not None:
            projected += b[d, : 4 * hidden] + b[d, 4 * hidden :]
        recurrent = np.ascontiguousarray(r[d].T)
        h, c = h0[d], c0[d]
        y = np.empty((seq, batch, hidden), x.dtype)
        for t in reversed(range(seq)) if backwards else range(seq):
            gates = projected[t] + h @ recurrent
            i = sigmoid_of(gates[:, :hidden])
            o = sigmoid_of(gates[:, hidden : 2 * hidden])
            f = sigmoid_of(gates[:, 2 * hidden : 3 * hidden])
            g = np.tanh(gates[:, 3 * hidden :])
            c = f * c + i * g
            h = o * np.tanh(c)
            y[t] = h
        ys.append(y)
        h_finals.append(h)
        c_finals.append(c)
    return _outputs(ys, [h_finals, c_finals], layout, results)


@kernel("gru")
def gru(
    inputs: Sequence[Any], attrs: dict[str, Any], results: Sequence[ResultSpec]
) -> list[np.ndarray | None]:
    """h = (1 - z)*n + z*h with z, r sigmoids and n = tanh(x Wh^T + (r*h) Rh^T + biases),
    or with linear_before_reset n = tanh(x Wh^T + Wbh + r*(h Rh^T + Rbh))."""
    x, w, r, b, h0 = inputs
    layout = attrs.get("layout", 0)
    hidden = attrs["hidden_size"]
    before_reset = attrs.get("linear_before_reset", False)
    x = _seq_first(x, layout)
    seq, batch = x.shape[:2]
    dirs = _directions(attrs)
    h0 = _state(h0, layout, (len(dirs), batch, hidden), x.dtype)
    ys, finals = [], []
    for d, backwards in enumerate(dirs):
        projected = _project(x, w[d])  # [seq, batch, 3H]: z, r, h
        r_bias = np.zeros(3 * hidden, x.dtype) if b is None else b[d, 3 * hidden :]
        if b is not None:
            projected += b[d, : 3 * hidden]
            projected[..., : 2 * hidden] += r_bias[: 2 * hidden]
            if not before_reset:
                projected[..., 2 * hidden :] += r_bias[2 * hidden :]
        r_zr = np.ascontiguousarray(r[d, : 2 * hidden].T)
        r_h = np.ascontiguousarray(r[d, 2 * hidden :].T)
        h = h0[d]
        y = np.empty((seq, batch, hidden), x.dtype)
        for t in reversed(range(seq)) if backwards else range(seq):
            step = projected[t]
            zr = sigmoid_of(step[:, : 2 * hidden] + h @ r_zr)
            z, reset = zr[:, :hidden], zr[:, hidden:]
            if before_reset:
                candidate = step[:, 2 * hidden :] + reset * (
                    h @ r_h + r_bias[2 * hidden :]
                )
            else:
                candidate = step[:, 2 * hidden :] + (reset * h) @ r_h
            n = np.tanh(candidate)
            h = n + z * (h - n)
            y[t] = h
        ys.append(y)
        finals.append(h)
    return _outputs(ys, [finals], layout, results)
