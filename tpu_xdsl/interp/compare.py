"""Compare tensors between stages: cosine, euclidean similarity, SQNR (TPU-MLIR's metrics).

euclidean similarity = 1 - ||a - b|| / ||(a + b) / 2||; SQNR = 10 log10(||a||^2 / ||a - b||^2)
with `a` the reference. Integer and bool tensors compare for equality.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tpu_xdsl.errors import TpuXdslError

# What each stage must reach against the one before it (shared by deploy and the inspection
# tools). Stricter than TPU-MLIR's public defaults (0.99,0.90 and 0.90,0.80).
DEFAULT_TOLERANCE = {"F32": "0.99,0.99", "F16": "0.99,0.95", "BF16": "0.99,0.95", "INT8": "0.95,0.85"}

# The device must reproduce the TPU interpreter: integer tensors bit for bit, float tensors
# to this cosine (they are equal as well: the float GEMM kernels sum in float64, so a
# slice rounds as the whole tensor does; kernels.tpu.SUMS_IN_FLOAT64).
DEVICE_FLOAT_COSINE = 0.99999

# A TOSA export run by IREE against the stage it was exported from, by mode. F32 is the
# same arithmetic in another order (the acceptance: cosine 0.99999 against
# onnxruntime). F16 and BF16 round in other places than the TPU interpreter. INT8 outputs
# are the real values of INT8 codes: equal with the TOSA-compatible rounding, and with the
# default rounding a few codes off by one (a tie rounds the other way).
TOSA_TOLERANCE = {"F32": "0.99999,0.999", "F16": "0.9999,0.99", "BF16": "0.9999,0.99", "INT8": "0.999,0.95"}

# Float tensors that differ by less than this everywhere: float32 keeps about 1e-7 of
# absolute accuracy in ops whose results are near 1 (onnxruntime's Sigmoid is off by up to
# 1.3e-7 on logits below -16, values ~1e-8), so when such a tensor fails, its similarities
# may measure that rounding. `summarize` says so; the verdict stays.
NEGLIGIBLE = 1e-6


@dataclass(frozen=True)
class Tolerance:
    cosine: float
    euclidean: float

    @staticmethod
    def parse(text: str, flag: str = "--tolerance") -> Tolerance:
        parts = text.split(",")
        try:
            values = [float(p) for p in parts]
        except ValueError:
            values = []
        if len(values) != 2 or not all(-1.0 <= v <= 1.0 for v in values):
            raise TpuXdslError(
                f"{flag} {text!r}: give two numbers in [-1, 1], cosine then euclidean, e.g. 0.99,0.99"
            )
        return Tolerance(values[0], values[1])


@dataclass(frozen=True)
class TensorComparison:
    name: str
    shape: tuple[int, ...]
    dtype: str
    cosine: float
    euclidean: float
    sqnr_db: float
    max_abs_diff: float
    exact: bool | None  # for integer tensors: equal or not; None for floats
    problem: str | None = None  # shape or dtype mismatch
    largest: float = math.nan  # the largest magnitude of a finite value in either tensor

    def passes(self, tol: Tolerance) -> bool:
        if self.problem is not None:
            return False
        if self.exact is not None:
            return self.exact
        return self.cosine >= tol.cosine and self.euclidean >= tol.euclidean


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def _numeric(dtype: np.dtype) -> bool:
    """Numbers numpy can turn into float64 (bfloat16 and the float8s of ml_dtypes are kind V;
    raw records, numpy's own kind V, are not numbers)."""
    return dtype.kind in "biuf" or (dtype.kind == "V" and dtype.type is not np.void and dtype.itemsize <= 2)


def compare_tensors(name: str, reference: np.ndarray, actual: np.ndarray) -> TensorComparison:
    reference, actual = np.asarray(reference), np.asarray(actual)
    shape = tuple(reference.shape)
    if reference.shape != actual.shape:
        if _squeezed(reference.shape) == _squeezed(actual.shape):  # [1, 5] against [5]: the same values
            actual = actual.reshape(reference.shape)
        else:
            return TensorComparison(name, shape, str(reference.dtype), math.nan, math.nan, math.nan, math.nan, None,
                                    f"shape {list(actual.shape)} vs reference {list(reference.shape)}")
    if not (_numeric(reference.dtype) and _numeric(actual.dtype)):
        # Strings or objects: equal or not, no metric.
        if reference.dtype.kind == actual.dtype.kind and np.array_equal(reference, actual):
            return TensorComparison(name, shape, str(reference.dtype), 1.0, 1.0, math.inf, 0.0, True)
        return TensorComparison(name, shape, str(reference.dtype), math.nan, math.nan, math.nan, math.nan, None,
                                f"{actual.dtype} vs reference {reference.dtype}: not numbers, and not equal")
    integer = reference.dtype.kind in "iub" and actual.dtype.kind in "iub"
    a = reference.astype(np.float64).ravel()
    b = actual.astype(np.float64).ravel()
    finite_a, finite_b = np.isfinite(a), np.isfinite(b)
    if not (finite_a.all() and finite_b.all()):
        if not (np.array_equal(finite_a, finite_b)
                and np.array_equal(a[~finite_a], b[~finite_b], equal_nan=True)):
            # An overflow (F16 past 65504) or a NaN: no metric means anything, say where.
            count = int(np.count_nonzero(~finite_a)), int(np.count_nonzero(~finite_b))
            return TensorComparison(name, shape, str(reference.dtype), math.nan, math.nan, math.nan, math.nan, None,
                                    f"non-finite values: {count[1]} (inf/nan) vs {count[0]} in the reference")
        # The same infinities and NaNs in the same places (an attention mask's -inf): compare the rest.
        a, b = a[finite_a], b[finite_a]
    exact = bool(np.array_equal(a, b)) if integer else None
    with np.errstate(over="ignore"):
        diff = a - b
    max_abs = float(np.max(np.abs(diff))) if diff.size else 0.0
    # The metrics are ratios: values past 1e150 (whose squares overflow) are compared scaled,
    # each vector by its own largest value for the cosine, both by the larger for the rest.
    largest_a, largest_b = (float(np.max(np.abs(v))) if v.size else 0.0 for v in (a, b))
    unit_a, unit_b = a, b
    if max(largest_a, largest_b) > 1e150:
        unit_a, unit_b = (v / largest if largest else v for v, largest in ((a, largest_a), (b, largest_b)))
        scale = max(largest_a, largest_b)
        a, b = a / scale, b / scale
        diff = a - b
    norm_a, norm_d = float(np.linalg.norm(a)), float(np.linalg.norm(diff))
    unit_norm_a, unit_norm_b = float(np.linalg.norm(unit_a)), float(np.linalg.norm(unit_b))
    if unit_norm_a == 0.0 and unit_norm_b == 0.0:
        cosine = 1.0
    elif unit_norm_a == 0.0 or unit_norm_b == 0.0:
        cosine = 0.0
    else:
        cosine = float(np.dot(unit_a, unit_b) / (unit_norm_a * unit_norm_b))
    mean_norm = float(np.linalg.norm((a + b) / 2))
    euclidean = 1.0 if norm_d == 0.0 else (1.0 - norm_d / mean_norm if mean_norm > 0 else 0.0)
    sqnr = math.inf if norm_d == 0.0 else (20 * math.log10(norm_a / norm_d) if norm_a > 0 else -math.inf)
    return TensorComparison(name, shape, str(reference.dtype), cosine, euclidean, sqnr, max_abs, exact,
                            largest=max(largest_a, largest_b))


def compare_all(reference: Mapping[str, np.ndarray], actual: Mapping[str, np.ndarray]) -> list[TensorComparison]:
    """Compare every tensor name present in both, in the order of `actual` (execution order)."""
    return [compare_tensors(name, reference[name], actual[name]) for name in actual if name in reference]


def format_table(rows: list[TensorComparison], tol: Tolerance, title: str) -> str:
    lines = [title, f"{'tensor':<40} {'shape':<18} {'cosine':>9} {'euclid':>9} {'sqnr dB':>8} {'max|d|':>10}  ok"]
    for r in rows:
        shape = "x".join(map(str, r.shape)) or "scalar"
        if r.problem:
            lines.append(f"{r.name[:40]:<40} {shape[:18]:<18} {r.problem}  FAIL")
            continue
        mark = "ok" if r.passes(tol) else "FAIL"
        sqnr = "inf" if math.isinf(r.sqnr_db) and r.sqnr_db > 0 else f"{r.sqnr_db:8.2f}"
        lines.append(
            f"{r.name[:40]:<40} {shape[:18]:<18} {r.cosine:9.6f} "
            f"{r.euclidean:9.6f} {sqnr:>8} {r.max_abs_diff:10.3g}  {mark}"
        )
    return "\n".join(lines)


def summarize(rows: list[TensorComparison], tol: Tolerance) -> tuple[bool, str]:
    if not rows:
        return False, "no tensor names in common: nothing was compared"
    failing = [r for r in rows if not r.passes(tol)]
    floats = [r for r in rows if r.exact is None and r.problem is None]
    min_cos = min((r.cosine for r in floats), default=1.0)
    min_euc = min((r.euclidean for r in floats), default=1.0)
    head = (
        f"{len(rows)} tensors compared; min cosine {min_cos:.6f}, min euclidean {min_euc:.6f} "
        f"(tolerance {tol.cosine}, {tol.euclidean})"
    )
    if failing:
        return False, f"{head}; {len(failing)} below tolerance, first: {failing[0].name}" + _negligible_note(failing)
    return True, f"{head}; all pass"


def _negligible_note(failing: list[TensorComparison]) -> str:
    """A second line naming the failing float tensors that differ by less than NEGLIGIBLE."""
    tiny = [r for r in failing if r.exact is None and r.problem is None and r.max_abs_diff < NEGLIGIBLE]
    if not tiny:
        return ""
    names = ", ".join(f"{r.name} (largest value {r.largest:.2g})" for r in tiny[:3])
    more = f" and {len(tiny) - 3} more" if len(tiny) > 3 else ""
    return (
        f"\nnote: {names}{more} differ by less than {NEGLIGIBLE:g} everywhere: at that size the similarities "
        "can measure float rounding (~1e-7 in ops whose results are near 1) more than the model; compare on an "
        "input that gives larger outputs (for a detector, one showing what it detects)"
    )
