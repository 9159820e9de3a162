"""Threshold search (`calibrate --search-threshold`): for each tensor, the method among kl,
mse, max and percentile9999 whose threshold best keeps the outputs of the ops that read
it (TPU-MLIR's search_threshold, made per tensor).

A threshold is judged where its error lands: the tensor is quantized at the candidate
threshold (symmetric per tensor as deploy quantizes it: S = T / 128, int8, or uint8
when the tensor is never negative, `quant.activation_qparams`), every op that reads it
is run again on the quantized tensor with its other operands in float, and the SQNR of
those ops' outputs against their float outputs (10 log10 signal / noise energy, summed
over the samples, averaged in dB over the readers) scores the candidate. A tensor only
the model's outputs read is scored on itself. The method `--method` names is scored
first and replaced only by a strictly better one.

One TOP run per sample keeps every tensor; each candidate then costs a run of the
readers only, so a search is about (distinct candidates) full runs per sample.

Choices that are best one tensor at a time can still add up to a worse model (an
outlier one reader can do without may be what the output needs), so the searched
thresholds are kept only if the model's outputs with every tensor quantized at them
are at least as close (cosine) as with every tensor at the default method's; otherwise
the default stays (`SearchOutcome.kept_default`). The check runs on other samples than
the search when there are any (the next SEARCH_SAMPLES): thresholds fitted to a few
samples clip what the next ones reach.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.calibration.bias_correction import lowered_int8
from tpu_xdsl.calibration.tune import cosine
from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.interp.runner import ModuleRunner, arrange_inputs
from tpu_xdsl.interp.top_interpreter import TopFunctions
from tpu_xdsl.kernels.quant import activation_qparams
from tpu_xdsl.weights import weights_of

SEARCH_SAMPLES = 8


@dataclass(frozen=True)
class SearchResult:
    name: str
    default: float
    chosen: float
    chosen_method: str
    default_sqnr: float
    chosen_sqnr: float


class _ValueCapture(Interpreter.Listener):
    """Every result of every op by SSA value (weights too: readers are run again)."""

    def __init__(self) -> None:
        self.values: dict[SSAValue, object] = {}

    def did_interpret_op(self, op: Operation, results: PythonValues) -> None:
        for result, value in zip(op.results, results):
            self.values[result] = value


def fake_quantize(x: np.ndarray, threshold: float, low: float, high: float) -> np.ndarray:
    """`x` quantized and dequantized as deploy's per-tensor symmetric INT8 would."""
    qparams = activation_qparams(threshold, low, high, asymmetric=False)
    return qparams.dequantize(qparams.quantize(x)).astype(x.dtype, copy=False)


def _readers(value: SSAValue) -> list[Operation]:
    """The ops that read `value` and can be run again alone (no regions, not the return)."""
    found = []
    for use in value.uses:
        op = use.operation
        if op.name != "func.return" and not op.regions and op not in found:
            found.append(op)
    return found


def _energy(reference: np.ndarray, actual: np.ndarray) -> tuple[float, float]:
    ref = np.asarray(reference, np.float64)
    return float(np.sum(ref * ref)), float(np.sum((np.asarray(actual, np.float64) - ref) ** 2))


def _sqnr(signal: float, noise: float) -> float:
    if noise <= 0:
        return float("inf")
    if signal <= 0:
        return float("-inf")
    return 10 * float(np.log10(signal / noise))


@dataclass
class SearchOutcome:
    """The per-tensor results, and the whole-model check of the choices."""

    results: list[SearchResult] = field(default_factory=list)
    default_cosine: float = 1.0  # outputs with every tensor at the default method's threshold
    searched_cosine: float = 1.0  # ... at the searched thresholds
    kept_default: bool = False
    # the real INT8 check (`int8_output_cosines`): label ("searched", "default") -> cosine
    int8_cosines: dict[str, float] = field(default_factory=dict)
    int8_rejected: bool = False  # the real INT8 check put the default back

    @property
    def chosen(self) -> dict[str, float]:
        return {} if self.kept_default else {r.name: r.chosen for r in self.results}


def _quantize_all_functions(runner: ModuleRunner, thresholds: Mapping[str, tuple[float, float, float]]):
    """TOP implementations that quantize every named float result as deploy would (per
    tensor, `thresholds`: name -> (threshold, min, max))."""
    base = next(f for f in runner.functions if isinstance(f, TopFunctions))
    kinds = {type(op): op.name.split(".", 1)[1] for op in main_func(runner.module).body.block.ops
             if op.name.startswith("top.") and op.name not in ("top.weight", "top.none")}

    def wrap(base_impl):
        def run(self, interpreter: Interpreter, op: Operation, args: PythonValues):
            values = base_impl(interpreter, op, args).values
            names = tensor_names(op)
            return tuple(
                fake_quantize(v, *thresholds[names[i]])
                if i < len(names) and names[i] in thresholds and isinstance(v, np.ndarray) and v.dtype.kind == "f"
                else v
                for i, v in enumerate(values)
            )
        return run

    methods = {f"run_{kind}": impl(cls)(wrap(getattr(base, f"run_{kind}"))) for cls, kind in kinds.items()
               if hasattr(base, f"run_{kind}")}
    return register_impls(type("QuantizeAll", (InterpreterFunctions,), methods))()


