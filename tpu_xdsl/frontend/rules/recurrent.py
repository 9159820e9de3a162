"""Import rules for recurrent layers: LSTM -> top.lstm, GRU -> top.gru, and
RNN unrolled over time into matmul/add/activation ops (TOP has no RNN op).

What TOP's recurrent ops leave out is an error naming the node: activations
other than ONNX's defaults, `clip`, LSTM's `input_forget` and peepholes, and
`sequence_lens` shorter than the sequence. Outputs the model does not use are
`none` results, so nothing downstream needs them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, NoneType, StringAttr, TensorType
from xdsl.ir import Attribute, SSAValue

from tpu_xdsl.dialects import op_class, shapes
from tpu_xdsl.dialects.attr_values import from_py
from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule
from tpu_xdsl.frontend.rules.elementwise import shape_of
from tpu_xdsl.kernels.dtypes import element_type

F32 = np.dtype(np.float32)
_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}
_DEFAULT_ACTIVATIONS = {
    "LSTM": ["sigmoid", "tanh", "tanh"],
    "GRU": ["sigmoid", "tanh"],
    "RNN": ["tanh"],
}
# RNN's activation is one TOP op; these are the ones without parameters.
_RNN_ACTIVATIONS = {"tanh": "tanh", "relu": "relu", "sigmoid": "sigmoid"}


def _direction(ctx: NodeContext) -> str:
    direction = ctx.attr("direction", "forward")
    if direction not in _DIRECTIONS:
        raise ctx.error(
            f"direction '{direction}' is not forward, reverse or bidirectional"
        )
    return direction


def _layout(ctx: NodeContext) -> int:
    layout = ctx.attr("layout", 0)
    if layout not in (0, 1):
        raise ctx.error(f"layout {layout} is not 0 or 1")
    return layout


def _hidden_size(ctx: NodeContext) -> int:
    """The attribute, or the last dim of R [dirs, gates*H, H]."""
    hidden = ctx.attr("hidden_size")
    return int(hidden) if hidden is not None else ctx.shape(2)[-1]


def _check_common(ctx: NodeContext, layout: int, directions: int) -> None:
    """Default activations only, no clip, and sequence_lens (input 4) covering the whole sequence."""
    activations = ctx.attr("activations")
    if ctx.op_type != "RNN" and activations is not None:
        expected = _DEFAULT_ACTIVATIONS[ctx.op_type] * directions
        if [a.lower() for a in activations] != expected:
            raise ctx.error(
                f"activations {list(activations)} are not supported (only the defaults {expected})"
            )
    if ctx.attr("clip") is not None:
        raise ctx.error("clip is not supported")
    if ctx.has_input(4):
        lens = ctx.require_const(4, "sequence_lens")
        seq = ctx.shape(0)[1 if layout else 0]
        if np.any(lens != seq):
            raise ctx.error(
                f"sequence_lens {lens.tolist()} shorter than the sequence ({seq}) are not supported"
            )


def _output_optional(
    ctx: NodeContext, kind: str, operands: Sequence[SSAValue], attrs: dict
) -> None:
    """Emit `top.<kind>` whose results are the node's outputs; an output the
    node does not name (or does not have) is a `none` result."""
    importer = ctx.importer
    top_class = op_class(f"top.{kind}")
    operand_shapes = [
        shape_of(v) if isinstance(v.type, TensorType) else None for v in operands
    ]
    try:
        inferred = shapes.infer_shapes(kind, operand_shapes, attrs)
    except shapes.ShapeError as e:
        raise ctx.error(str(e)) from e
    result_types: list[Attribute] = []
    names = []
    for i, shape in enumerate(inferred):
        if ctx.has_output(i):
            if shape is None:
                raise ctx.error(f"the shape rule of top.{kind} gives output {i} no shape")
            result_types.append(TensorType(element_type(F32), tuple(shape)))
            names.append(ctx.output_name(i))
        else:
            result_types.append(NoneType())
            names.append("")
    importer._used_names.update(n for n in names if n)
    attributes = {k: from_py(v) for k, v in attrs.items()}
    attributes["names"] = ArrayAttr([StringAttr(n) for n in names])
    op = top_class.build(
        operands=list(operands), result_types=result_types, attributes=attributes
    )
    importer.builder.insert(op)
    for name, result in zip(names, op.results):
        if name:
            importer.define(name, result)


@onnx_rule("LSTM")
def lstm(ctx: NodeContext) -> None:
    """Gates i, o, f, c; inputs X, W, R, B, sequence_lens, initial_h, initial_c, P."""
    direction, layout = _direction(ctx), _layout(ctx)
    _check_common(ctx, layout, _DIRECTIONS[direction])
    if ctx.attr("input_forget", 0):
        raise ctx.error("input_forget = 1 is not supported")
    if ctx.has_input(7):
        peepholes = ctx.const(7)
        if peepholes is None or np.any(peepholes != 0):
            raise ctx.error("peepholes (input 7) are not supported")
    operands = [ctx.input(i) for i in (0, 1, 2, 3, 5, 6)]
    attrs = {"hidden_size": _hidden_size(ctx), "direction": direction, "layout": layout}
    _output_optional(ctx, "lstm", operands, attrs)


@onnx_rule("GRU")
def gru(ctx: NodeContext) -> None:
    """Gates z, r, h; inputs X, W, R, B, sequence_lens, initial_h."""
    direction, layout = _direction(ctx), _layout(ctx)
    _check_common(ctx, layout, _DIRECTIONS[direction])
    operands = [ctx.input(i) for i in (0, 1, 2, 3, 5)]
    attrs = {
        "hidden_size": _hidden_size(ctx),
        "direction": direction,
        "linear_before_reset": bool(ctx.attr("linear_before_reset", 0)),
        "layout": layout,
    }
    _output_optional(ctx, "gru", operands, attrs)


# -- RNN -------------------------------------------------------------------------------------


def _base_name(ctx: NodeContext) -> str:
    """The first output the node names (Y is often unused): the stem of derived names."""
    return next((n for n in ctx.node.output if n), ctx.node.name or ctx.op_type)


def _emit(
    ctx: NodeContext,
    kind: str,
    operands: Sequence[SSAValue | Sequence[SSAValue]],
    attrs: dict | None,
    shape: Sequence[int],
) -> SSAValue:
    (value,) = ctx.emit(
        kind, operands, attrs, shapes_=[list(shape)], name=f"{_base_name(ctx)}_{kind}"
    )
    return value


def _final(
    ctx: NodeContext,
    i: int,
    kind: str,
    operands: Sequence[SSAValue | Sequence[SSAValue]],
    attrs: dict | None,
    shape: Sequence[int],
) -> None:
    """Emit the op that computes the node's output i, under its ONNX name."""
    name = ctx.output_name(i)
    (value,) = ctx.importer.emit(
        kind, operands, attrs, [list(shape)], None, [name], None
    )
    ctx.importer.define(name, value)


