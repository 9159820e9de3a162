"""ONNX's node conformance cases (onnx.backend.test.case.node) through TpuXdslBackend."""

from __future__ import annotations

import warnings

import pytest

from tests.conformance.expected_failures import reason_for
from tests.conformance.harness import run_case


def _node_cases():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return collect_testcases(None)


NODE_CASES = _node_cases()


def _params():
    for case in NODE_CASES:
        reason = reason_for(case.name)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        yield pytest.param(case, id=case.name, marks=marks)


@pytest.mark.conformance
@pytest.mark.parametrize("case", list(_params()))
def test_node_case(case):
    run_case(case.model, case.data_sets, case.rtol, case.atol)
