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
