"""Constant folding at import: evaluate one ONNX node on constant inputs at the model's own opset.

ONNX's `ReferenceEvaluator` given a bare `NodeProto` ignores its `opsets`
argument and runs the newest version of the op, so an opset-11 `Unsqueeze`
(axes as an attribute) fails there. Each node is therefore evaluated as a
one-node model carrying the model's own opset imports (and its local
functions); the evaluators are cached by the node's signature (op type,
attributes, which inputs are present), since building one costs more than
running it.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import helper


class FoldError(Exception):
    """The reference implementation could not evaluate a node; the message says why."""


class NodeFolder:
    """Evaluates single nodes of one model at that model's opsets."""

    def __init__(self, model: onnx.ModelProto):
        self._opsets = {o.domain or "": o.version for o in model.opset_import}
        self._functions = list(model.functions)
        self._ir_version = max(model.ir_version, 7)
        self._cache: dict[bytes, object] = {}

    def evaluate(
        self, node: onnx.NodeProto, feeds: Sequence[np.ndarray | None], opset: int | None = None
    ) -> list[np.ndarray]:
        """The outputs of `node` on `feeds` (None for an absent input); `opset` overrides the
        model's default-domain opset (for nodes the importer builds itself)."""
        from onnx.reference import ReferenceEvaluator

        canonical = onnx.NodeProto()
        canonical.CopyFrom(node)
        canonical.name = ""
        del canonical.input[:], canonical.output[:]
        canonical.input.extend(f"i{k}" if name else "" for k, name in enumerate(node.input))
        canonical.output.extend(f"o{k}" if name else "" for k, name in enumerate(node.output))
        opsets = dict(self._opsets)
        if opset is not None:
            opsets[""] = opset
        # A Constant's key would be its whole tensor, and it is evaluated once: not cached.
        cached = node.op_type != "Constant"
        key = canonical.SerializeToString(deterministic=True) + repr(sorted(opsets.items())).encode() if cached else b""
        evaluator = self._cache.get(key) if cached else None
        if evaluator is None:
            graph = helper.make_graph(
                [canonical],
                "fold",
                [onnx.ValueInfoProto(name=n) for n in canonical.input if n],
                [onnx.ValueInfoProto(name=n) for n in canonical.output if n],
            )
            model = helper.make_model(
                graph,
                opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
                ir_version=self._ir_version,
                functions=self._functions,
            )
            try:
                evaluator = ReferenceEvaluator(model)
            except Exception as e:
                raise FoldError(_reason(e)) from e
            if cached:
                self._cache[key] = evaluator
        named = {f"i{k}": value for k, value in enumerate(feeds) if node.input[k]}
        try:
            # A hostile input's NaNs and empty slices: the result says so, numpy's warnings
            # on stderr would only break the command's one-line messages.
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                results = evaluator.run(None, named)  # type: ignore[attr-defined]
        except Exception as e:
            raise FoldError(_reason(e)) from e
        if any(r is None or isinstance(r, list | tuple) for r in results):
            # np.asarray would stack a sequence into one tensor: a different value.
            raise FoldError("its result is a sequence or an optional, which TOP cannot hold")
        return [np.asarray(r) for r in results]


def _reason(error: Exception) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    if len(first) > 200:
        first = first[:200] + "..."
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


# Ops whose result is as broad as their inputs broadcast together.
_BROADCASTING = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Pow", "Mod", "BitShift", "PRelu", "Where", "And", "Or", "Xor",
        "Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Max", "Min", "Sum", "Mean",
        "BitwiseAnd", "BitwiseOr", "BitwiseXor",
    }
)


def folded_shapes(
    node: onnx.NodeProto, feeds: Sequence[np.ndarray | None], opset: int
) -> list[tuple[int, ...]] | None:
    """The result shapes of folding `node` when they can grow past its inputs' sizes (a
    ConstantOfShape, an Expand, a broadcast...), computed from the inputs' values without
    allocating anything; for other ops of ONNX's domain, ONNX's shape inference from the
    inputs' shapes (a ConvTranspose's strides); None when neither says. A value that
    cannot be a shape (a negative dim, a zero step) raises ValueError naming it."""
    known = _grown_shapes(node, feeds)
    return known if known is not None else _inferred_shapes(node, feeds, opset)


def _inferred_shapes(
    node: onnx.NodeProto, feeds: Sequence[np.ndarray | None], opset: int
) -> list[tuple[int, ...]] | None:
    from onnx import defs, shape_inference

    if node.domain not in ("", "ai.onnx") or node.op_type in ("Constant", "If", "Loop", "Scan"):
        return None
    try:
        schema = defs.get_schema(node.op_type, opset, "")
        types = {
            name: helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
            for name, value in zip(node.input, feeds)
            if name and value is not None
        }
        inferred = shape_inference.infer_node_outputs(schema, node, types)
    except Exception:  # noqa: BLE001  (a best effort: what inference refuses, the evaluation reports)
        return None
    shapes = []
    for value in inferred.values():
        dims = value.tensor_type.shape.dim if value.HasField("tensor_type") else []
        if not all(d.HasField("dim_value") for d in dims):
            return None
        shapes.append(tuple(max(int(d.dim_value), 0) for d in dims))
    return shapes


