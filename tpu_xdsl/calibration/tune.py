"""Auto-tune (`--tune-num N`): for the N tensors whose methods disagree most, keep the
threshold whose int8 simulation best preserves the model's outputs.

For each chosen tensor, every distinct candidate threshold (one per method)
is tried alone: the TOP interpreter runs a few samples with only that tensor
fake-quantized (symmetric int8, scale threshold / 127, levels -127..127,
round half to even), and the candidate's score is the mean cosine similarity
between those outputs and the float outputs. The default method's threshold
is scored first and is replaced only by a strictly better one, so tuning
never makes a tensor worse on the tuning samples.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.ir import Operation

from tpu_xdsl.dialects.module import tensor_names
from tpu_xdsl.interp.runner import ModuleRunner, arrange_inputs
from tpu_xdsl.interp.top_interpreter import TopFunctions

TUNE_SAMPLES = 5


def fake_quantize(value: np.ndarray, threshold: float) -> np.ndarray:
    """Symmetric int8 quantize-dequantize with scale threshold / 127."""
    scale = threshold / 127
    q = np.clip(np.round(value / scale), -127, 127)
    return (q * scale).astype(value.dtype, copy=False)


def cosine(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    """Cosine similarity of the outputs taken together as one vector."""
    x = np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in a])
    y = np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in b])
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    if nx == 0 or ny == 0:
        return 1.0 if nx == ny else 0.0
    return float(x @ y / (nx * ny))


def _fake_quant_functions(runner: ModuleRunner, op: Operation, name: str, threshold: float) -> InterpreterFunctions:
    """Implementations that run `op`'s kind as usual, then fake-quantize its tensor `name`."""
    base = next(f for f in runner.functions if isinstance(f, TopFunctions))
    kind = op.name.split(".", 1)[1]
    base_impl = getattr(base, f"run_{kind}")  # TopFunctions names each op's implementation so

    def run(self, interpreter: Interpreter, op_: Operation, args: PythonValues):
        values = base_impl(interpreter, op_, args).values
        names = tensor_names(op_)
        return tuple(
            fake_quantize(v, threshold)
            if i < len(names) and names[i] == name and v is not None and np.asarray(v).dtype.kind == "f"
            else v
            for i, v in enumerate(values)
        )

    return register_impls(type("FakeQuant", (InterpreterFunctions,), {"run": impl(type(op))(run)}))()


def run_fake_quantized(
    runner: ModuleRunner,
    producers: Mapping[str, Operation],
    inputs: Mapping[str, np.ndarray],
    name: str,
    threshold: float,
) -> list[np.ndarray]:
    """The outputs of @main with tensor `name` fake-quantized at `threshold`."""
    interpreter = Interpreter(runner.module)
    for functions in runner.functions:
        interpreter.register_implementations(functions)
    interpreter.register_implementations(
        _fake_quant_functions(runner, producers[name], name, threshold), override=True
    )
    results = interpreter.call_op("main", tuple(arrange_inputs(runner.module, inputs)))
    return [np.asarray(v) for v in results]


def producers(module: ModuleOp) -> dict[str, Operation]:
    """Tensor name -> the op that produces it."""
    found = {}
    for op in module.walk():
        for name in tensor_names(op):
            found.setdefault(name, op)
    return found


@dataclass(frozen=True)
class TuneResult:
    name: str
    default: float
    chosen: float
    chosen_method: str
    default_cosine: float
    chosen_cosine: float


def spread(candidates: Mapping[str, float]) -> float:
    values = list(candidates.values())
    top = max(values)
    return (top - min(values)) / top if top > 0 else 0.0


def tune(
    runner: ModuleRunner,
    samples: Sequence[Mapping[str, np.ndarray]],
    candidates: Mapping[str, Mapping[str, float]],
    method: str,
    tune_num: int,
    progress: Callable[[int], None] = lambda n: None,
) -> list[TuneResult]:
    """Tune the `tune_num` tensors with the largest relative spread of `candidates`
    (tensor -> method -> threshold; `method` is the default). Returns one result per
    tuned tensor; `progress` is told of each interpreter run."""
    chosen = sorted((n for n in candidates if spread(candidates[n]) > 0), key=lambda n: -spread(candidates[n]))
    chosen = chosen[:tune_num]
    if not chosen:
        return []
    reference = [list(runner.run(s).values()) for s in samples]
    progress(len(samples))
    found = producers(runner.module)
    results = []
    for name in chosen:
        options: dict[float, str] = {candidates[name][method]: method}
        for other, value in candidates[name].items():
            options.setdefault(value, other)
        best_value, best_score, default_score = None, -np.inf, None
        for value in options:
            score = float(np.mean([
                cosine(run_fake_quantized(runner, found, s, name, value), ref)
                for s, ref in zip(samples, reference, strict=True)
            ]))
            progress(len(samples))
            if default_score is None:
                default_score = score
            if score > best_score:
                best_value, best_score = value, score
        assert best_value is not None and default_score is not None
        results.append(
            TuneResult(name, candidates[name][method], best_value, options[best_value], default_score, best_score)
        )
    return results


def runs_needed(candidates: Mapping[str, Mapping[str, float]], tune_num: int, samples: int) -> int:
    """Interpreter runs `tune` makes (for a progress bar)."""
    chosen = sorted((n for n in candidates if spread(candidates[n]) > 0), key=lambda n: -spread(candidates[n]))
    if not chosen[:tune_num]:
        return 0
    return samples * (1 + sum(len(set(candidates[n].values())) for n in chosen[:tune_num]))
