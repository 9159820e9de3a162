"""Bias correction (`calibrate --bc`): fold the mean error of each INT8 conv or matmul back
into its float bias (Nagel et al. 2019, "Data-Free Quantization", section 4.2, measured
on samples as AIMET's empirical bias correction and TPU-MLIR's `--bc` do).

Rounding the weights (and clipping inputs at their thresholds) makes an INT8 conv's
output off by an amount whose mean over the data is not zero: E[y_int8 - y] =
E[(W_q - W) x] + ... per output channel. The next layers read that shift as signal.
Subtracting it from the bias removes it.

Each op's own error is measured, not the error it inherits: the TOP module is lowered
to INT8 with the table and the quantization scheme deploy will use, and every INT8
`tpu.conv` / `tpu.matmul` is run alone on TOP's float input quantized as the op reads
it; its dequantized output is compared with TOP's output of the same tensor. Errors
measured this way add up as the corrections do (each corrects its own), where
errors measured through a whole INT8 run would correct every upstream shift again in
each downstream op.

Only positions whose float output is well inside the linear part of the op count: a
fused ReLU that clips (output 0, or the ReLU6 limit) and the quantizer's saturation hide
the error there, and the tail a threshold clips off is not a shift of the whole channel
(`_linear_mask`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import Interpreter
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.calibration.tune import cosine
from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.dialects.quant_types import qparams_of
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.interp.runner import ModuleRunner, TensorCapture
from tpu_xdsl.transforms.import_calibration import import_calibration
from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu
from tpu_xdsl.weights import (
    attach_weights,
    create_weight,
    is_weight,
    weight_name,
    weights_of,
)

# A mean over fewer samples mostly measures those samples.
MIN_SAMPLES = 4
# Samples the corrected INT8 model is checked on against the uncorrected one.
CHECK_SAMPLES = 8
CORRECTED_OPS = {"top.conv": "tpu.conv", "top.matmul": "tpu.matmul"}
_CONVERSIONS = ("tpu.cast", "tpu.requant")


class BiasCorrectionError(TpuXdslError):
    """Bias correction cannot run on what it was given."""


@dataclass(frozen=True)
class Scheme:
    """The INT8 scheme deploy will use (the errors to correct depend on it)."""

    chip: str = "bm1684x"
    asymmetric: bool = False
    per_tensor_activations: bool = False


@dataclass
class Correction:
    name: str
    mean_shift: float  # mean |shift| over the op's channels, before correction
    largest: float  # largest |shift| of a channel


@dataclass
class CorrectionReport:
    corrected: list[Correction] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # ops measured on no linear position
    # the INT8 model's output cosine against float, with the original and the corrected biases
    cosine_before: float | None = None
    cosine_after: float | None = None
    kept_original: bool = False  # the corrected model was further from float: nothing applied

    def lines(self) -> list[str]:
        if self.kept_original:
            return [(f"note: --bc left the biases unchanged: corrected, the INT8 model's output cosine would "
                     f"fall from {self.cosine_before:.6f} to {self.cosine_after:.6f} on the samples")]
        if not self.corrected:
            return ["note: --bc found no INT8 conv or matmul with a weight to correct; the biases are unchanged"]
        worst = max(self.corrected, key=lambda c: c.largest)
        cosines = ("" if self.cosine_before is None else
                   f"; INT8 output cosine {self.cosine_before:.6f} -> {self.cosine_after:.6f}")
        return [(f"bias correction: {len(self.corrected)} conv/matmul bias(es) corrected; largest channel "
                f"shift {worst.largest:.4g} ({worst.name}){cosines}")]


class _ShiftSums:
    """Per op: sums of (float - int8) and counts per output channel over linear positions."""

    def __init__(self) -> None:
        self.sums: dict[str, np.ndarray] = {}
        self.counts: dict[str, np.ndarray] = {}

    def add(self, name: str, diff: np.ndarray, mask: np.ndarray, axis: int) -> None:
        axes = tuple(a for a in range(diff.ndim) if a != axis)
        s = np.where(mask, diff, 0.0).sum(axis=axes)
        c = mask.sum(axis=axes)
        if name in self.sums:
            self.sums[name] += s
            self.counts[name] += c
        else:
            self.sums[name], self.counts[name] = s.astype(np.float64), c.astype(np.int64)

    def shift(self, name: str) -> np.ndarray:
        return self.sums[name] / np.maximum(self.counts[name], 1)


def _linear_mask(op: Operation, reference: np.ndarray, actual: np.ndarray, codes: np.ndarray, qparams,
                 axis: int) -> np.ndarray:
    """Positions whose float value lies inside the op's linear range (above a fused
    ReLU's 0, below its limit, inside the quantizer's codes) by a margin of three
    standard deviations of the channel's error.

    The condition is on the float value only: selecting on the INT8 value too (both
    outputs positive) keeps the positions where the noise pushed the INT8 value up and
    drops those where it pushed it below zero, which reads noise as a shift (on a
    channel whose values sit near zero, often larger than the real one)."""
    low = qparams.dequantize(np.full_like(codes, qparams.qmin)).astype(np.float64)
    high = qparams.dequantize(np.full_like(codes, qparams.qmax)).astype(np.float64)
    if bool(_attr(op, "do_relu", 0)):
        low = np.maximum(low, 0.0)
        limit = float(_attr(op, "relu_limit", -1.0))
        if limit > 0:
            high = np.minimum(high, limit)
    inside = (reference > low) & (reference < high) & (actual > low) & (actual < high)
    axes = tuple(a for a in range(reference.ndim) if a != axis)
    diff = np.where(inside, reference - actual, 0.0)
    count = np.maximum(inside.sum(axis=axes, keepdims=True), 1)
    mean = diff.sum(axis=axes, keepdims=True) / count
    spread = np.sqrt(np.where(inside, (reference - actual - mean) ** 2, 0.0).sum(axis=axes, keepdims=True) / count)
    return (reference > low + 3 * spread) & (reference < high - 3 * spread)


def _attr(op: Operation, name: str, default):
    value = op.attributes.get(name)
    return default if value is None else value.value.data  # type: ignore[attr-defined]


def _top_name(value: SSAValue, top_names: set[str]) -> str | None:
    """The TOP tensor `value` stands for: its own name, or that of what a cast or
    requant converted."""
    while True:
        owner = value.owner
        if not isinstance(owner, Operation):
            return None
        names = tensor_names(owner)
        index = getattr(value, "index", 0)
        if index < len(names) and names[index] in top_names:
            return names[index]
        if owner.name not in _CONVERSIONS:
            return None
        value = owner.operands[0]


def _corrected_name(op: Operation, top_names: set[str]) -> str | None:
    """The TOP tensor an INT8 tpu op computes: its name, or (a model output, renamed for
    the cast back to float) the name of that cast."""
    names = tensor_names(op)
    if names and names[0] in top_names:
        return names[0]
    for use in op.results[0].uses:
        cast = tensor_names(use.operation) if use.operation.name == "tpu.cast" else []
        if cast and cast[0] in top_names:
            return cast[0]
    return None


def _is_constant(value: SSAValue) -> bool:
    owner = value.owner
    return isinstance(owner, Operation) and owner.name in ("top.weight", "top.none")


def lowered_int8(module: ModuleOp, table, scheme: Scheme) -> ModuleOp:
    """A copy of the TOP `module` lowered to INT8 with `table` (weights copied along)."""
    copy = module.clone()
    store = weights_of(module)
    attach_weights(copy, {name: store[name] for name in store})
    import_calibration(copy, table, "table")
    lower_top_to_tpu(copy, "INT8", chip_name=scheme.chip, asymmetric=scheme.asymmetric,
                     per_tensor_activations=scheme.per_tensor_activations)
    return copy


def measure_shifts(
    module: ModuleOp,
    table,
    samples: Sequence[Mapping[str, np.ndarray]],
    scheme: Scheme,
    progress: Callable[[int], None] = lambda n: None,
) -> dict[str, np.ndarray]:
    """TOP tensor name -> mean (float - int8) per output channel of each INT8 conv/matmul
    with a constant filter, each op run alone on TOP's quantized input."""
    top_ops = {tensor_names(op)[0]: op for op in main_func(module).body.block.ops
               if op.name in CORRECTED_OPS and tensor_names(op) and _is_constant(op.operands[1])}
    int8 = lowered_int8(module, table, scheme)
    int8_weights = weights_of(int8)
    top_runner = ModuleRunner(module, weights_of(module))
    int8_runner = ModuleRunner(int8, int8_weights)
    interpreter = Interpreter(int8)
    for functions in int8_runner.functions:
        interpreter.register_implementations(functions)
    top_names = set(top_ops) | {n for op in module.walk() for n in tensor_names(op)}
    targets = []  # (tpu op, TOP name, output qparams)
    for op in main_func(int8).body.block.ops:
        if op.name not in CORRECTED_OPS.values():
            continue
        out_qparams = qparams_of(op.results[0].type, int8_weights)
        name = _corrected_name(op, top_names)
        if out_qparams is None or name not in top_ops:
            continue  # a float fallback, or no constant filter in TOP
        targets.append((op, name, out_qparams))
    constants: dict[SSAValue, np.ndarray] = {}
    sums = _ShiftSums()
    for sample in samples:
        capture = TensorCapture()
        top_runner.run(sample, [capture])
        floats = capture.tensors
        for op, name, out_qparams in targets:
            args = []
            for operand in op.operands:
                if _is_constant(operand):
                    if operand not in constants:
                        constants[operand] = interpreter.run_op(operand.owner, ())[0]  # type: ignore[arg-type]
                    args.append(constants[operand])
                    continue
                source = _top_name(operand, top_names)
                in_qparams = qparams_of(operand.type, int8_weights)
                if source is None or source not in floats or in_qparams is None:
                    break
                args.append(in_qparams.quantize(floats[source]))
            else:
                codes = np.asarray(interpreter.run_op(op, tuple(args))[0])
                actual = out_qparams.dequantize(codes).astype(np.float64)
                reference = np.asarray(floats[name], np.float64)
                top_op = top_ops[name]
                axis = 1 if op.name == "tpu.conv" else reference.ndim - 1
                mask = _linear_mask(top_op, reference, actual, codes, out_qparams, axis)
                sums.add(name, reference - actual, mask, axis)
        progress(1)
    return {name: sums.shift(name) for name in sums.sums}


