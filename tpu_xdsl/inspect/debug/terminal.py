"""Where the debugger's commands come from: a script (echoed, each failure counted) or
the terminal (readline's history and completion), or plain stdin."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from tpu_xdsl.inspect.debug.commands import Debugger
from tpu_xdsl.inspect.debug.session import Session

HISTORY_ENV = "TPU_XDSL_HISTORY"


def _history_file() -> Path:
    return Path(os.environ.get(HISTORY_ENV) or Path.home() / ".tpu_xdsl_history")


def _interactive(debugger: Debugger) -> None:
    """The loop on a terminal, with readline's history and completion."""
    try:
        import readline
    except ImportError:  # no readline on this Python: plain input()
        debugger.cmdloop()
        return
    readline.set_completer_delims(" \t\n")
    history = _history_file()
    try:
        readline.read_history_file(history)
    except OSError:
        pass
    readline.set_history_length(1000)
    try:
        debugger.cmdloop()
    finally:
        try:
            readline.write_history_file(history)
        except OSError:
            pass


def run_script(session: Session, lines: Sequence[str]) -> list[str]:
    """Run the commands in `lines` (blank lines and # comments skipped), echoing each,
    until the end or 'quit'; the commands that failed, with their messages."""
    debugger = Debugger(session, echo=True)
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if debugger.onecmd(debugger.precmd(line.strip())):
            break
    return debugger.failures


def run_terminal(session: Session) -> None:
    """Read commands from stdin: with readline's history on a terminal, plainly otherwise."""
    debugger = Debugger(session)
    if sys.stdin.isatty():
        _interactive(debugger)
    else:
        debugger.cmdloop()
