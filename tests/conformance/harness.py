"""Run one ONNX backend test case through TpuXdslBackend and compare like ONNX's runner."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from tpu_xdsl.onnx_backend import TpuXdslBackend

try:
    import ml_dtypes

    _BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency
    _BFLOAT16 = None


def to_array(value):
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return value


# Inputs that decide a result's shape, by op type and input index. TOP shapes are
# static, so when a test feeds these at run time they are bound as constants
# (a static-shape compiler needs them at compile time, as TPU-MLIR does).
SHAPE_INPUTS: dict[str, set[int]] = {
    "Reshape": {1}, "Expand": {1}, "Tile": {1}, "Slice": {1, 2, 3, 4}, "Pad": {1, 3},
    "Resize": {1, 2, 3}, "Upsample": {1}, "Split": {1}, "Squeeze": {1}, "Unsqueeze": {1},
    "TopK": {1}, "ConstantOfShape": {0}, "Range": {0, 1, 2}, "OneHot": {1}, "CenterCropPad": {1},
    "ReduceMean": {1}, "ReduceSum": {1}, "ReduceMax": {1}, "ReduceMin": {1}, "ReduceProd": {1},
    "ReduceL1": {1}, "ReduceL2": {1}, "ReduceLogSum": {1}, "ReduceLogSumExp": {1},
    "ReduceSumSquare": {1}, "Trilu": {1}, "Compress": {1},
    # Quantization parameters (scales, zero points): fixed-point code is made for them.
    "QuantizeLinear": {1, 2}, "DequantizeLinear": {1, 2}, "ConvInteger": {2, 3}, "MatMulInteger": {2, 3},
    "QLinearConv": {1, 2, 4, 5, 6, 7}, "QLinearMatMul": {1, 2, 4, 5, 6, 7},
}


def shape_input_names(model: onnx.ModelProto) -> set[str]:
    names = set()
    for node in model.graph.node:
        for index in SHAPE_INPUTS.get(node.op_type, ()):
            if index < len(node.input) and node.input[index]:
                names.add(node.input[index])
    return names


def _prepare(model: onnx.ModelProto, input_names: list[str], arrays: list, constants: dict):
    """Prepare with `constants` bound; when the import names further inputs that decide a
    shape or a loop's trip count (a function's expansion of Range or AffineGrid), bind
    those from the case's data too, as the non-expanded op's shape inputs are."""
    from tpu_xdsl.frontend.onnx_model import NeedsConstantError

    given = dict(zip(input_names, arrays))
    while True:
        fed = [a for n, a in zip(input_names, arrays) if n not in constants]
        try:
            return TpuXdslBackend.prepare(model, input_shapes=[np.shape(a) for a in fed], constant_inputs=constants)
        except NeedsConstantError as e:
            missing = [n for n in e.inputs if n in given and n not in constants]
            # Binding every input would fold the whole case into the reference's result.
            if not missing or set(given) <= {*constants, *missing}:
                raise
            constants = {**constants, **{n: given[n] for n in missing}}


def run_case(model: onnx.ModelProto, data_sets, rtol: float, atol: float) -> None:
    """Prepare per data set, run, assert outputs match in count, dtype and value."""
    from tpu_xdsl.frontend.constant_inputs import steering_only_inputs
    from tpu_xdsl.frontend.onnx_model import model_inputs

    input_names = [v.name for v in model_inputs(model)]
    shape_inputs = shape_input_names(model)
    # Inputs that only steer shapes or branches further in (a function's expansion, a
    # Loop's trip count) are bound too, as `transform` binds them from the test input,
    # unless nothing would be left to feed (an If on its only input runs as a select).
    steering = steering_only_inputs(model) - shape_inputs
    if set(input_names) <= shape_inputs | steering:
        steering = set()
    for inputs, expected in data_sets:
        arrays = [to_array(x) for x in inputs]
        constants = {n: a for n, a in zip(input_names, arrays) if n in shape_inputs | steering}
        rep = _prepare(model, input_names, arrays, constants)
        outputs = rep.run(arrays)
        expected = [to_array(x) for x in expected]
        assert len(outputs) == len(expected), f"{len(outputs)} outputs, expected {len(expected)}"
        for i, (got, want) in enumerate(zip(outputs, expected)):
            got, want = np.asarray(got), np.asarray(want)
            assert got.dtype == want.dtype, f"output {i}: dtype {got.dtype}, expected {want.dtype}"
            assert got.shape == want.shape, f"output {i}: shape {got.shape}, expected {want.shape}"
            if want.dtype.kind in "fc" or want.dtype == _BFLOAT16:
                # bfloat16 (numpy kind 'V') compares as the floats it holds, NaN equal to NaN.
                np.testing.assert_allclose(
                    got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                    equal_nan=True, err_msg=f"output {i}",
                )
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"output {i}")
