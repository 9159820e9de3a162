"""Where long sample loops run: this process, a local process pool, or a Ray cluster.

A job is a *worker class* built once per worker (it loads the module and the samples it
needs) and a method called on many small items; each call returns small statistics, never
whole tensors. `ordered_map` hands results back in the items' order whatever finished
first, so what a tool writes from them is the same on one process, a pool or a cluster.

- `--jobs J` (J > 1): J spawned processes on this machine, BLAS held to one thread each
  (two processes each asking for every core would slow both).
- `--cluster ray://HOST:PORT` (Ray Client) or `auto` (a cluster already running on this
  machine): one Ray actor per CPU the cluster offers, capped at `--jobs` when given. Ray
  is an optional extra: `pip install -e '.[cluster]'`.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.files import signals_deferred

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
CONNECT_SECONDS = 5.0
# A Ray Client server starts a process per client; on a busy machine that start can fail
# ("Initialization failure from server") though the next attempt succeeds, so joining is
# retried for this long before it is reported.
JOIN_SECONDS = 60.0


class ClusterError(TpuXdslError):
    """--cluster names a cluster that cannot be used (Ray missing, address unreachable)."""


class WorkerError(TpuXdslError):
    """A worker process stopped without reporting an error (killed, out of memory)."""


def default_jobs() -> int:
    """Two processes on two or more cores (the cores this process may use), else one."""
    try:
        return max(1, min(2, len(os.sched_getaffinity(0))))
    except AttributeError:
        return max(1, min(2, os.cpu_count() or 1))


# -- the worker object of a pool process --------------------------------------------------

_worker: Any = None


def _init(factory: Callable[..., Any], args: tuple) -> None:
    global _worker
    _worker = factory(*args)


def _call(task: tuple[str, Any]) -> Any:
    method, item = task
    return getattr(_worker, method)(item)


class _Local:
    def __init__(self, worker: Any):
        self.worker = worker

    def map(self, method: str, items: Sequence[Any]) -> list[Any]:
        return [getattr(self.worker, method)(item) for item in items]


class _Pool:
    def __init__(self, executor: ProcessPoolExecutor):
        self.executor = executor

    def map(self, method: str, items: Sequence[Any]) -> list[Any]:
        try:
            return list(self.executor.map(_call, [(method, item) for item in items]))
        except BrokenProcessPool as e:
            raise WorkerError(f"a worker process stopped unexpectedly ({e}); run again with --jobs 1") from e


class _Ray:
    def __init__(self, actors: list[Any]):
        from ray.util import ActorPool

        self.pool = ActorPool(actors)

    def map(self, method: str, items: Sequence[Any]) -> list[Any]:
        return list(self.pool.map(lambda actor, item: actor.call.remote(method, item), list(items)))


@contextmanager
def workers(factory: Callable[..., Any], args: tuple, jobs: int = 1, cluster: str | None = None) -> Iterator[Any]:
    """An object whose `map(method, items)` calls `factory(*args).method(item)` for each
    item on the chosen workers and returns the results in the items' order."""
    if cluster:
        with _ray_workers(factory, args, jobs, cluster) as pool:
            yield pool
        return
    if jobs <= 1:
        yield _Local(factory(*args))
        return
    with spawned_pool(jobs, _init, (factory, args)) as executor:
        yield _Pool(executor)


@contextmanager
def spawned_pool(jobs: int, initializer: Callable[..., None], initargs: tuple) -> Iterator[ProcessPoolExecutor]:
    """`jobs` fresh (spawned) processes, started while the BLAS thread variables say 1, so
    each runs BLAS on one thread; shut down on leaving. A pool of `concurrent.futures`, not
    `multiprocessing.Pool`: a worker that dies makes it fail (BrokenProcessPool) instead of
    waiting forever."""
    saved = {v: os.environ.get(v) for v in BLAS_THREAD_VARIABLES}
    os.environ.update({v: "1" for v in BLAS_THREAD_VARIABLES})
    executor = ProcessPoolExecutor(
        jobs, mp_context=multiprocessing.get_context("spawn"), initializer=initializer, initargs=initargs
    )
    stopped = False
    try:
        yield executor
    except BaseException:
        stopped = True
        raise
    finally:
        # A second Ctrl-C cannot break the shutdown half way (that left a worker waiting for
        # work and this process waiting for it, for ever); once stopping, it is dropped.
        with signals_deferred(deliver=not stopped):
            if stopped:  # Ctrl-C, SIGTERM, an error: the running tasks (minutes each) are not wanted
                for process in list((getattr(executor, "_processes", None) or {}).values()):
                    process.terminate()
            executor.shutdown(wait=True, cancel_futures=True)
        for variable, value in saved.items():
            if value is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = value


def check_cluster(address: str) -> None:
    """Fail early, in one line, on an address that cannot work: Ray not installed, a
    malformed address, or nothing listening there."""
    try:
        import ray  # noqa: F401
    except ImportError as e:
        raise ClusterError(
            f"--cluster {address}: Ray is not installed; install the extra with pip install -e '.[cluster]'"
        ) from e
    if address == "auto":
        return
    if not address.startswith("ray://"):
        raise ClusterError(f"--cluster {address}: give ray://HOST:PORT (a Ray Client address) or auto")
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"--cluster {address}: give ray://HOST:PORT, e.g. ray://127.0.0.1:10001")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS):
            pass
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise ClusterError(
            f"--cluster {address}: cannot connect ({reason}); start the cluster (ray start --head) or fix the address"
        ) from e


@contextmanager
def _ray_workers(factory: Callable[..., Any], args: tuple, jobs: int, address: str) -> Iterator[_Ray]:
    check_cluster(address)
    import ray

    _join(ray, address)
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        count = max(1, min(cpus, jobs) if jobs > 1 else cpus)
        actor = ray.remote(num_cpus=1)(_RayWorker)
        actors = [actor.remote(factory, args) for _ in range(count)]
        yield _Ray(actors)
    finally:
        ray.shutdown()


def _join(ray: Any, address: str) -> None:
    """ray.init, tried again until JOIN_SECONDS have passed while the cluster aborts the
    client's initialization (Ray Client raises ConnectionAbortedError when the server it
    starts for the client fails); any other failure is reported at once."""
    deadline = time.monotonic() + JOIN_SECONDS
    while True:
        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
            return
        except (ConnectionError, RuntimeError) as e:
            ray.shutdown()
            if not isinstance(e, ConnectionAbortedError) or time.monotonic() >= deadline:
                raise ClusterError(
                    f"--cluster {address}: cannot join the cluster ({str(e).splitlines()[0]})"
                ) from e
            time.sleep(2.0)


class _RayWorker:
    """A Ray actor holding one worker object."""

    def __init__(self, factory: Callable[..., Any], args: tuple):
        for variable in BLAS_THREAD_VARIABLES:
            os.environ[variable] = "1"
        self.worker = factory(*args)

    def call(self, method: str, item: Any) -> Any:
        return getattr(self.worker, method)(item)