def _grown_shapes(node: onnx.NodeProto, feeds: Sequence[np.ndarray | None]) -> list[tuple[int, ...]] | None:
    op = node.op_type
    shapes = [None if f is None else tuple(int(d) for d in f.shape) for f in feeds]

    def ints(i: int, what: str) -> list[int] | None:
        if i >= len(feeds) or feeds[i] is None:
            return None
        value = feeds[i]
        assert value is not None
        if value.dtype.kind not in "iub" or value.ndim > 1:
            raise ValueError(f"{what} must be a 1-D integer tensor, got {value.dtype} of shape {list(value.shape)}")
        return [int(v) for v in value.reshape(-1)]

    if op == "ConstantOfShape":
        dims = ints(0, "the shape (input 0)")
        if dims is not None and any(d < 0 for d in dims):
            raise ValueError(f"the shape (input 0) {dims} has a negative dimension")
        return None if dims is None else [tuple(dims)]
    if op in ("Expand", "Tile") and shapes[0] is not None:
        dims = ints(1, "the shape (input 1)" if op == "Expand" else "the repeats (input 1)")
        if dims is None:
            return None
        if any(d < 0 for d in dims):
            raise ValueError(f"input 1 {dims} has a negative value")
        if op == "Tile":
            return [tuple(a * b for a, b in zip(shapes[0], dims))] if len(dims) == len(shapes[0]) else None
        rank = max(len(dims), len(shapes[0]))
        left = (1,) * (rank - len(shapes[0])) + shapes[0]
        right = (1,) * (rank - len(dims)) + tuple(dims)
        return [tuple(a if b == 1 else b for a, b in zip(left, right))]
    if op == "Range" and all(f is not None and f.size == 1 for f in feeds[:3]) and len(feeds) >= 3:
        start, limit, delta = (float(np.asarray(f).reshape(-1)[0]) for f in feeds[:3])  # type: ignore[union-attr]
        if delta == 0 or not all(np.isfinite([start, limit, delta])):
            raise ValueError(f"Range({start}, {limit}, {delta}) has no finite length")
        return [(max(int(np.ceil((limit - start) / delta)), 0),)]
    if op == "OneHot" and shapes[0] is not None and len(feeds) > 1 and feeds[1] is not None:
        depth = int(np.asarray(feeds[1]).reshape(-1)[0]) if feeds[1].size else 0  # type: ignore[union-attr]
        return [(*shapes[0], max(depth, 0))]
    if op in ("Resize", "Upsample") and shapes[0] is not None:
        return _resized(node, feeds, shapes[0])
    if op == "Pad" and shapes[0] is not None:
        pads = ints(1, "the pads (input 1)") if len(feeds) > 1 else _int_attr(node, "pads")
        rank = len(shapes[0])
        if pads is None or len(pads) != 2 * rank or (len(feeds) > 3 and feeds[3] is not None):
            return None
        return [tuple(max(d + pads[i] + pads[i + rank], 0) for i, d in enumerate(shapes[0]))]
    if op in ("MatMul", "Gemm") and len(shapes) >= 2 and shapes[0] and shapes[1]:
        a, b = shapes[0], shapes[1]
        if op == "Gemm" and len(a) == len(b) == 2:
            rows = a[1] if (_int_attr(node, "transA") or [0])[0] else a[0]
            columns = b[0] if (_int_attr(node, "transB") or [0])[0] else b[1]
            return [(rows, columns)]
        if op == "Gemm" or len(a) < 2 or len(b) < 2:
            return None  # no larger than an input
        try:
            return [(*np.broadcast_shapes(a[:-2], b[:-2]), a[-2], b[-1])]
        except ValueError:
            return None
    if op == "Gather" and shapes[0] and len(shapes) > 1 and shapes[1] is not None:
        axis = _int_attr(node, "axis")
        axis = axis[0] if axis else 0
        if not -len(shapes[0]) <= axis < len(shapes[0]):
            return None
        axis %= len(shapes[0])
        return [(*shapes[0][:axis], *shapes[1], *shapes[0][axis + 1 :])]
    if op in _BROADCASTING and all(s is not None for s in shapes):
        try:
            return [tuple(np.broadcast_shapes(*shapes))]  # type: ignore[arg-type]
        except ValueError:
            return None
    return None


def _int_attr(node: onnx.NodeProto, name: str) -> list[int] | None:
    """An INT or INTS attribute as a list (None when absent)."""
    for attr in node.attribute:
        if attr.name == name:
            return [int(attr.i)] if attr.type == onnx.AttributeProto.INT else [int(v) for v in attr.ints]
    return None


def _resized(
    node: onnx.NodeProto, feeds: Sequence[np.ndarray | None], source: tuple[int, ...]
) -> list[tuple[int, ...]] | None:
    rank = len(source)
    for value in reversed(feeds[1:]):  # sizes (last input) before scales
        if value is None or value.size != rank:
            continue
        if value.dtype.kind in "iu":
            sizes = [int(v) for v in value.reshape(-1)]
            if any(d < 0 for d in sizes):
                raise ValueError(f"the sizes {sizes} have a negative value")
            return [tuple(sizes)]
        scales = np.asarray(value, np.float64).reshape(-1)
        if not np.all(np.isfinite(scales)) or np.any(scales < 0):
            raise ValueError(f"the scales {scales.tolist()} must be finite and not negative")
        return [tuple(int(np.floor(d * s)) for d, s in zip(source, scales))]
    return None
