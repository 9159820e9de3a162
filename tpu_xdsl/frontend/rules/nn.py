"""Import rules for matmul, normalization, softmax, reductions, arg/topk and identities.

TOP computes in f32. ONNX ops that keep an integer or bool dtype (MatMul on
ints, ReduceMax on bools, TopK on uint64, ...) compute in f32 and cast the
result back (`typed_output`), so consumers see ONNX's dtype.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from xdsl.ir import SSAValue

from tpu_xdsl.frontend.node_context import NodeContext
from tpu_xdsl.frontend.registry import onnx_rule

F32 = np.dtype(np.float32)


# -- helpers shared with conv_pool ------------------------------------------------------


def _graph_inputs(graph: onnx.GraphProto) -> Iterator[str]:
    """Every tensor name a node of `graph` (or of its subgraphs) reads, and its outputs."""
    for node in graph.node:
        yield from node.input
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                yield from _graph_inputs(sub)
    for value in graph.output:
        yield value.name


def output_used(ctx: NodeContext, i: int) -> bool:
    """Whether output i exists and some node or the graph output reads it."""
    if not ctx.has_output(i):
        return False
    name = ctx.output_name(i)
    return any(n == name for n in _graph_inputs(ctx.importer.model.graph))


def drop_outputs(ctx: NodeContext, first: int, what: str) -> None:
    """Outputs from `first` on are unsupported: an error if used, else bound to output 0
    (the importer needs every named output defined; nothing reads these)."""
    for i in range(first, ctx.num_outputs):
        if output_used(ctx, i):
            raise ctx.error(
                f"output {i} '{ctx.output_name(i)}' ({what}) is not supported"
            )
        if ctx.has_output(i):
            ctx.set_output(i, ctx.importer.ssa(ctx.output_name(0), None))


def const_weight(ctx: NodeContext, suffix: str, array: np.ndarray) -> SSAValue:
    """A new f32 `top.weight` derived from this node's constants (folded Gemm
    weights, pooling divisors...), named after output 0."""
    return ctx.constant(np.asarray(array, dtype=F32), suffix)


def output_as(
    ctx: NodeContext,
    i: int,
    kind: str,
    operands: Sequence[SSAValue | Sequence[SSAValue]],
    attrs: Mapping[str, Any] | None = None,
    *,
    shape: Sequence[int] | None = None,
    dtype: np.dtype = F32,
) -> SSAValue:
    """Emit a one-result `top.<kind>` that is the node's output i, under its ONNX name
    alone (`ctx.output` would name it after every output of the node), for nodes
    with several outputs. The shape is inferred when not given."""
    shapes_ = None if shape is None else [list(shape)]
    names = [ctx.output_name(i)]
    (value,) = ctx.importer.emit(
        kind, operands, attrs, shapes_, [np.dtype(dtype)], names, None
    )
    ctx.set_output(i, value)
    return value


def typed_output(
    ctx: NodeContext,
    kind: str,
    operands: Sequence[SSAValue | Sequence[SSAValue]],
    attrs: Mapping[str, Any] | None = None,
    *,
    dtype: np.dtype,
    shape: Sequence[int] | None = None,
) -> SSAValue:
    """Emit `top.<kind>` (f32) as output 0; when ONNX's output dtype is not f32,
    the f32 result is an intermediate and a `top.cast` to `dtype` is the output."""
    if np.dtype(dtype) == F32:
        return output_as(ctx, 0, kind, operands, attrs, shape=shape)
    shapes_ = None if shape is None else [list(shape)]
    (value,) = ctx.emit(kind, operands, attrs, shapes_=shapes_)
    return output_as(ctx, 0, "cast", [value], shape=_shape(value), dtype=dtype)


def _shape(value: SSAValue) -> list[int]:
    return list(value.type.get_shape())  # type: ignore[attr-defined]


def _axis(ctx: NodeContext, axis: int, rank: int, name: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise ctx.error(f"attribute '{name}' = {axis} is out of range for rank {rank}")
    return axis % rank


def _channels(ctx: NodeContext) -> int:
    """Dim 1 of input 0 (N, C, ...)."""
    if ctx.rank(0) < 2:
        raise ctx.error(f"the input {list(ctx.shape(0))} has no channel dim (rank < 2)")
    return ctx.shape(0)[1]


def _reshape(
    ctx: NodeContext, value: SSAValue, shape: Sequence[int], *, output: bool = False
) -> SSAValue:
    shape = [int(d) for d in shape]
    if output:
        return ctx.output("reshape", [value], {"shape": shape}, shapes_=[shape])[0]
    return ctx.emit("reshape", [value], {"shape": shape}, shapes_=[shape])[0]


# -- matmul and Gemm --------------------------------------------------------------------


@onnx_rule("MatMul")
def matmul(ctx: NodeContext) -> None:
    """numpy matmul (1-d operands included); integer MatMul computes in f32 and casts back."""
    none = ctx.importer.none_value()
    typed_output(ctx, "matmul", [ctx.input(0), ctx.input(1), none], dtype=ctx.dtype(0))


@onnx_rule("Gemm")
def gemm(ctx: NodeContext) -> None:
    """alpha * A' @ B' + beta * C as one top.matmul with C as its bias.

    Constant A/B get their transpose and alpha folded into the weight, a constant
    C gets beta; otherwise transposes are matmul attributes and alpha/beta `top.mul`s.
    """
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    trans_a, trans_b = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    if ctx.rank(0) != 2 or ctx.rank(1) != 2:
        raise ctx.error(
            f"A and B must be 2-d, got shapes {list(ctx.shape(0))} and {list(ctx.shape(1))}"
        )
    attrs: dict[str, Any] = {}
    a_const, b_const = ctx.const(0), ctx.const(1)
    if b_const is not None:
        folded = trans_b or alpha != 1.0
        b = (
            const_weight(
                ctx,
                "weight",
                (b_const.T if trans_b else b_const).astype(F32) * np.float32(alpha),
            )
            if folded
            else ctx.input(1)
        )
        alpha = 1.0
    else:
        b = ctx.input(1)
        attrs["right_transpose"] = trans_b or None
    if a_const is not None:
        a = const_weight(
            ctx,
            "input",
            (a_const.T if trans_a else a_const).astype(F32) * np.float32(alpha),
        )
    else:
        a = ctx.input(0)
        attrs["left_transpose"] = trans_a or None
        if alpha != 1.0:
            (a,) = ctx.emit("mul", [a, const_weight(ctx, "alpha", np.array(alpha))])
    typed_output(
        ctx, "matmul", [a, b, _gemm_bias(ctx, beta)], attrs, dtype=ctx.dtype(0)
    )


def _gemm_bias(ctx: NodeContext, beta: float) -> SSAValue:
    if not ctx.has_input(2) or beta == 0.0:
        return ctx.importer.none_value()
    c = ctx.const(2)
    if beta == 1.0:
        return ctx.input(2)
    if c is not None:
        return const_weight(ctx, "bias", c.astype(F32) * np.float32(beta))
    return ctx.emit("mul", [ctx.input(2), const_weight(ctx, "beta", np.array(beta))])[0]


# -- softmax family ---------------------------------------------------------------------


def _softmax_like(ctx: NodeContext, kind: str, axis: int, flatten: bool) -> None:
    """`kind` along `axis`; before opset 13 the input is seen as 2-d [prod(:axis), prod(axis:)]."""
    shape = ctx.shape(0)
    rank = len(shape)
    if rank == 0:
        raise ctx.error("the input must have rank >= 1")
    axis = _axis(ctx, axis, rank)
    if not flatten or axis == rank - 1:
        _emit_softmax_like(ctx, kind, ctx.input(0), axis, shape, output=True)
        return
    rows, cols = int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))
    flat = _reshape(ctx, ctx.input(0), [rows, cols])
    y = _emit_softmax_like(ctx, kind, flat, 1, [rows, cols], output=False)
    _reshape(ctx, y, shape, output=True)


def _emit_softmax_like(
    ctx: NodeContext,
    kind: str,
    x: SSAValue,
    axis: int,
    shape: Sequence[int],
    *,
    output: bool,
) -> SSAValue:
    if kind != "hardmax":
        op = ctx.output if output else ctx.emit
        return op(kind, [x], {"axis": axis}, shapes_=[list(shape)])[0]
    # Hardmax: one-hot of the first maximum = (argmax == iota along axis).
    index_shape = [1 if i == axis else d for i, d in enumerate(shape)]
    (index,) = ctx.emit("arg", [x], {"mode": "max", "axis": axis, "keepdims": True},
                        shapes_=[index_shape], dtypes=[np.dtype(np.int64)])  # fmt: skip
    (index_f,) = ctx.emit("cast", [index], shapes_=[index_shape])
    iota_shape = [shape[axis] if i == axis else 1 for i in range(len(shape))]
    iota = const_weight(ctx, "iota", np.arange(shape[axis]).reshape(iota_shape))
    bool_t = np.dtype(np.bool_)
    (hot,) = ctx.emit(
        "compare",
        [index_f, iota],
        {"mode": "eq"},
        shapes_=[list(shape)],
        dtypes=[bool_t],
    )
    op = ctx.output if output else ctx.emit
    return op("cast", [hot], shapes_=[list(shape)])[0]


@onnx_rule("Softmax", since=13)
def softmax(ctx: NodeContext) -> None:
    _softmax_like(ctx, "softmax", ctx.attr("axis", -1), flatten=False)


@onnx_rule("Softmax", until=12)
def softmax_v1(ctx: NodeContext) -> None:
    _softmax_like(ctx, "softmax", ctx.attr("axis", 1), flatten=True)


@onnx_rule("LogSoftmax", since=13)
def log_softmax(ctx: NodeContext) -> None:
    _softmax_like(ctx, "log_softmax", ctx.attr("axis", -1), flatten=False)


@onnx_rule("LogSoftmax", until=12)
def log_softmax_v1(ctx: NodeContext) -> None:
    _softmax_like(ctx, "log_softmax", ctx.attr("axis", 1), flatten=True)


@onnx_rule("Hardmax", since=13)
def hardmax(ctx: NodeContext) -> None:
    _softmax_like(ctx, "hardmax", ctx.attr("axis", -1), flatten=False)


@onnx_rule("Hardmax", until=12)
def hardmax_v1(ctx: NodeContext) -> None:
    _softmax_like(ctx, "hardmax", ctx.attr("axis", 1), flatten=True)


# -- normalization ----------------------------------------------------------------------


def _per_channel(ctx: NodeContext, names: Sequence[str], sizes: Sequence[int], first: int = 1) -> None:
    """Inputs first, first+1... (when present) are 1-D of one of `sizes` elements: a
    hostile shape would otherwise reach the kernels, which broadcast or index by it."""
    for i, name in enumerate(names, first):
        if ctx.has_input(i) and (ctx.rank(i) != 1 or ctx.shape(i)[0] not in sizes):
            wanted = " or ".join(str(n) for n in dict.fromkeys(sizes))
            raise ctx.error(f"{name} (input {i}) has shape {list(ctx.shape(i))}; it must be 1-D of {wanted}")


@onnx_rule("BatchNormalization")
def batch_norm(ctx: NodeContext) -> None:
    """Inference form with running statistics. Before opset 9, `spatial` = 0 means
    statistics per activation: folded (constants required) into a mul and an add.
    `is_test` (opset < 7) is ignored: the model is run for inference."""
    if ctx.attr("training_mode", 0):
        raise ctx.error(
            "training_mode = 1 (batch statistics) is not supported; export the model for inference"
        )
    eps = float(ctx.attr("epsilon", 1e-5))
    if ctx.opset < 9 and ctx.attr("spatial", 1) == 0:
        _batch_norm_per_activation(ctx, eps)
    else:
        _per_channel(ctx, ("scale", "B", "mean", "var"), [_channels(ctx)])
        operands = [ctx.input(i) for i in range(5)]
        output_as(ctx, 0, "batch_norm", operands, {"epsilon": eps}, shape=ctx.shape(0))
    drop_outputs(ctx, 1, "training statistics")


def _batch_norm_per_activation(ctx: NodeContext, eps: float) -> None:
    scale, bias, mean, var = (ctx.require_const(i, name).astype(np.float64)
                              for i, name in enumerate(("scale", "B", "mean", "var"), 1))  # fmt: skip
    a = scale / np.sqrt(var + eps)
    b = bias - mean * a
    # Per-activation parameters have shape (C, D1, ...) (or flattened C*D1*...).
    shape = [1, *ctx.shape(0)[1:]]
    if a.size != int(np.prod(shape)):
        raise ctx.error(
            f"spatial = 0 parameters of {a.size} elements do not fit input {list(ctx.shape(0))}"
        )
    (scaled,) = ctx.emit(
        "mul",
        [ctx.input(0), const_weight(ctx, "scale", a.reshape(shape))],
        shapes_=[ctx.shape(0)],
    )
    bias_weight = const_weight(ctx, "bias", b.reshape(shape))
    output_as(ctx, 0, "add", [scaled, bias_weight], shape=ctx.shape(0))


@onnx_rule("InstanceNormalization")
def instance_norm(ctx: NodeContext) -> None:
    eps = float(ctx.attr("epsilon", 1e-5))
    _per_channel(ctx, ("scale", "B"), [_channels(ctx)])
    ctx.output(
        "instance_norm",
        [ctx.input(0), ctx.input(1), ctx.input(2)],
        {"epsilon": eps},
        shapes_=[ctx.shape(0)],
    )


@onnx_rule("GroupNormalization", since=18)
def group_norm(ctx: NodeContext) -> None:
    """Opset 18 has scale/bias per group, 21 per channel; top.group_norm takes either."""
    groups = int(ctx.attr("num_groups"))
    eps = float(ctx.attr("epsilon", 1e-5))
    channels = _channels(ctx)
    if groups <= 0 or channels % groups:
        raise ctx.error(f"num_groups = {groups} does not divide the {channels} channels")
    _per_channel(ctx, ("scale", "bias"), [groups, channels])
    operands = [ctx.input(0), ctx.input(1), ctx.input(2)]
    ctx.output(
        "group_norm",
        operands,
        {"num_groups": groups, "epsilon": eps},
        shapes_=[ctx.shape(0)],
    )


@onnx_rule("LayerNormalization", since=17)
def layer_norm(ctx: NodeContext) -> None:
    """top.layer_norm for Y; the optional Mean and InvStdDev outputs, when used,
    come from reduce ops (shape x.shape[:axis] + 1s)."""
    shape = ctx.shape(0)
    axis = _axis(ctx, ctx.attr("axis", -1), len(shape))
    eps = float(ctx.attr("epsilon", 1e-5))
    x = ctx.input(0)
    normalized = shape[axis:]
    for i, name in ((1, "scale"), (2, "B")):
        given = ctx.shape(i) if ctx.has_input(i) else ()
        if len(given) > len(normalized) or any(
            g not in (1, n) for g, n in zip(reversed(given), reversed(normalized))
        ):
            raise ctx.error(
                f"{name} (input {i}) {list(given)} does not broadcast to the normalized dims {list(normalized)}"
            )
    attrs = {"axis": axis, "epsilon": eps}
    output_as(ctx, 0, "layer_norm", [x, ctx.input(1), ctx.input(2)], attrs, shape=shape)
    if not (output_used(ctx, 1) or output_used(ctx, 2)):
        drop_outputs(ctx, 1, "")
        return
    axes = list(range(axis, len(shape)))
    stat_shape = [*shape[:axis], *[1] * len(axes)]

    def stat(
        i: int, kind: str, operands: list[SSAValue], attrs: dict | None = None
    ) -> SSAValue:
        if ctx.has_output(i):
            return output_as(ctx, i, kind, operands, attrs, shape=stat_shape)
        return ctx.emit(kind, operands, attrs, shapes_=[stat_shape])[0]

    attrs = {"mode": "mean", "axes": axes, "keepdims": True}
    mean = stat(1, "reduce", [x], attrs)
    (centered,) = ctx.emit("sub", [x, mean], shapes_=[shape])
    (square,) = ctx.emit("mul", [centered, centered], shapes_=[shape])
    (var,) = ctx.emit("reduce", [square], attrs, shapes_=[stat_shape])
    epsilon = const_weight(ctx, "epsilon", np.array(eps))
    (var_eps,) = ctx.emit("add", [var, epsilon], shapes_=[stat_shape])
    stat(2, "rsqrt", [var_eps])


@onnx_rule("LRN")
def lrn(ctx: NodeContext) -> None:
    attrs = {
        "size": int(ctx.attr("size")),
        "alpha": float(ctx.attr("alpha", 1e-4)),
        "beta": float(ctx.attr("beta", 0.75)),
        "bias": float(ctx.attr("bias", 1.0)),
    }
    ctx.output("lrn", [ctx.input(0)], attrs, shapes_=[ctx.shape(0)])


@onnx_rule("MeanVarianceNormalization", since=9)
def mean_variance_normalization(ctx: NodeContext) -> None:
    """(x - mean) / sqrt(var + 1e-9) over `axes` (default [0, 2, 3]), decomposed."""
    shape = ctx.shape(0)
    axes = sorted(
        _axis(ctx, a, len(shape), "axes") for a in ctx.attr("axes", [0, 2, 3])
    )
    stat_shape = [1 if i in axes else d for i, d in enumerate(shape)]
    attrs = {"mode": "mean", "axes": axes, "keepdims": True}
    x = ctx.input(0)
    (mean,) = ctx.emit("reduce", [x], attrs, shapes_=[stat_shape])
    (centered,) = ctx.emit("sub", [x, mean], shapes_=[shape])
    (square,) = ctx.emit("mul", [centered, centered], shapes_=[shape])
    (var,) = ctx.emit("reduce", [square], attrs, shapes_=[stat_shape])
    (var_eps,) = ctx.emit(
        "add", [var, const_weight(ctx, "epsilon", np.array(1e-9))], shapes_=[stat_shape]
    )
    (std,) = ctx.emit("sqrt", [var_eps], shapes_=[stat_shape])
    ctx.output("div", [centered, std], shapes_=[shape])


@onnx_rule("LpNormalization")
def lp_normalization(ctx: NodeContext) -> None:
    """x / ||x||_p along `axis`, p in {1, 2}."""
    p = int(ctx.attr("p", 2))
    if p not in (1, 2):
        raise ctx.error(f"p = {p} is not supported (ONNX allows 1 or 2)")
    shape = ctx.shape(0)
    axis = _axis(ctx, ctx.attr("axis", -1), len(shape))
    norm_shape = [1 if i == axis else d for i, d in enumerate(shape)]
    x = ctx.input(0)
    attrs = {"mode": f"l{p}", "axes": [axis], "keepdims": True}
    (norm,) = ctx.emit("reduce", [x], attrs, shapes_=[norm_shape])
    ctx.output("div", [x, norm], shapes_=[shape])


# -- reductions -------------------------------------------------------------------------

_REDUCE = {
    "ReduceMean": "mean",
    "ReduceSum": "sum",
    "ReduceMax": "max",
    "ReduceMin": "min",
    "ReduceProd": "prod",
    "ReduceL1": "l1",
    "ReduceL2": "l2",
    "ReduceLogSumExp": "log_sum_exp",
    "ReduceSumSquare": "sum_square",
    "ReduceLogSum": "log_sum",
}
# Opset from which `axes` is an input instead of an attribute.
_AXES_INPUT_SINCE = {op: 18 for op in _REDUCE} | {"ReduceSum": 13}


@onnx_rule(*_REDUCE)
def reduce(ctx: NodeContext) -> None:
    """top.reduce over `axes` (attribute or, from opset 13/18, constant input; all
    when empty unless noop_with_empty_axes). ReduceLogSum is log(sum)."""
    shape = ctx.shape(0)
    rank = len(shape)
    if ctx.opset >= _AXES_INPUT_SINCE[ctx.op_type]:
        given = (
            ctx.require_const(1, "axes").astype(np.int64).reshape(-1).tolist()
            if ctx.has_input(1)
            else []
        )
    else:
        given = list(ctx.attr("axes", []))
    keepdims = bool(ctx.attr("keepdims", 1))
    dtype = ctx.dtype(0)
    if not given and ctx.attr("noop_with_empty_axes", 0):
        ctx.output(
            "reshape",
            [ctx.input(0, dtype=None)],
            {"shape": list(shape)},
            shapes_=[shape],
            dtypes=[dtype],
        )
        return
    axes = (
        sorted({_axis(ctx, a, rank, "axes") for a in given})
        if given
        else list(range(rank))
    )
    out_shape = [
        1 if i in axes else d for i, d in enumerate(shape) if keepdims or i not in axes
    ]
    mode = _REDUCE[ctx.op_type]
    attrs = {
        "mode": "sum" if mode == "log_sum" else mode,
        "axes": axes,
        "keepdims": keepdims,
    }
    if mode == "log_sum":
        (total,) = ctx.emit("reduce", [ctx.input(0)], attrs, shapes_=[out_shape])
        typed_output(ctx, "log", [total], dtype=dtype, shape=out_shape)
        return
    typed_output(ctx, "reduce", [ctx.input(0)], attrs, dtype=dtype, shape=out_shape)


@onnx_rule("ArgMax", "ArgMin")
def arg(ctx: NodeContext) -> None:
    """top.arg with an i64 result; select_last_index from opset 12."""
    shape = ctx.shape(0)
    axis = _axis(ctx, ctx.attr("axis", 0), len(shape))
    keepdims = bool(ctx.attr("keepdims", 1))
    out_shape = [
        1 if i == axis else d for i, d in enumerate(shape) if keepdims or i != axis
    ]
    attrs = {
        "mode": "max" if ctx.op_type == "ArgMax" else "min",
        "axis": axis,
        "keepdims": keepdims,
        "select_last_index": bool(ctx.attr("select_last_index", 0)),
    }
    ctx.output(
        "arg", [ctx.input(0)], attrs, shapes_=[out_shape], dtypes=[np.dtype(np.int64)]
    )


@onnx_rule("CumSum")
def cumsum(ctx: NodeContext) -> None:
    """top.cumsum along the constant `axis` input, on floats or integers (the dtype kept:
    position ids summed from a mask stay int64)."""
    shape = ctx.shape(0)
    axis = _axis(ctx, int(ctx.require_const(1, "axis").reshape(-1)[0]), len(shape))
    attrs = {"axis": axis, "exclusive": bool(ctx.attr("exclusive", 0)), "reverse": bool(ctx.attr("reverse", 0))}
    ctx.output("cumsum", [ctx.input(0)], attrs, shapes_=[list(shape)], dtypes=[ctx.dtype(0)])


@onnx_rule("TopK")
def topk(ctx: NodeContext) -> None:
    """top.topk (values f32, indices i64); k is an attribute before opset 10, then a
    constant input. Values of another dtype are cast back."""
    shape = ctx.shape(0)
    axis = _axis(ctx, ctx.attr("axis", -1), len(shape))
    if ctx.opset < 10:
        k = int(ctx.attr("k"))
    else:
        k = int(ctx.require_const(1, "K").reshape(-1)[0])
    if not 0 <= k <= shape[axis]:
        raise ctx.error(
            f"K = {k} is outside [0, {shape[axis]}] (dim {axis} of the input)"
        )
    attrs = {
        "k": k,
        "axis": axis,
        "largest": bool(ctx.attr("largest", 1)),
        "sorted": bool(ctx.attr("sorted", 1)),
    }
    out_shape = [k if i == axis else d for i, d in enumerate(shape)]
    shapes_ = [out_shape, out_shape]
    dtypes = [F32, np.dtype(np.int64)]
    dtype = ctx.dtype(0)
    if dtype == F32:
        ctx.output("topk", [ctx.input(0)], attrs, shapes_=shapes_, dtypes=dtypes)
        return
    values_name = ctx.importer.unique_name(f"{ctx.output_name(0)}_f32")
    indices_name = ctx.output_name(1) if ctx.has_output(1) else ""
    names = [values_name, indices_name]
    values, indices = ctx.importer.emit(
        "topk", [ctx.input(0)], attrs, shapes_, dtypes, names, None
    )
    if ctx.has_output(1):
        ctx.set_output(1, indices)
    output_as(ctx, 0, "cast", [values], shape=out_shape, dtype=dtype)


# -- identities -------------------------------------------------------------------------


def _identity(ctx: NodeContext) -> None:
    """A same-shape top.reshape named by the output (any dtype)."""
    shape = ctx.shape(0)
    attrs = {"shape": list(shape)}
    output_as(
        ctx,
        0,
        "reshape",
        [ctx.input(0, dtype=None)],
        attrs,
        shape=shape,
        dtype=ctx.dtype(0),
    )


@onnx_rule("Identity")
def identity(ctx: NodeContext) -> None:
    _identity(ctx)


@onnx_rule("Dropout")
def dropout(ctx: NodeContext) -> None:
    """Inference: the output is the input and the optional mask all true (bool from
    opset 10, the input's dtype before). `is_test` (opset < 7) is ignored, as by
    onnxruntime; training_mode = true (opset 12) is an error unless ratio is 0."""
    if ctx.opset >= 12 and ctx.has_input(2):
        training = ctx.require_const(2, "training_mode")
        if bool(np.asarray(training).reshape(-1)[0]):
            ratio = ctx.require_const(1, "ratio") if ctx.has_input(1) else np.array(0.5)
            if float(np.asarray(ratio).reshape(-1)[0]) != 0.0:
                raise ctx.error(
                    "training_mode = true drops at random; only ratio 0 is supported"
                )
    _identity(ctx)
    if ctx.has_output(1):
        mask_dtype = np.bool_ if ctx.opset >= 10 else ctx.dtype(0)
        ctx.set_const(1, np.ones(ctx.shape(0), dtype=mask_dtype))
