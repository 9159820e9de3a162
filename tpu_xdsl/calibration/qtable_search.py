"""Mixed precision by measurement: which ops must leave INT8 (or BF16, for a BF16 model) for the
model to keep its accuracy (TPU-MLIR's run_sensitive_layer and search_qtable). Below, "INT8"
stands for the searched mode.

Every score is the real thing: the calibrated TOP module lowered with one quantize table
(`lower_top_to_tpu(..., qtable=...)`) and run by the TPU interpreter on the search samples,
its float GEMMs summing in float32 as the chip accumulates (`gemm_sums_in_float32`: twice
as fast as deploy's order-free float64 sums, and as close to the chip); its final outputs
are compared with the TOP (F32) interpreter's. A sample's cosine is the
lowest over the model's outputs; a configuration's score is the lower one-sided
`confidence` bound (Student's t, default 95 %) of the mean over the samples: the mean the
model keeps on samples it was not searched on, not only on these (`lower_bound`). At
confidence 0.5 the score is the plain mean, TPU-MLIR's criterion.

1. Sensitivity of each candidate op (an op INT8 computes; data movement is exact in INT8 and
   is left out: the lowering moves data in float where its producers are, see
   `lower_top_to_tpu`): the score when it alone is INT8 (everything else in the float mode),
   and when it alone is float (everything else INT8).
2. Ops ranked worst first: lowest INT8-alone score, then highest float-alone score.
3. A short prefix of the ranking that meets the target in float, by binary search (exact
   when the scores along the ranking are monotone; a longer prefix where they are not).
4. Pruning: the chosen ops, least sensitive first, each dropped when the rest still meet
   the target.

The scoring runs in worker processes (`tpu_xdsl.workers`): a task is one configuration over
all samples and returns one cosine per sample, so the results, and the table written from
them, do not depend on where or in which order they ran.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tpu_xdsl.backend.codegen import op_macs
from tpu_xdsl.calibration.dataset import SampleLoader
from tpu_xdsl.calibration.table import read_table
from tpu_xdsl.dialects.module import main_func, output_names, tensor_names
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.ir_io import read_module
from tpu_xdsl.kernels.op_kinds import EXACT_ON_CODES
from tpu_xdsl.kernels.tpu import gemm_sums_in_float32
from tpu_xdsl.transforms.import_calibration import import_calibration
from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu
from tpu_xdsl.weights import attach_weights
from tpu_xdsl.workers import workers

# TOP ops that are not computations at all.
_NOT_OPS = frozenset({"top.input", "top.weight", "top.none"})
MAC_KINDS = {"top.conv": "conv", "top.deconv": "deconv", "top.matmul": "matmul"}


class SearchError(TpuXdslError):
    """The search cannot start: its inputs do not fit the module."""


class TargetNotMet(Exception):
    """The target cosine is out of reach (every candidate op in float, or the --max-float-ops
    or --min-conv-share allowance); `best` is the highest score reached, `floated` the ops in
    float that reached it (where that is not every op)."""

    def __init__(self, message: str, best: float, floated: tuple[Candidate, ...] = ()):
        super().__init__(message)
        self.best = best
        self.floated = floated


@dataclass(frozen=True)
class Candidate:
    name: str  # the op's first tensor name: its key in the quantize table
    kind: str  # the TOP op, without "top."
    macs: int

    @property
    def is_conv(self) -> bool:
        """A convolution, deconvolution or matmul: where the chip's INT8 speed is."""
        return self.kind in MAC_KINDS.values()


@dataclass(frozen=True)
class Config:
    """A lowering: the module's mode and the quantize table's lines (sorted, hashable).
    `anchor`, when given, is a configuration this one differs from in a few ops: the
    worker runs it first and keeps its results, so only what the difference changes is
    computed again (it is not part of the configuration's identity)."""

    mode: str
    table: tuple[tuple[str, str], ...] = ()
    anchor: Config | None = field(default=None, compare=False)

    @staticmethod
    def of(mode: str, table: Mapping[str, str], anchor: Config | None = None) -> Config:
        return Config(mode, tuple(sorted(table.items())), anchor)


@dataclass(frozen=True)
class Sensitivity:
    candidate: Candidate
    mode_alone: float  # score with only this op in the searched mode (INT8 unless said)
    float_alone: float  # score with only this op in the float mode