def quantized_outputs(runner: ModuleRunner, sample: Mapping[str, np.ndarray],
                      thresholds: Mapping[str, tuple[float, float, float]]) -> list[np.ndarray]:
    """@main's outputs with every tensor of `thresholds` quantized per tensor."""
    interpreter = Interpreter(runner.module)
    for functions in runner.functions:
        interpreter.register_implementations(functions)
    interpreter.register_implementations(_quantize_all_functions(runner, thresholds), override=True)
    return [np.asarray(v) for v in interpreter.call_op("main", tuple(arrange_inputs(runner.module, sample)))]


def search(
    runner: ModuleRunner,
    samples: Sequence[Mapping[str, np.ndarray]],
    candidates: Mapping[str, Mapping[str, float]],
    ranges: Mapping[str, tuple[float, float]],
    method: str,
    progress: Callable[[int], None] = lambda n: None,
    check_samples: Sequence[Mapping[str, np.ndarray]] = (),
) -> SearchOutcome:
    """`search_thresholds`, then the whole-model check against the default method on
    `check_samples` (the search samples when none are given)."""
    results = search_thresholds(runner, samples, candidates, ranges, method, progress)
    outcome = SearchOutcome(results)
    if not any(r.chosen != r.default for r in results):
        return outcome
    default = {n: (c[method], *ranges[n]) for n, c in candidates.items()}
    searched = dict(default)
    searched.update({r.name: (r.chosen, *ranges[r.name]) for r in results})
    default_cos, searched_cos = [], []
    for sample in check_samples or samples:
        reference = list(runner.run(sample).values())
        default_cos.append(cosine(quantized_outputs(runner, sample, default), reference))
        searched_cos.append(cosine(quantized_outputs(runner, sample, searched), reference))
    outcome.default_cosine, outcome.searched_cosine = float(np.mean(default_cos)), float(np.mean(searched_cos))
    outcome.kept_default = outcome.searched_cosine < outcome.default_cosine
    return outcome


def search_thresholds(
    runner: ModuleRunner,
    samples: Sequence[Mapping[str, np.ndarray]],
    candidates: Mapping[str, Mapping[str, float]],
    ranges: Mapping[str, tuple[float, float]],
    method: str,
    progress: Callable[[int], None] = lambda n: None,
) -> list[SearchResult]:
    """For each tensor of `candidates` (name -> method -> threshold; `method` is the
    default) with more than one distinct threshold, the best by the SQNR of its readers'
    outputs over `samples`. `ranges` gives each tensor's (min, max)."""
    producers: dict[str, SSAValue] = {}
    for op in main_func(runner.module).body.block.ops:
        for name, result in zip(tensor_names(op), op.results):
            producers.setdefault(name, result)
    searched = {n: c for n, c in candidates.items() if n in producers and len(set(c.values())) > 1}
    if not searched:
        return []
    interpreter = Interpreter(runner.module)
    for functions in runner.functions:
        interpreter.register_implementations(functions)
    # (name, threshold) -> per reader [signal, noise], summed over the samples
    energy: dict[tuple[str, float], list[list[float]]] = {}
    for sample in samples:
        capture = _ValueCapture()
        runner.run(sample, [capture])
        values = capture.values
        for name, options in searched.items():
            value = producers[name]
            x = values.get(value)
            if not isinstance(x, np.ndarray) or x.dtype.kind != "f":
                continue
            readers = _readers(value)
            low, high = ranges[name]
            for threshold in set(options.values()):
                quantized = fake_quantize(x, threshold, low, high)
                scores = energy.setdefault((name, threshold), [[0.0, 0.0] for _ in range(max(1, len(readers)))])
                if not readers:
                    signal, noise = _energy(x, quantized)
                    scores[0][0] += signal
                    scores[0][1] += noise
                    continue
                for i, reader in enumerate(readers):
                    args = tuple(quantized if operand is value else values[operand] for operand in reader.operands)
                    outputs = interpreter.run_op(reader, args)
                    for result, out in zip(reader.results, outputs):
                        ref = values.get(result)
                        if isinstance(ref, np.ndarray) and ref.dtype.kind == "f":
                            signal, noise = _energy(ref, out)
                            scores[i][0] += signal
                            scores[i][1] += noise
        progress(1)
    results = []
    for name, options in searched.items():
        by_threshold: dict[float, str] = {options[method]: method}
        for other, value in options.items():
            by_threshold.setdefault(value, other)
        scored = {}
        for threshold in by_threshold:
            readers = energy.get((name, threshold))
            if readers is None:
                break
            scored[threshold] = float(np.mean([_sqnr(s, n) for s, n in readers]))
        if len(scored) != len(by_threshold):
            continue
        default = options[method]
        best = default
        for threshold, score in scored.items():
            if score > scored[best]:
                best = threshold
        results.append(SearchResult(name, default, best, by_threshold[best], scored[default], scored[best]))
    return results


def int8_output_cosines(module, tables: Mapping[str, object], samples: Sequence[Mapping[str, np.ndarray]],
                        scheme) -> dict[str, float]:
    """For each calibration table (label -> table), the mean cosine of the final outputs of
    `module` lowered to INT8 with it (`scheme`: bias_correction.Scheme, the one deploy
    will use) against the TOP module's, over `samples`: the real INT8, not a simulation
    (data movement keeping its input's scale, lookup tables of whole chains)."""
    top = ModuleRunner(module, weights_of(module))
    references = [list(top.run(s).values()) for s in samples]
    found = {}
    for label, table in tables.items():
        int8 = lowered_int8(module, table, scheme)
        runner = ModuleRunner(int8, weights_of(int8))
        found[label] = float(np.mean([
            cosine([np.asarray(v, np.float64) for v in runner.run(s).values()], ref)
            for s, ref in zip(samples, references, strict=True)
        ]))
    return found
