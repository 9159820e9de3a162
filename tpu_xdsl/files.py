"""Files written whole or not at all, and a command's files all or none (no xDSL: the
device package uses this too).

An `OutputSet` is one command's set of output files. Each file is written to a temporary
beside its final path; when the set closes without an exception, the temporaries are
renamed into place in the order they were written (a module's weights, then its `.mlir`,
then the `.tpumodel`), and only then: no final file is replaced before every file is
complete. An exception, Ctrl-C or SIGTERM (which the set turns into `Terminated`, a
KeyboardInterrupt, while it is open in the main thread) removes every temporary and
leaves the old files as they were.

`write_atomic(path, write)` writes one file: into the innermost open set when there is
one (it is renamed when the set closes), else as a set of its own, at once.

SIGKILL cannot be caught: a process killed that way leaves its temporaries. They are
named `.<final name>.tpu-xdsl-tmp-<pid>-<random>` beside the final file, so they are easy
to recognize (and to delete by hand); the next set that writes the same final file removes
those of processes that no longer run and that are older than itself. (Work folders a
command keeps beside its outputs carry the same mark, e.g. calibrate's
`.calibrate.tpu-xdsl-tmp-*`; those are left to delete by hand.)

A rename of the final step can still fail half way (the disk is removed, the folder's
permissions change while the command runs): the files renamed by then stay new.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Self

TEMP_MARK = ".tpu-xdsl-tmp-"
_STARTED = time.time()
_OPEN: list[OutputSet | None] = []  # the open sets, innermost last; None suspends them (`immediate`)


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while an output set was open: it unwinds like Ctrl-C, so the
    temporaries are removed."""


def temp_prefix(final: Path) -> str:
    """The start of the names of `final`'s temporaries."""
    return f".{final.name}{TEMP_MARK}"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process, or a platform without signal 0
        return True
    return True


def remove_stale_temporaries(final: Path) -> list[Path]:
    """Remove the temporaries of `final` that killed processes left (their process no
    longer runs and they are older than this one); the removed paths."""
    prefix = temp_prefix(final)
    removed = []
    try:
        entries = list(os.scandir(final.parent))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        pid = entry.name[len(prefix):].split("-", 1)[0]
        try:
            old = entry.stat(follow_symlinks=False).st_mtime < _STARTED
            if pid.isdigit() and int(pid) != os.getpid() and old and not _running(int(pid)):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


