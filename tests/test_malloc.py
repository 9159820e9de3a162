"""Freed memory kept for reuse (`kernels.malloc`): once a runner exists, kernel temporaries
of a few hundred kilobytes no longer fault their pages in on every call."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# A run of two fresh half-megabyte temporaries, partly written, as `int8_sums` requantizes:
# glibc's default thresholds hand them fresh pages (about 120 faults a call).
_FAULTS = textwrap.dedent("""
    import resource, sys
    import numpy as np
    if sys.argv[1] == "runner":
        from tpu_xdsl.interp.runner import ModuleRunner
        from tpu_xdsl.frontend.onnx_importer import import_onnx
        from onnx import helper, TensorProto
        graph = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
        result = import_onnx(helper.make_model(graph), "relu", [[1, 4]])
        ModuleRunner(result.module, result.weights)
    source = np.ones(38400)
    def temporaries():
        a, b = np.empty(65472), np.empty(65472)
        a[:38400] = source
        b[:38400] = source
    for _ in range(5):
        temporaries()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(50):
        temporaries()
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 50)
""")


def _faults_per_call(setup: str) -> float:
    out = subprocess.run([sys.executable, "-c", _FAULTS, setup], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's (Linux)")
def test_a_runner_keeps_freed_memory_for_the_next_temporaries():
    assert _faults_per_call("plain") > 40  # glibc's defaults: the pages come back fresh
    assert _faults_per_call("runner") < 2