@dataclass
class SearchResult:
    mode: str  # the mode the ops stay in: INT8, or BF16 for a BF16 model
    sensitivities: list[Sensitivity]  # worst first
    float_ops: list[Candidate]  # in ranking order
    score: float  # of the chosen table (the lower confidence bound of its mean)
    all_mode: float
    all_float: float
    total_macs: int
    runs: int = 0
    mean: float = math.nan  # the chosen table's plain mean over the samples
    samples: tuple[float, ...] = ()  # the chosen table's cosine on each sample (NaN: nothing to compare)
    mode_samples: tuple[float, ...] = ()  # every op in `mode`: the cosine on each sample

    @property
    def float_macs(self) -> int:
        return sum(c.macs for c in self.float_ops)


# -- one configuration, run on the samples -------------------------------------------------


class Evaluator:
    """The calibrated TOP module, the samples and their TOP (F32) outputs, kept in one
    process; `score` lowers a copy in a configuration and runs it on every sample.

    Configurations differ from each other in a few ops, so most of what a run computes
    was computed before: every op's results are kept per sample under a key of the op
    (its kind, attributes and types) and of the keys of its operands' producers, a hash
    of the whole computation that leads to it. An op whose key was seen is not run
    again. The cache keeps the runs of the all-INT8 and all-float configurations (the
    bases every other configuration differs from least) until `CACHE_BYTES` is used, and
    those of the last anchor a configuration named (`Config.anchor`) in as much again."""

    CACHE_BYTES = 3 << 29  # 1.5 GiB per worker, and as much for the anchor

    def __init__(self, mlir_path: str | Path, table_path: str | Path | None, chip: str,
                 sample_paths: Sequence[str | Path], asymmetric: bool = False):
        # delays the xDSL interpreter to the scoring workers (the parent pickles the class)
        from tpu_xdsl.interp.runner import ModuleRunner

        self.chip = chip
        self.asymmetric = asymmetric
        self.module = read_module(Path(mlir_path))
        store = attach_weights(self.module, base_dir=Path(mlir_path).parent)
        if table_path is not None:
            import_calibration(self.module, read_table(table_path), str(table_path))
        self.weights = {name: store[name] for name in store}  # with the calibration's channel ranges
        self.loader = SampleLoader(self.module)
        self.samples = [self.loader.load(Path(p)) for p in sample_paths]
        self.reference = ModuleRunner(self.module, self.weights)
        self.references = [self.reference.run(s) for s in self.samples]
        self.informative = informative_outputs(self.references)
        self.caches: list[dict[int, tuple]] = [{} for _ in self.samples]
        self.cached_bytes = 0
        self.recorded: set[str] = set()
        self.anchor: Config | None = None
        self.anchor_caches: list[dict[int, tuple]] = [{} for _ in self.samples]
        self.anchor_bytes = 0
        self.base_runs: dict[str, _MemoizedRun] = {}  # every op in a mode, for `base_outputs`

    def score(self, config: Config, anchoring: bool = False) -> tuple[float, ...]:
        """One cosine per sample: the lowest over the outputs."""
        record = not config.table  # a base configuration
        if not record and config.mode not in self.recorded:  # each worker records its own bases
            self.score(Config(config.mode))
        self.recorded.add(config.mode)
        if config.anchor is not None and config.anchor != self.anchor:
            self._record_anchor(config.anchor)
        run = self._lowered(config)
        cosines = []
        for sample, reference, cache, anchored, names in zip(
            self.samples, self.references, self.caches, self.anchor_caches, self.informative, strict=True
        ):
            if not names:
                cosines.append(math.nan)
                continue
            if record:
                into = cache if self.cached_bytes < self.CACHE_BYTES else None
            else:
                into = anchored if anchoring and self.anchor_bytes < self.CACHE_BYTES else None
            with gemm_sums_in_float32():  # the chip's float accumulation, at twice the speed
                outputs, added = run(sample, (cache, anchored), into)
            if record:
                self.cached_bytes += added
            else:
                self.anchor_bytes += added
            cosines.append(min(cosine(reference[name], outputs[name]) for name in names))
        return tuple(cosines)

    def base_outputs(self, task: tuple[str, Sequence[str]]) -> list[dict[str, tuple[float, float]]]:
        """For each sample at the task's paths, each output's norm in TOP (F32) and its
        cosine when every op is in the task's mode (`hardest_samples`)."""
        mode, paths = task
        if mode not in self.base_runs:  # lowered once per worker, not once per task
            self.base_runs[mode] = self._lowered(Config(mode))
        run = self.base_runs[mode]
        found = []
        for path in paths:
            sample = self.loader.load(Path(path))
            expected = self.reference.run(sample)
            with gemm_sums_in_float32():
                outputs, _ = run(sample, (), None)
            found.append({name: (_norm(value), cosine(value, outputs[name])) for name, value in expected.items()})
        return found

    def _lowered(self, config: Config) -> _MemoizedRun:
        """A copy of the module lowered in `config`, ready to run."""
        module = self.module.clone()
        store = attach_weights(module, dict(self.weights))
        lower_top_to_tpu(module, config.mode, self.chip, self.asymmetric, qtable=dict(config.table))
        return _MemoizedRun(module, store)

    def _record_anchor(self, anchor: Config) -> None:
        """Run `anchor` keeping its results in place of the last anchor's."""
        self.anchor = anchor
        self.anchor_caches = [{} for _ in self.samples]
        self.anchor_bytes = 0
        self.score(Config(anchor.mode, anchor.table), anchoring=True)


