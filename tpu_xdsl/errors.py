"""Errors a user can cause: each names the file, op, tensor or flag and what to do."""

# The commands' exit codes: 1 is a tolerance failure, 2 bad input (a TpuXdslError),
# and this one a fault of tpu-xdsl itself, so a script never takes a crash for either.
EXIT_INTERNAL = 3


def internal_error_line(tool: str, error: BaseException) -> str:
    """The one line a command prints for an exception that is its own fault."""
    where = f"{type(error).__name__}: {error}".splitlines()[0]
    return (
        f"{tool}: internal error: {where}; this is a bug in tpu-xdsl: please report it "
        "with the command line (--debug shows the traceback)"
    )


def traceback_if(debug: bool) -> None:
    """With --debug, the traceback of the exception being handled, on stderr; the command
    then prints its one line and exits with the same code as without --debug (2, 3), so
    that a script cannot take a crash for a comparison below tolerance (1)."""
    if debug:
        import traceback

        traceback.print_exc()


def interrupted(tool: str, error: KeyboardInterrupt) -> int:
    """Print the line for Ctrl-C or SIGTERM (`files.Terminated`) and return the exit code a
    shell gives a process the signal ends: 128 + its number (130, 143)."""
    import sys

    from tpu_xdsl.files import Terminated

    terminated = isinstance(error, Terminated)
    print(f"{tool}: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
    return 143 if terminated else 130


class TpuXdslError(Exception):
    """Base of every error caused by user input; the CLI prints it on one line."""


class IrdlLoadError(TpuXdslError):
    """An IRDL file could not be turned into an xDSL dialect."""


class UsageError(TpuXdslError):
    """A flag value is malformed."""
