"""F.normalize in F16: x / max(||x||, 1e-12). 1e-12 rounds to 0 in f16, so a zero row
(swin_v2's attention on a window's padding) divided 0 by 0 and the model's output was NaN
(torchvision swin_v2_t); the clip's bound is kept at f16's smallest nonzero value."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from tests.test_codegen import compile_and_compare, float_lowered, ints, model_of, node
from tests.test_int8 import init
from tpu_xdsl.interp.runner import ModuleRunner
from tpu_xdsl.weights import weights_of

NORMALIZE = model_of(
    [node("ReduceL2", ["x"], ["n"], axes=[-1], keepdims=1), node("Clip", ["n", "eps"], ["c"]),
     node("Expand", ["c", "shape"], ["e"]), node("Div", ["x", "e"], ["y"])],
    [("x", [1, 4, 8, 16])], "y",
    [init("eps", np.array(1e-12, np.float32)), ints("shape", [1, 4, 8, 16])], opset=13,
)


def feeds() -> dict[str, np.ndarray]:
    x = np.random.default_rng(3).standard_normal((1, 4, 8, 16)).astype(np.float32)
    x[:, :, 5:] = 0  # padded rows
    return {"x": x}


@pytest.mark.parametrize(("mode", "chip"), [("F16", "bm1684x"), ("BF16", "cv183x")])
def test_normalize_of_zero_rows_is_zero(mode, chip):
    x = feeds()
    (want,) = ort.InferenceSession(NORMALIZE.SerializeToString()).run(None, x)
    tpu, _ = float_lowered(NORMALIZE, mode, chip)
    got = ModuleRunner(tpu, weights_of(tpu)).run(x)
    (y,) = [np.asarray(v, np.float32) for v in got.values()]
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, want, atol=1e-2)
    compile_and_compare(tpu, x)