class _MemoizedRun:
    """Runs a lowered module's @main op by op, taking the results of ops whose key is in
    the sample's cache from there (see `Evaluator`)."""

    def __init__(self, module, store):
        from xdsl.interpreter import Interpreter

        # delays the xDSL interpreter to the scoring workers
        from tpu_xdsl.interp.runner import ModuleRunner, arrange_inputs

        self.module = module
        self.block = main_func(module).body.block
        self.output_names = output_names(module)
        self.arrange = arrange_inputs
        self.interpreter = Interpreter(module)
        for functions in ModuleRunner(module, store).functions:
            self.interpreter.register_implementations(functions)
        keys: dict = {arg: hash(("arg", arg.index)) for arg in self.block.args}
        self.keys: list[int] = []
        for op in self.block.ops:
            key = hash((_signature(op), tuple(keys[v] for v in op.operands)))
            self.keys.append(key)
            for result in op.results:
                keys[result] = hash((key, result.index))

    def __call__(self, sample: Mapping[str, np.ndarray], caches: Sequence[dict[int, tuple]],
                 into: dict[int, tuple] | None):
        """The outputs on `sample`, taking results found in `caches` and keeping the others
        `into` that cache (unless None), and the bytes kept."""
        values: dict = dict(zip(self.block.args, self.arrange(self.module, sample), strict=True))
        added = 0
        outputs: tuple = ()
        for op, key in zip(self.block.ops, self.keys, strict=True):
            inputs = tuple(values[v] for v in op.operands)
            if op is self.block.last_op:
                outputs = inputs
                break
            results = next((c[key] for c in caches if key in c), None)
            if results is None:
                results = self.interpreter.run_op(op, inputs)
                if into is not None and op.operands:
                    into[key] = results
                    added += sum(getattr(r, "nbytes", 0) for r in results)
            values.update(zip(op.results, results, strict=True))
        return dict(zip(self.output_names, (np.asarray(o) for o in outputs), strict=True)), added


def _signature(op) -> int:
    """What an op computes, less its operands: kind, attributes and types. xDSL attributes
    are immutable values that hash by content (printing them cost ~0.8 s a configuration)."""
    return hash((
        op.name,
        tuple((k, _hashed(v)) for k, v in sorted(op.attributes.items())),
        tuple((k, _hashed(v)) for k, v in sorted(op.properties.items())),
        tuple(_hashed(v.type) for v in op.operands),
        tuple(_hashed(r.type) for r in op.results),
    ))


def _hashed(attribute) -> int:
    """The attribute's hash, or its printed form's for the few that hold a dict."""
    try:
        return hash(attribute)
    except TypeError:
        return hash(str(attribute))


# An output of a sample whose norm is below this share of the output's median norm over the
# samples says nothing: a text detector's map of a crop without text is ~1e-8 everywhere,
# below float16's smallest number, and the cosine of two such maps is noise.
EMPTY_SHARE = 1e-3


