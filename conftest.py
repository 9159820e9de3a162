"""Repository-wide pytest setup: the conformance summary line."""

from __future__ import annotations


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print how many ONNX conformance cases pass, per suite."""
    counts: dict[str, dict[str, int]] = {}
    for outcome in ("passed", "failed", "xfailed", "xpassed"):
        for report in terminalreporter.stats.get(outcome, []):
            nodeid = getattr(report, "nodeid", "")
            if (
                "tests/conformance/" not in nodeid
                or getattr(report, "when", "call") != "call"
                and outcome in ("passed", "failed")
            ):
                continue
            suite = nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
            counts.setdefault(suite, {}).setdefault(outcome, 0)
            counts[suite][outcome] += 1
    for suite, c in sorted(counts.items()):
        total = sum(c.values())
        terminalreporter.write_line(
            f"ONNX conformance {suite}: {c.get('passed', 0)} of {total} cases pass "
            f"({c.get('xfailed', 0)} expected failures, {c.get('failed', 0)} failures, "
            f"{c.get('xpassed', 0)} unexpected passes)"
        )
