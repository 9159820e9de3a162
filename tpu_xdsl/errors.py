"""Errors a user can cause: each names the file, op, tensor or flag and what to do."""


class TpuXdslError(Exception):
    """Base of every error caused by user input; the CLI prints it on one line."""


class IrdlLoadError(TpuXdslError):
    """An IRDL file could not be turned into an xDSL dialect."""