def informative_outputs(references: Sequence[Mapping[str, np.ndarray]]) -> list[list[str]]:
    """Per sample, the outputs whose cosine means something (not empty, see EMPTY_SHARE)."""
    return _informative([{name: _norm(value) for name, value in r.items()} for r in references])


def _norm(value: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(value, dtype=np.float64)))


def _informative(norms: Sequence[Mapping[str, float]]) -> list[list[str]]:
    """`informative_outputs` from each sample's output norms."""
    if not norms:
        return []
    medians = {name: float(np.median([n[name] for n in norms])) for name in norms[0]}
    return [[name for name, median in medians.items() if n[name] > EMPTY_SHARE * median or median == 0]
            for n in norms]


def cosine(reference: np.ndarray, actual: np.ndarray) -> float:
    """`tune.cosine` of one output, where a non-finite value (an overflow to inf) scores 0."""
    # delays the xDSL interpreter (tune runs it) to the scoring workers
    from tpu_xdsl.calibration.tune import cosine as outputs_cosine

    if not (np.isfinite(reference).all() and np.isfinite(actual).all()):
        return 0.0
    return outputs_cosine([reference], [actual])


# -- the search ------------------------------------------------------------------------------


def candidates(module, chip: str) -> list[Candidate]:
    """The ops an all-INT8 lowering computes in INT8, in program order, less data movement."""
    found = []
    for op in main_func(module).body.block.ops:
        if op.name in _NOT_OPS or not op.name.startswith("top."):
            continue
        kind = op.name.removeprefix("top.")
        names = tensor_names(op)
        if not names or kind in EXACT_ON_CODES:  # exact in INT8: never worth a float mode
            continue
        macs = op_macs(MAC_KINDS[op.name], op) if op.name in MAC_KINDS else 0
        found.append(Candidate(names[0], kind, macs))
    return found


Scorer = Callable[[list[Config]], list[tuple[float, ...]]]

DEFAULT_CONFIDENCE = 0.95


