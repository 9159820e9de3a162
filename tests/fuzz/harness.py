"""Run a CLI case in a forked process, with a timeout and a memory cap, and classify the end.

A case is a command line for `tpu-xdsl` or `tpu-opt`, the folder holding its inputs and the
folder its outputs go to. The child calls the command's own `main` (the parent has imported
tpu-xdsl once, so a case costs a fork, not an interpreter start), with stdout and stderr sent
to files and the address space capped. The parent hashes every input file before and after,
lists the output folder, and reads the exit status:

    clean       exit 2, one line on stderr, no traceback, no file left
    accepted    exit 0 (or 1: a tolerance failed, an honest answer), and the case allowed it
    wrong       exit 0 or 1 on a case whose input is known to be wrong (a moved blob
                boundary, a weight of the wrong shape): the wrong result was accepted
    multiline   exit 2 but more than one line on stderr
    traceback   a Python traceback on stderr, or an exception escaped `main`
    internal    exit 3: tpu-xdsl's own fault, in one line
    crash       killed by a signal (a segfault, the kernel's OOM killer) or another exit code
    hang        still running at the timeout
    partial     a failing case left a file in the output folder
    temporary   a hidden temporary file left anywhere in the case's folders
    changed     an input file's bytes changed

The first five are about how the command ended; the last three are checked on every case and
reported beside it, so a case can be both `clean` and `partial`.
"""

from __future__ import annotations

import hashlib
import os
import resource
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ENDINGS = ("clean", "accepted", "wrong", "multiline", "traceback", "internal", "crash", "hang")
DAMAGE = ("partial", "temporary", "changed")
# Endings that are failures of tpu-xdsl.
BAD = {"wrong", "multiline", "traceback", "internal", "crash", "hang", *DAMAGE}
ESCAPED = 99  # the child's exit code when an exception escaped the command's main


@dataclass
class Case:
    """One command to run; `prepare` writes its input files into `inputs` first."""

    kind: str  # the table's row: onnx-bytes, onnx-structured, tpumodel, mlir, paths, ...
    name: str  # what the mutant is, e.g. "flip 3 bits at 1207" or "Conv kernel_shape as float"
    argv: Callable[[Path, Path], list[str]]  # (inputs, outputs) -> the command line
    prepare: Callable[[Path], None]
    tool: str = "tpu-xdsl"
    # Exit 0 is a wrong result: the input is known to be bad.
    must_fail: bool = False
    # Multi-line error reports that are allowed (xDSL's parse diagnostics point into the file).
    multiline_ok: bool = False


@dataclass
class Outcome:
    case: Case
    ending: str
    damage: list[str] = field(default_factory=list)
    returncode: int | None = None
    stderr: str = ""
    seconds: float = 0.0

    @property
    def bad(self) -> bool:
        return self.ending in BAD or bool(self.damage)

    def line(self) -> str:
        first = next((ln for ln in self.stderr.splitlines() if ln.strip()), "")
        marks = ",".join([self.ending, *self.damage])
        return f"{self.case.kind:<16} {marks:<22} rc={self.returncode} {self.case.name}: {first[:200]}"


def _prepared(_inputs: Path) -> None:
    """What a case's `prepare` becomes once its files are written."""


def _hashes(folder: Path) -> dict[str, str]:
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _is_temporary(p: Path) -> bool:
    return p.name.startswith(".") or "tmp" in p.name.lower()


def _child(case: Case, inputs: Path, outputs: Path, log: Path, memory: int) -> None:
    """Runs in the forked process; never returns."""
    try:
        fd = os.open(log / "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(fd, 2)
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 (the process ends with os._exit)
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(outputs)
        argv = case.argv(inputs, outputs)
        if case.tool == "tpu-opt":
            from tpu_xdsl.tools.tpu_opt import main
        else:
            from tpu_xdsl.tools.tpu_xdsl import main
        rc = main(argv)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc if isinstance(rc, int) else 0)
    except SystemExit as e:  # argparse's usage errors exit 2 with a usage line
        sys.stderr.flush()
        os._exit(e.code if isinstance(e.code, int) else 2)
    except BaseException:  # noqa: BLE001  (whatever escaped main is the finding)
        try:
            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(ESCAPED)