def correct_biases(module: ModuleOp, shifts: Mapping[str, np.ndarray]) -> CorrectionReport:
    """Add each op's mean shift to its bias (a zero bias is made for an op without one)."""
    weights = weights_of(module)
    report = CorrectionReport()
    for op in list(main_func(module).body.block.ops):
        names = tensor_names(op)
        if op.name not in CORRECTED_OPS or not names or names[0] not in shifts:
            continue
        shift = shifts[names[0]]
        if not np.any(shift):
            report.skipped.append(names[0])
            continue
        bias = op.operands[2]
        if is_weight(bias):
            entry = weight_name(bias.owner)  # type: ignore[arg-type]
            current = np.asarray(weights[entry], np.float64)
            if current.size != shift.size or sum(u.operation is not op for u in bias.uses):
                report.skipped.append(names[0])  # a bias broadcast otherwise, or shared
                continue
            weights[entry] = (current + shift.reshape(current.shape)).astype(np.float32)
        elif bias.owner.name == "top.none":  # type: ignore[union-attr]
            new = create_weight(module, f"{names[0]}_bias", shift.astype(np.float32), op)
            op.operands = [op.operands[0], op.operands[1], new, *op.operands[3:]]
        else:
            report.skipped.append(names[0])
            continue
        report.corrected.append(Correction(names[0], float(np.mean(np.abs(shift))), float(np.max(np.abs(shift)))))
    return report


