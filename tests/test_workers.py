"""The local process pool (`tpu_xdsl.workers`): a command stopped while its workers run
(Ctrl-C, SIGTERM, once or twice) ends them at once and exits, leaving no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TASK_SECONDS = 60.0


class Sleeper:
    """A worker whose tasks sleep: a stand-in for a run of a model over many samples. Each
    worker writes its process id when it starts."""

    def __init__(self, pid_file: str, seconds: float):
        with open(pid_file, "a") as f:
            f.write(f"{os.getpid()}\n")
        self.seconds = seconds

    def sleep(self, item: int) -> int:
        time.sleep(self.seconds)
        return item


SCRIPT = f"""
import sys
from tests.test_workers import Sleeper
from tpu_xdsl.files import OutputSet
from tpu_xdsl.workers import workers

with OutputSet():
    with workers(Sleeper, (sys.argv[1], {TASK_SECONDS}), jobs=2) as pool:
        pool.map("sleep", list(range(4)))
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc for the workers")
@pytest.mark.parametrize("signals", [1, 2])
def test_a_stopped_pool_ends_its_workers_at_once(tmp_path, signals):
    """Stopping used to wait for the running tasks (minutes in search-qtable), and a second
    signal during that wait left a worker waiting for work and the command waiting for it."""
    pid_file, log = tmp_path / "pids", tmp_path / "stderr"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with log.open("w") as err:  # a file, not a pipe: workers left behind would hold a pipe open
        child = subprocess.Popen([sys.executable, "-c", SCRIPT, str(pid_file)], cwd=ROOT, env=env,
                                 stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or len(pid_file.read_text().split()) < 2:
            assert child.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        time.sleep(0.5)  # both workers are in their first task
        stopped = time.monotonic()
        for _ in range(signals):
            child.send_signal(signal.SIGTERM)
            time.sleep(0.3)
        try:
            child.wait(timeout=TASK_SECONDS / 3)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {TASK_SECONDS / 3:.0f} s after SIGTERM: {log.read_text()}")
        assert child.returncode != 0 and "Terminated" in log.read_text()
        assert time.monotonic() - stopped < TASK_SECONDS / 3
        workers = [int(p) for p in pid_file.read_text().split()]
        deadline = time.monotonic() + 10
        while any(_running(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in workers if _running(p)]
    finally:
        child.kill()
        for pid in (int(p) for p in pid_file.read_text().split()) if pid_file.exists() else ():
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