def _classify(case: Case, status: int | None, stderr: str, left: list[Path]) -> str:
    if status is None:
        return "hang"
    if os.WIFSIGNALED(status):
        return "crash"
    rc = os.WEXITSTATUS(status)
    if "Traceback (most recent call last)" in stderr or rc == ESCAPED:
        return "traceback"
    if rc in (0, 1):
        return "wrong" if case.must_fail else "accepted"
    if rc == 3:
        return "internal"
    if rc == 2:
        lines = [ln for ln in stderr.splitlines() if ln.strip()]
        # argparse's usage errors are two lines (usage, then the error): its own convention.
        if len(lines) > 1 and not case.multiline_ok and not (len(lines) == 2 and lines[0].startswith("usage:")):
            return "multiline"
        return "clean"
    return "crash"


def run_cases(
    cases: Iterable[Case],
    workdir: Path,
    jobs: int = 2,
    timeout: float = 60.0,
    memory: int = 4 << 30,
    keep: Callable[[Outcome], bool] = lambda o: o.bad,
    progress: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Run every case, `jobs` at a time; each gets its own folders under `workdir`.

    The folders of a case are removed after it unless `keep(outcome)` holds.
    """
    import shutil

    workdir.mkdir(parents=True, exist_ok=True)
    pending = enumerate(cases)  # made one at a time: a mutant of a large model holds its bytes
    running: dict[int, tuple[int, Case, Path, float, dict[str, str]]] = {}
    outcomes: list[tuple[int, Outcome]] = []
    exhausted = False
    while not exhausted or running:
        while not exhausted and len(running) < jobs:
            taken = next(pending, None)
            if taken is None:
                exhausted = True
                break
            index, case = taken
            root = workdir / f"case{index:05d}"
            shutil.rmtree(root, ignore_errors=True)
            for sub in ("in", "out", "log"):
                (root / sub).mkdir(parents=True)
            case.prepare(root / "in")
            case.prepare = _prepared  # let go of the mutant's bytes: outcomes keep their case
            before = _hashes(root / "in")
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(case, root / "in", root / "out", root / "log", memory)
            running[pid] = (index, case, root, time.monotonic(), before)
        time.sleep(0.005)
        for pid in list(running):
            index, case, root, start, before = running[pid]
            done, status = os.waitpid(pid, os.WNOHANG)
            if not done:
                if time.monotonic() - start < timeout:
                    continue
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                status = None
            del running[pid]
            outcome = _finish(case, root, status, before, time.monotonic() - start)
            outcomes.append((index, outcome))
            if progress:
                progress(outcome)
            if not keep(outcome):
                shutil.rmtree(root, ignore_errors=True)
    return [outcome for _, outcome in sorted(outcomes, key=lambda pair: pair[0])]


def _finish(case: Case, root: Path, status: int | None, before: dict[str, str], seconds: float) -> Outcome:
    stderr = (root / "log" / "stderr").read_text(errors="replace")
    left = sorted(p for p in (root / "out").rglob("*"))
    ending = _classify(case, status, stderr, left)
    damage = []
    failed = ending not in ("accepted", "wrong")
    if failed and ending != "hang" and any(p.is_file() for p in left):
        damage.append("partial")
    if any(_is_temporary(p) for folder in ("in", "out") for p in (root / folder).rglob("*")):
        damage.append("temporary")
    after = _hashes(root / "in")
    if {k: v for k, v in after.items() if k in before} != before or not set(before) <= set(after):
        damage.append("changed")
    rc = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
    if status is not None and os.WIFSIGNALED(status):
        rc = -os.WTERMSIG(status)
    return Outcome(case, ending, damage, rc, stderr, seconds)


def table(outcomes: Sequence[Outcome]) -> str:
    """Rows by kind, columns by ending and damage; a total row."""
    kinds = sorted({o.case.kind for o in outcomes})
    columns = ["cases", *ENDINGS, *DAMAGE]
    rows = []
    for kind in [*kinds, "total"]:
        chosen = [o for o in outcomes if kind in ("total", o.case.kind)]
        counts = Counter(o.ending for o in chosen)
        for o in chosen:
            counts.update(o.damage)
        rows.append([kind, len(chosen), *(counts[c] for c in columns[1:])])
    width = max(len(r[0]) for r in rows) + 2
    head = "kind".ljust(width) + "".join(f"{c:>10}" for c in columns)
    lines = [head, "-" * len(head)]
    lines += [str(r[0]).ljust(width) + "".join(f"{v:>10}" for v in r[1:]) for r in rows]
    return "\n".join(lines)
