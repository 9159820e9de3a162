"""Run the original ONNX model for reference results: onnxruntime, every intermediate tensor too.

onnxruntime no longer runs opsets below 7; such models run on ONNX's
reference implementation instead (slower, same semantics).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx

from tpu_xdsl.errors import TpuXdslError

MIN_ORT_OPSET = 7


class ReferenceRunError(TpuXdslError):
    """onnxruntime (or ONNX's reference implementation) refuses to run the model."""


def _with_all_outputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of the model whose graph also outputs every node's outputs."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    existing = {o.name for o in copy.graph.output}
    for node in copy.graph.node:
        for name in node.output:
            if name and name not in existing:
                copy.graph.output.append(onnx.ValueInfoProto(name=name))
                existing.add(name)
    return copy


def opset_of(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def run_reference(
    model: onnx.ModelProto,
    inputs: Mapping[str, np.ndarray],
    all_tensors: bool = True,
    threads: int | None = None,
) -> tuple[dict[str, np.ndarray], str]:
    """(tensors by name, engine name). With `all_tensors`, intermediates are included.

    The engine's refusal of the model or the inputs (a malformed model, an op it does not
    support) is a one-line `ReferenceRunError`."""
    try:
        return _run(model, inputs, all_tensors, threads)
    except TpuXdslError:
        raise
    except Exception as e:  # onnxruntime's errors have no common base: each is the model's or input's
        lines = str(e).strip().splitlines()
        reason = f"{type(e).__name__}: {lines[0][:300]}" if lines else type(e).__name__
        raise ReferenceRunError(
            f"the reference cannot run the model on the test input ({reason}); check the model and the "
            "test input (the model may be malformed or use what onnxruntime does not support)"
        ) from e


def _run(
    model: onnx.ModelProto, inputs: Mapping[str, np.ndarray], all_tensors: bool, threads: int | None
) -> tuple[dict[str, np.ndarray], str]:
    target = _with_all_outputs(model) if all_tensors else model
    names = [o.name for o in target.graph.output]
    if opset_of(model) < MIN_ORT_OPSET:
        from onnx.reference import ReferenceEvaluator

        values = ReferenceEvaluator(target).run(None, dict(inputs))
        return dict(zip(names, (np.asarray(v) for v in values))), "onnx.reference"
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # its refusals surface as exceptions, reported in one line
    if threads:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    if all_tensors:
        # Keep every tensor observable: graph optimizations fuse nodes away.
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(target.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = {i.name: inputs[i.name] for i in session.get_inputs()}
    values = session.run(names, feeds)
    return dict(zip(names, (np.asarray(v) for v in values))), "onnxruntime"
