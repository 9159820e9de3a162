"""Freed memory kept for the next kernel instead of given back to the operating system.

The kernels allocate their temporaries afresh on every call (numpy arrays of a few
hundred kilobytes to tens of megabytes). glibc's malloc serves blocks above its mmap
threshold (128 KiB at start, raised as large blocks are freed) with fresh pages and
gives heap tops above its trim threshold back on free: every later call then faults its
pages in again. In a virtual machine a fault costs microseconds, and how many a run pays
depends on what the process did before it (ppocr_cls INT8 in the TPU interpreter: 3200
faults and 18.7 ms a run in a fresh process, 10.8 ms without them). `keep_freed_memory`
fixes both thresholds high once per process: blocks up to 32 MiB come from the heap and
stay there for reuse, so runs cost the same whatever came before them. The price is a
resident size that stays at its peak instead of shrinking between runs; the peak itself
does not grow.

Only glibc has `mallopt`; elsewhere (musl, macOS, Windows) this does nothing.
"""

from __future__ import annotations

import ctypes
import sys

# mallopt parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# The largest mmap threshold glibc accepts on 64-bit systems (DEFAULT_MMAP_THRESHOLD_MAX).
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20

_done: bool | None = None


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds (once per process); whether they are set."""
    global _done
    if _done is None:
        _done = _set_thresholds()
    return _done


def _set_thresholds() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
