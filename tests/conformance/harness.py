"""Run one ONNX backend test case through TpuXdslBackend and compare like ONNX's runner."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from tpu_xdsl.onnx_backend import TpuXdslBackend


def to_array(value):
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return value


def run_case(model: onnx.ModelProto, data_sets, rtol: float, atol: float) -> None:
    """Prepare once, run every data set, assert outputs match in count, dtype and value."""
    for inputs, expected in data_sets:
        arrays = [to_array(x) for x in inputs]
        rep = TpuXdslBackend.prepare(model, input_shapes=[np.shape(a) for a in arrays])
        outputs = rep.run(arrays)
        expected = [to_array(x) for x in expected]
        assert len(outputs) == len(expected), f"{len(outputs)} outputs, expected {len(expected)}"
        for i, (got, want) in enumerate(zip(outputs, expected)):
            got, want = np.asarray(got), np.asarray(want)
            assert got.dtype == want.dtype, f"output {i}: dtype {got.dtype}, expected {want.dtype}"
            assert got.shape == want.shape, f"output {i}: shape {got.shape}, expected {want.shape}"
            if want.dtype.kind in "fc":
                np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"output {i}")
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"output {i}")