def _slice0(
    ctx: NodeContext, value: SSAValue, index: int, shape: Sequence[int]
) -> SSAValue:
    """value[index] along dim 0, as shape `shape` (the remaining dims)."""
    full = shape_of(value)
    attrs = {"starts": [index], "ends": [index + 1], "axes": [0], "steps": [1]}
    part = _emit(ctx, "slice", [value], attrs, [1, *full[1:]])
    return _emit(ctx, "reshape", [part], {"shape": list(shape)}, shape)


def _direction_operand(
    ctx: NodeContext, i: int, d: int, shape: Sequence[int]
) -> SSAValue:
    """Input i's entry for direction d (a constant is sliced at import)."""
    const = ctx.const(i)
    if const is not None:
        name = f"{_base_name(ctx)}_{ctx.node.input[i]}_{d}"
        return ctx.importer.weight(
            ctx.importer.unique_name(name), const[d].astype(F32).reshape(shape)
        )
    return _slice0(ctx, ctx.input(i), d, shape)


@onnx_rule("RNN")
def rnn(ctx: NodeContext) -> None:
    """H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb), unrolled: one matmul for the
    input projection of all steps, then per step a slice, a matmul, an add and f."""
    direction, layout = _direction(ctx), _layout(ctx)
    directions = _DIRECTIONS[direction]
    _check_common(ctx, layout, directions)
    activations = [a.lower() for a in ctx.attr("activations", ["Tanh"] * directions)]
    if len(activations) != directions or any(
        a not in _RNN_ACTIVATIONS for a in activations
    ):
        raise ctx.error(
            f"activations {activations} are not supported (tanh, relu, sigmoid; one per direction)"
        )
    hidden = _hidden_size(ctx)
    x = ctx.input(0)
    if layout:
        batch, seq, size = ctx.shape(0)
        x = _emit(ctx, "permute", [x], {"order": [1, 0, 2]}, [seq, batch, size])
    else:
        seq, batch, size = ctx.shape(0)
    if ctx.shape(1) != (directions, hidden, size) or ctx.shape(2) != (
        directions,
        hidden,
        hidden,
    ):
        raise ctx.error(
            f"W {list(ctx.shape(1))} and R {list(ctx.shape(2))} do not fit "
            f"direction '{direction}', hidden_size {hidden} and input size {size}"
        )
    finals, ys = [], []
    for d in range(directions):
        w = _direction_operand(ctx, 1, d, [hidden, size])
        r = None
        b_const = ctx.const(3)
        if b_const is not None:
            sums = (b_const[d, :hidden] + b_const[d, hidden:]).astype(F32)
            bias = ctx.importer.weight(
                ctx.importer.unique_name(f"{_base_name(ctx)}_bias_{d}"), sums
            )
        elif ctx.has_input(3):
            both = _direction_operand(ctx, 3, d, [2, hidden])
            wb, rb = (_slice0(ctx, both, k, [hidden]) for k in (0, 1))
            bias = _emit(ctx, "add", [wb, rb], None, [hidden])
        else:
            bias = ctx.importer.none_value()
        projected = _emit(
            ctx, "matmul", [x, w, bias], {"right_transpose": True}, [seq, batch, hidden]
        )
        h = None
        if ctx.has_input(5):
            state = ctx.input(5)
            if layout:
                state = _emit(
                    ctx,
                    "permute",
                    [state],
                    {"order": [1, 0, 2]},
                    [directions, batch, hidden],
                )
            h = _slice0(ctx, state, d, [batch, hidden])
        steps: dict[int, SSAValue] = {}
        backwards = direction == "reverse" or d == 1
        for t in reversed(range(seq)) if backwards else range(seq):
            pre = _slice0(ctx, projected, t, [batch, hidden])
            if h is not None:
                r = _direction_operand(ctx, 2, d, [hidden, hidden]) if r is None else r
                recurrent = _emit(
                    ctx,
                    "matmul",
                    [h, r, ctx.importer.none_value()],
                    {"right_transpose": True},
                    [batch, hidden],
                )
                pre = _emit(ctx, "add", [pre, recurrent], None, [batch, hidden])
            h = _emit(
                ctx, _RNN_ACTIVATIONS[activations[d]], [pre], None, [batch, hidden]
            )
            steps[t] = h
        if h is None:
            raise ctx.error("an empty sequence needs an initial state (input 5)")
        finals.append(
            _emit(
                ctx, "reshape", [h], {"shape": [1, batch, hidden]}, [1, batch, hidden]
            )
        )
        if ctx.has_output(0):
            parts = [
                _emit(
                    ctx,
                    "reshape",
                    [s],
                    {"shape": [1, 1, batch, hidden]},
                    [1, 1, batch, hidden],
                )
                for s in (steps[t] for t in range(seq))
            ]
            ys.append(
                parts[0]
                if seq == 1
                else _emit(ctx, "concat", [parts], {"axis": 0}, [seq, 1, batch, hidden])
            )
    if ctx.has_output(0):
        y_shape = [seq, directions, batch, hidden]
        if layout:
            y = (
                ys[0]
                if directions == 1
                else _emit(ctx, "concat", [ys], {"axis": 1}, y_shape)
            )
            _final(
                ctx,
                0,
                "permute",
                [y],
                {"order": [2, 0, 1, 3]},
                [batch, seq, directions, hidden],
            )
        elif directions == 1:
            _final(ctx, 0, "reshape", [ys[0]], {"shape": y_shape}, y_shape)
        else:
            _final(ctx, 0, "concat", [ys], {"axis": 1}, y_shape)
    if ctx.has_output(1):
        state_shape = [directions, batch, hidden]
        if layout:
            state = (
                finals[0]
                if directions == 1
                else _emit(ctx, "concat", [finals], {"axis": 0}, state_shape)
            )
            _final(
                ctx,
                1,
                "permute",
                [state],
                {"order": [1, 0, 2]},
                [batch, directions, hidden],
            )
        elif directions == 1:
            _final(ctx, 1, "reshape", [finals[0]], {"shape": state_shape}, state_shape)
        else:
            _final(ctx, 1, "concat", [finals], {"axis": 0}, state_shape)