@contextlib.contextmanager
def signals_deferred(deliver: bool = True) -> Iterator[dict[signal.Signals, Any]]:
    """SIGINT and SIGTERM that arrive inside the block wait until it ends (work that must run
    whole: renames, clean-up, stopping worker processes), then are raised once each, or,
    with `deliver` False (the command is stopping already), dropped. Their Python handlers
    are swapped, not the signal mask: the OS may hand a signal to any thread that does not
    block it (a process pool's manager thread, a progress bar's monitor), and Python runs
    the handler in the main thread whichever thread took it. Yields the handlers to put
    back, by signal number, before the held signals are raised; the block may change them."""
    if threading.current_thread() is not threading.main_thread():
        yield {}
        return
    arrived: list[int] = []

    def remember(signum, frame) -> None:
        arrived.append(signum)

    restore: dict[signal.Signals, Any] = {s: signal.signal(s, remember) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield restore
    finally:
        for number, handler in restore.items():
            signal.signal(number, handler)
        if deliver:
            for number in dict.fromkeys(arrived):
                signal.raise_signal(number)


class OutputSet:
    """A command's output files, written to temporaries and renamed into place together when
    the `with` block ends without an exception (see the module's docstring). A set opened
    inside another joins it: its files go in place when the outer set closes."""

    def __init__(self) -> None:
        self._pending: dict[Path, Path] = {}  # final -> temporary, in the order written
        self._outer: OutputSet | None = None
        self._joined: list[Path] = []  # the finals this set gave its outer set
        self._previous_handler: Any = None
        self._handler_installed = False

    def __enter__(self) -> Self:
        self._outer = current()
        if threading.current_thread() is threading.main_thread():
            handler = signal.getsignal(signal.SIGTERM)
            if handler in (signal.SIG_DFL, _raise_terminated):
                self._previous_handler = signal.signal(signal.SIGTERM, _raise_terminated)
                self._handler_installed = True
        _OPEN.append(self)
        return self

    def __exit__(self, kind, value, traceback) -> None:
        # A signal arriving now waits until the files are all in place or all removed, and is
        # raised after the old SIGTERM handler is back (by default, SIGTERM then ends the process).
        with signals_deferred() as restore:
            try:
                if kind is None:
                    self.commit()
                else:
                    self.discard()
            finally:
                if self in _OPEN:
                    _OPEN.remove(self)
                if self._handler_installed:
                    restore[signal.SIGTERM] = self._previous_handler
                    self._handler_installed = False

    def path(self, final: str | Path) -> Path:
        """A new empty temporary beside `final` for a writer that takes a path; it becomes
        `final` when the set closes. Asking again for the same final path drops the earlier
        temporary."""
        if self._outer is not None:
            self._joined.append(Path(final))
            return self._outer.path(final)
        final = Path(final)
        earlier = self._pending.pop(final, None)
        if earlier is not None:
            earlier.unlink(missing_ok=True)
        else:
            remove_stale_temporaries(final)
        with signals_deferred():  # a temporary made is a temporary recorded (and so removed)
            while True:
                temporary = final.parent / f"{temp_prefix(final)}{os.getpid()}-{secrets.token_hex(4)}"
                try:
                    # 0o666 less the umask: the usual permissions of a new file (mkstemp gives 0600)
                    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
                except FileExistsError:
                    continue
                break
            self._pending[final] = temporary
        return temporary

    def write(self, final: str | Path, write: Callable[[IO[Any]], object], binary: bool = False) -> None:
        """Call `write(file)` on a temporary that becomes `final` when the set closes."""
        temporary = self.path(final)
        with open(temporary, "wb" if binary else "w") as f:
            write(f)

    @property
    def finals(self) -> list[Path]:
        """The final paths written so far, in order."""
        return self._outer.finals if self._outer is not None else list(self._pending)

    def commit(self) -> None:
        """Rename every temporary into place, in the order written (a joined set leaves
        that to its outer set)."""
        if self._outer is not None:
            self._joined.clear()
            return
        pending = list(self._pending.items())
        try:
            for final, temporary in pending:
                os.replace(temporary, final)
                del self._pending[final]
        finally:
            self.discard()

    def discard(self) -> None:
        """Remove every temporary not yet renamed (of a joined set: those it wrote)."""
        if self._outer is not None:
            self._outer._drop(self._joined)
            self._joined.clear()
        self._drop(list(self._pending))

    def _drop(self, finals: list[Path]) -> None:
        for final in finals:
            temporary = self._pending.pop(final, None)
            if temporary is not None:
                with contextlib.suppress(OSError):
                    temporary.unlink()


def current() -> OutputSet | None:
    """The innermost open output set (None when there is none or `immediate` holds it)."""
    return _OPEN[-1] if _OPEN else None


@contextlib.contextmanager
def immediate() -> Iterator[None]:
    """Files written here go in place at once even inside an open output set: work files a
    later step of the same command reads by path."""
    _OPEN.append(None)
    try:
        yield
    finally:
        _OPEN.pop()


def write_atomic(path: str | Path, write: Callable[[IO[Any]], object], binary: bool = False) -> None:
    """Call `write(file)` on a temporary file beside `path`, then rename it into place: at
    once, or when the open output set closes.

    Readers never see a partial file, and a failure leaves nothing behind. The file gets
    the usual permissions (0666 less the umask).
    """
    outputs = current()
    if outputs is not None:
        outputs.write(path, write, binary)
        return
    with OutputSet() as outputs:
        outputs.write(path, write, binary)
