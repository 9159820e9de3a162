"""ONNX node test cases expected to fail, grouped by reason.

Each entry is an exact case name. A listed case that passes fails the run
(strict xfail), so this list only shrinks as support grows.
"""

EXPECTED_FAILURES: dict[str, list[str]] = {}


def reason_for(case: str) -> str | None:
    for reason, cases in EXPECTED_FAILURES.items():
        if case in cases:
            return reason
    return None