def _copy(module: ModuleOp) -> ModuleOp:
    copy = module.clone()
    store = weights_of(module)
    attach_weights(copy, {name: store[name] for name in store})
    return copy


def _int8_cosine(module: ModuleOp, reference: ModuleOp, table, samples, scheme: Scheme) -> float:
    """Mean cosine of `module`'s INT8 outputs (lowered with `table`) against the float
    outputs of `reference` (the model before correction)."""
    float_runner = ModuleRunner(reference, weights_of(reference))
    int8 = lowered_int8(module, table, scheme)
    int8_runner = ModuleRunner(int8, weights_of(int8))
    return float(np.mean([
        cosine([np.asarray(v, np.float64) for v in int8_runner.run(s).values()], list(float_runner.run(s).values()))
        for s in samples
    ]))


def bias_correct(
    module: ModuleOp,
    table,
    samples: Sequence[Mapping[str, np.ndarray]],
    scheme: Scheme,
    progress: Callable[[int], None] = lambda n: None,
) -> CorrectionReport:
    """Measure and fold the mean shifts of `module`'s INT8 convs and matmuls into their
    biases (in place, in the module's weight table)."""
    if len(samples) < MIN_SAMPLES:
        raise BiasCorrectionError(
            f"--bc needs at least {MIN_SAMPLES} samples to measure mean shifts, got {len(samples)}; "
            "give more with --input-num (or --bc-num)"
        )
    shifts = measure_shifts(module, table, samples, scheme, progress)
    trial = _copy(module)
    report = correct_biases(trial, shifts)
    if not report.corrected:
        return report
    # Each op's correction is right for the op alone; whether they help the model together
    # is measured, as TPU-MLIR keeps a correction only if the output cosine does not drop.
    checked = list(samples[:CHECK_SAMPLES])
    report.cosine_before = _int8_cosine(module, module, table, checked, scheme)
    report.cosine_after = _int8_cosine(trial, module, table, checked, scheme)
    if report.cosine_after < report.cosine_before:
        report.kept_original = True
        return report
    applied = correct_biases(module, shifts)
    applied.cosine_before, applied.cosine_after = report.cosine_before, report.cosine_after
    return applied