def student_t_quantile(p: float, dof: int) -> float:
    """The p-quantile of Student's t with `dof` degrees of freedom, p >= 0.5: the normal
    quantile corrected by the Cornish-Fisher series of Abramowitz and Stegun 26.7.5 (within
    1e-3 of the tables from 5 degrees of freedom on, 0.02 at 2)."""
    z = statistics.NormalDist().inv_cdf(p)
    v = float(dof)
    terms = ((z ** 3 + z) / 4, (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96,
             (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384,
             (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160)
    return z + sum(g / v ** (k + 1) for k, g in enumerate(terms))


def lower_bound(per_sample: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The lower one-sided `confidence` bound of the mean of the finite per-sample cosines
    (NaN marks a sample with nothing to compare): mean - t * s / sqrt(n). One sample, or
    confidence 0.5, gives the mean itself."""
    values = np.asarray(per_sample, dtype=np.float64)
    values = values[~np.isnan(values)]
    if not len(values):
        return math.nan
    mean = float(values.mean())
    if confidence <= 0.5 or len(values) < 2:
        return mean
    spread = float(values.std(ddof=1)) / math.sqrt(len(values))
    return mean - student_t_quantile(confidence, len(values) - 1) * spread


@dataclass
class Search:
    """The search's bookkeeping: scores are memoized by configuration, and asked for in
    batches so the workers stay busy."""

    scorer: Scorer
    float_mode: str
    target: float
    mode: str = "INT8"
    progress: Callable[[int], None] = lambda n: None
    confidence: float = DEFAULT_CONFIDENCE
    cache: dict[Config, float] = field(default_factory=dict)  # the score: the bound
    per_sample: dict[Config, tuple[float, ...]] = field(default_factory=dict)

    def scores(self, configs: Iterable[Config]) -> list[float]:
        configs = list(configs)
        missing = list(dict.fromkeys(c for c in configs if c not in self.cache))
        if missing:
            for config, per_sample in zip(missing, self.scorer(missing), strict=True):
                self.cache[config] = lower_bound(per_sample, self.confidence)
                self.per_sample[config] = tuple(per_sample)
        return [self.cache[c] for c in configs]

    def floated(self, ops: Iterable[Candidate], anchor: Config | None = None) -> Config:
        return Config.of(self.mode, {c.name: self.float_mode for c in ops}, anchor)

    def score_of(self, ops: Iterable[Candidate]) -> float:
        return self.scores([self.floated(ops)])[0]

    def mean(self, config: Config) -> float:
        """A scored configuration's plain mean over the samples (the bound at confidence 0.5)."""
        return lower_bound(self.per_sample[config], 0.5)

    def reached(self, config: Config) -> str:
        """A scored configuration's score for an error message, with its mean beside a bound."""
        if self.confidence <= 0.5:
            return f"{self.cache[config]:.6f}"
        return f"{self.cache[config]:.6f} (lower {self.confidence:.0%} bound; mean {self.mean(config):.6f})"

    @property
    def lower(self) -> str:
        """The flags that lower the bar, for an error message."""
        return "--target-cosine or --confidence" if self.confidence > 0.5 else "--target-cosine"


def run_search(
    ops: list[Candidate], scorer: Scorer, float_mode: str, target: float,
    max_float_ops: int | None = None, progress: Callable[[str, int], Callable[[int], None]] | None = None,
    before_sensitivity: Callable[[float, float], None] | None = None, mode: str = "INT8",
    sensitivity_when_met: bool = True, confidence: float = DEFAULT_CONFIDENCE, min_conv_share: float | None = None,
) -> SearchResult:
    """Sensitivity, ranking, binary search and pruning (the module docstring) of the ops of a
    model deployed in `mode`; raises TargetNotMet when no allowed set of ops in `float_mode`
    reaches `target`. Without `sensitivity_when_met`, a model that meets the target with
    every op in `mode` returns at once, with no sensitivities. With `min_conv_share`, at least
    that share of the convolutions (conv, deconv, matmul) stays in `mode`: only the most
    sensitive of them may leave it, any other op may."""
    search = Search(scorer, float_mode, target, mode, confidence=confidence)
    all_mode, all_float = search.scores([Config(mode), Config(float_mode)])
    total_macs = sum(c.macs for c in ops)
    if all_float < target:
        raise TargetNotMet(
            f"the target cosine {target} cannot be met even with every op in {float_mode}: the best "
            f"reached is {search.reached(Config(float_mode))}; lower {search.lower} or choose a more precise "
            "--float-mode",
            all_float,
        )
    if all_mode >= target and not sensitivity_when_met:
        base = search.per_sample[Config(mode)]
        return SearchResult(mode, [], [], all_mode, all_mode, all_float, total_macs, len(search.cache),
                            search.mean(Config(mode)), base, base)
    if before_sensitivity is not None:
        before_sensitivity(all_mode, all_float)
    configs = [Config.of(float_mode, {c.name: mode}) for c in ops] + [search.floated([c]) for c in ops]
    if progress is not None:
        search.scorer = _with_progress(scorer, progress("sensitivity", len(configs)))
    values = search.scores(configs)
    sensitivities = [Sensitivity(c, values[i], values[len(ops) + i]) for i, c in enumerate(ops)]
    sensitivities.sort(key=lambda s: (s.mode_alone, -s.float_alone, s.candidate.name))
    ranked = [s.candidate for s in sensitivities]
    if progress is not None:
        search.scorer = _with_progress(scorer, progress("search", 0))
    everything = f"every {mode} op"
    if min_conv_share is not None:
        convs = sum(1 for c in ops if c.is_conv)
        allowed = math.floor(convs * (1 - min_conv_share) + 1e-9)
        ranked = _within_conv_limit(ranked, allowed)
        everything = (f"every {mode} op but the {convs - allowed} least sensitive of {convs} convolutions "
                      f"(--min-conv-share {min_conv_share})")
    chosen: list[Candidate] = []
    if all_mode < target:
        limit = len(ranked) if max_float_ops is None else min(max_float_ops, len(ranked))
        chosen = _shortest_prefix(search, ranked, limit, everything)
        chosen = _prune(search, chosen)
    score = search.score_of(chosen)
    table = search.floated(chosen)
    return SearchResult(mode, sensitivities, chosen, score, all_mode, all_float, total_macs, len(search.cache),
                        search.mean(table), search.per_sample[table], search.per_sample[Config(mode)])


def search_qtable(
    mlir_path: str | Path, table_path: str | Path | None, chip: str, sample_paths: Sequence[str | Path],
    target: float, float_mode: str, *, max_float_ops: int | None = None, asymmetric: bool = False,
    jobs: int = 1, cluster: str | None = None, module=None,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
    before_sensitivity: Callable[[float, float], None] | None = None, mode: str = "INT8",
    sensitivity_when_met: bool = True, confidence: float = DEFAULT_CONFIDENCE, min_conv_share: float | None = None,
) -> SearchResult:
    """The whole search on the module at `mlir_path` (parsed already: `module`), its runs on
    `jobs` processes or a Ray `cluster`; raises TargetNotMet."""
    ops = candidates(module if module is not None else read_module(Path(mlir_path)), chip)
    if not ops:
        raise SearchError(f"{mlir_path}: has no op that INT8 computes (only data movement); nothing to search")
    args = _evaluator_args(mlir_path, table_path, chip, sample_paths, asymmetric)
    with workers(Evaluator, args, jobs, cluster) as pool:
        def scorer(configs: list[Config]) -> list[tuple[float, ...]]:
            return pool.map("score", configs)

        return run_search(ops, scorer, float_mode, target, max_float_ops, progress, before_sensitivity, mode,
                          sensitivity_when_met, confidence, min_conv_share)


# -- the samples a search runs on ------------------------------------------------------------

# Samples per ranking task: the tasks, and so the ranking, are the same for any number of workers.
RANK_CHUNK = 4


@dataclass(frozen=True)
class Ranking:
    """The samples of a pool ranked by their cosine with every op in the searched mode
    (NaN: nothing to compare), and the `chosen` ones, the hardest, in the pool's order."""

    cosines: tuple[float, ...]
    chosen: tuple[int, ...]

    def mean(self, indices: Iterable[int] | None = None) -> float:
        picked = self.cosines if indices is None else [self.cosines[i] for i in indices]
        return lower_bound(picked, 0.5)


def hardest_samples(
    mlir_path: str | Path, table_path: str | Path | None, chip: str, sample_paths: Sequence[str | Path], count: int,
    mode: str, *, asymmetric: bool = False, jobs: int = 1, cluster: str | None = None,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
) -> Ranking:
    """The `count` samples of `sample_paths` where the model with every op in `mode` is
    furthest from TOP (F32), its final-output cosine the lowest (the lowest over the outputs
    that say something, as the search scores them; samples with nothing to compare come
    last). A table searched on them holds beyond its samples better than one searched on
    samples the mode already gets right (docs/quantization.md)."""
    paths = [str(p) for p in sample_paths]
    tasks = [(mode, paths[i:i + RANK_CHUNK]) for i in range(0, len(paths), RANK_CHUNK)]
    advance = progress("rank samples", len(paths)) if progress is not None else None
    found: list[dict[str, tuple[float, float]]] = []
    with workers(Evaluator, _evaluator_args(mlir_path, table_path, chip, [], asymmetric), jobs, cluster) as pool:
        batch = max(1, 2 * jobs)
        for start in range(0, len(tasks), batch):
            part = tasks[start:start + batch]
            found += [sample for chunk in pool.map("base_outputs", part) for sample in chunk]
            if advance is not None:
                advance(sum(len(chunk) for _, chunk in part))
    informative = _informative([{name: norm for name, (norm, _) in sample.items()} for sample in found])
    cosines = tuple(min((sample[name][1] for name in names), default=math.nan)
                    for sample, names in zip(found, informative, strict=True))
    order = sorted(range(len(cosines)),
                   key=lambda i: (math.isnan(cosines[i]), 0.0 if math.isnan(cosines[i]) else cosines[i], i))
    return Ranking(cosines, tuple(sorted(order[:count])))


@dataclass(frozen=True)
class HeldOut:
    """A table run on samples the search did not see (`check_table`): the cosine on each
    (NaN: nothing to compare), with the table and with every op in the searched mode."""

    samples: tuple[float, ...]
    mode_samples: tuple[float, ...]

    @property
    def count(self) -> int:
        return sum(1 for c in self.samples if not math.isnan(c))

    @property
    def mean(self) -> float:
        return lower_bound(self.samples, 0.5)  # the plain mean of the samples with something to compare

    @property
    def mode_mean(self) -> float:
        return lower_bound(self.mode_samples, 0.5)


def check_table(
    mlir_path: str | Path, table_path: str | Path | None, chip: str, sample_paths: Sequence[str | Path],
    result: SearchResult, float_mode: str, *, asymmetric: bool = False, jobs: int = 1, cluster: str | None = None,
) -> HeldOut:
    """The chosen table, and every op in the searched mode, run on `sample_paths` (samples
    the search did not see): how far the table holds beyond its samples."""
    configs = [Config.of(result.mode, {c.name: float_mode for c in result.float_ops}), Config(result.mode)]
    args = _evaluator_args(mlir_path, table_path, chip, sample_paths, asymmetric)
    with workers(Evaluator, args, jobs, cluster) as pool:
        table, base = pool.map("score", configs)
    return HeldOut(tuple(table), tuple(base))


def _evaluator_args(mlir_path: str | Path, table_path: str | Path | None, chip: str,
                    sample_paths: Sequence[str | Path], asymmetric: bool) -> tuple:
    """`Evaluator`'s arguments, as strings a worker process or Ray actor can take."""
    return (str(mlir_path), None if table_path is None else str(table_path), chip, [str(p) for p in sample_paths],
            asymmetric)


def _with_progress(scorer: Scorer, advance: Callable[[int], None]) -> Scorer:
    def scored(configs: list[Config]) -> list[tuple[float, ...]]:
        result = scorer(configs)
        advance(len(configs))
        return result

    return scored


def _within_conv_limit(ranked: list[Candidate], limit: int) -> list[Candidate]:
    """The ranking less the convolutions (conv, deconv, matmul) after its first `limit`."""
    kept, convs = [], 0
    for candidate in ranked:
        if candidate.is_conv:
            convs += 1
            if convs > limit:
                continue
        kept.append(candidate)
    return kept


def _shortest_prefix(search: Search, ranked: list[Candidate], limit: int, everything: str) -> list[Candidate]:
    """A short ranked[:k], k <= limit, that meets the target: a binary search between a
    prefix that misses it and one that meets it, so the answer always meets it. Where the
    scores along the ranking are not monotone (ops that hurt only together) the prefix may
    be longer than the shortest; pruning then puts back what it does not need."""
    if limit == 0 or search.score_of(ranked[:limit]) < search.target:
        floated = search.floated(ranked[:limit])
        best = search.scores([floated])[0]
        if limit < len(ranked):
            raise TargetNotMet(
                f"the target cosine {search.target} needs more than {limit} op(s) in {search.float_mode}: "
                f"the {limit} most sensitive reach {search.reached(floated)}; raise --max-float-ops or lower "
                f"{search.lower}",
                best,
                tuple(ranked[:limit]),
            )
        raise TargetNotMet(
            f"the target cosine {search.target} cannot be met with {everything} in {search.float_mode}: "
            f"the best reached is {search.reached(floated)}; lower {search.lower}",
            best,
            tuple(ranked[:limit]),
        )
    low, high = 0, limit  # ranked[:low] misses the target, ranked[:high] meets it
    while high - low > 1:
        middle = (low + high) // 2
        if search.score_of(ranked[:middle]) >= search.target:
            high = middle
        else:
            low = middle
    return ranked[:high]


def _prune(search: Search, chosen: list[Candidate]) -> list[Candidate]:
    """Drop the chosen ops, least sensitive first, whose removal keeps the target.

    Ops are tried in runs of `block`: after a run drops, the next run is twice as long; after
    one fails, a quarter as long (the half it also tried failed, or holds what failed), down to
    one op. Where the prefix holds mostly needed ops every trial is of one op, where it holds
    mostly needless ones (scores that are not monotone along the ranking make the binary
    search keep a long prefix) a run of k drops costs about log2(k) trials instead of k.
    Each round asks for two trials for the workers: a run and its first half, or, one op at
    a time, an op and the next (as if the first fails). Where dropping ops never raises the
    score, the decisions are those of dropping one op at a time. Every trial names the kept
    set as its anchor, so a worker computes again only what follows the ops it puts back
    into the mode."""
    kept = list(chosen)
    order = list(reversed(chosen))
    i, block = 0, 1

    def without(ops: Sequence[Candidate]) -> list[Candidate]:
        return [c for c in kept if c not in ops]

    while i < len(order):
        anchor = search.floated(kept)
        if block == 1:
            trials = [without([op]) for op in order[i:i + 2]]
        else:
            run = order[i:i + block]
            trials = [without(run), without(run[:max(1, len(run) // 2)])]
        configs = [search.floated(t, anchor) for t in trials]
        passed = [score >= search.target for score in search.scores(configs)]
        dropped = [len(kept) - len(t) for t in trials]
        if passed[0]:
            kept, i, block = trials[0], i + dropped[0], max(2, 2 * block)
        elif len(trials) > 1 and passed[1] and block > 1:
            kept, i, block = trials[1], i + dropped[1], max(1, block // 4)
        elif len(trials) > 1 and passed[1]:  # one at a time: the second trial kept the first op
            kept, i, block = trials[1], i + 2, 2
        else:
            i, block = (i + 2, 1) if block == 1 else (i, max(1, block // 4))
    return kept


# -- the table ------------------------------------------------------------------------------


def format_qtable(result: SearchResult, model: str, chip: str, target: float, samples: int,
                  float_mode: str, confidence: float = DEFAULT_CONFIDENCE, held_out: HeldOut | None = None,
                  chosen_from: int | None = None) -> str:
    """TPU-MLIR's quantize-table format ('op_name MODE' lines) under a comment header (with
    `held_out`, what the table reads on samples the search did not see; with `chosen_from`,
    the pool its samples are the hardest of)."""
    share = result.float_macs / result.total_macs if result.total_macs else 0.0
    measure = ("mean" if confidence <= 0.5 else
               f"lower {confidence:.0%} confidence bound of the mean")
    lines = [
        f"# quantize table for {model} on {chip}, written by tpu-xdsl search-qtable",
        f"# target cosine {target}: {measure} over {samples} samples of the final-output cosine against TOP (F32)",
        (f"# achieved cosine {result.score:.6f}, mean {result.mean:.6f} (every op {result.mode}: "
         f"{result.all_mode:.6f}; every op {float_mode}: {result.all_float:.6f})"),
        f"# float ops: {len(result.float_ops)} in {float_mode}; MACs in float: {share:.2%}",
    ]
    if chosen_from is not None:
        lines.insert(2, f"# samples: the {samples} of {chosen_from} where every op {result.mode} does worst")
    if held_out is not None:
        lines.append(f"# held out: mean {held_out.mean:.6f} over {held_out.count} samples the search did not see "
                     f"(every op {result.mode}: {held_out.mode_mean:.6f})")
    lines.append("# op_name mode")
    lines += [f"{c.name} {float_mode}" for c in result.float_ops]
    return "\n".join(lines) + "\n"


def format_worst_samples(result: SearchResult, names: Sequence[str], count: int = 3) -> list[str]:
    """The `count` samples the chosen table holds worst on, with their cosine when every op
    is in the searched mode: the inputs to look at when the table does not hold elsewhere."""
    scored = [(cos, name, base) for cos, name, base in zip(result.samples, names, result.mode_samples, strict=True)
              if not math.isnan(cos)]
    if not scored:
        return []
    width = max(len(name) for _, name, _ in scored)
    every = f"every op {result.mode}"
    rows = [f"{'worst samples':<{width}}  {'with the table':>14}  {every:>15}"]
    for cos, name, base in sorted(scored)[:count]:
        rows.append(f"{name:<{width}}  {cos:14.6f}  {base:15.6f}")
    return rows


def format_sensitivity(result: SearchResult) -> list[str]:
    """The sensitivity table, worst first, with each op's share of the MACs."""
    width = max([len(s.candidate.name) for s in result.sensitivities] + [2])
    alone = f"{result.mode} alone"
    rows = [f"{'op':<{width}}  {'type':<14} {'MACs %':>7} {alone:>11} {'float alone':>12}  float"]
    chosen = {c.name for c in result.float_ops}
    for s in result.sensitivities:
        share = s.candidate.macs / result.total_macs if result.total_macs else 0.0
        rows.append(
            f"{s.candidate.name:<{width}}  {s.candidate.kind:<14} {share:7.2%} {s.mode_alone:11.6f} "
            f"{s.float_alone:12.6f}  {'yes' if s.candidate.name in chosen else ''}"
        )
    return rows
