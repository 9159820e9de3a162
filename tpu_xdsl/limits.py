"""Resource bounds: untrusted input (a 115-byte ONNX file asking for a [32768, 32768] constant,
an Expand to [1e6, 1e6], a header declaring 1e12 elements) is refused before anything is
allocated, with a one-line error naming the tensor and its size.

The limit on one tensor defaults to a quarter of the memory available when the command starts;
`tpu-xdsl --max-tensor-bytes SIZE` (or the environment variable TPU_XDSL_MAX_TENSOR_BYTES)
sets it. No device package import here: the device model uses it too.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence

import numpy as np

from tpu_xdsl.errors import TpuXdslError, UsageError

ENV_VAR = "TPU_XDSL_MAX_TENSOR_BYTES"
FLAG = "--max-tensor-bytes"

# Histogram bins per tensor in calibration, and image sides in preprocessing.
MAX_HISTOGRAM_BINS = 1 << 16
MAX_IMAGE_SIDE = 16384
# Worker processes a command may start (--jobs).
MAX_JOBS = 256

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_limit: int | None = None


class ResourceLimitError(TpuXdslError):
    """A tensor the input asks for is larger than the limit."""


def parse_size(text: str, flag: str = FLAG) -> int:
    """`4G`, `512M`, `1000000` -> bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not match:
        raise UsageError(f"{flag} {text!r}: give a size in bytes, e.g. 4G, 512M or 1000000")
    value = float(match.group(1)) * _UNITS[match.group(2).upper()]
    if not 0 < value < 1 << 62:
        raise UsageError(f"{flag} {text!r}: give a positive size, e.g. 4G")
    return int(value)


def format_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # unreachable: the loop returns at PiB


def _available_memory() -> int:
    """MemAvailable, or the address-space limit of this process if that is lower."""
    available = _meminfo_available()
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            available = min(available, soft)
    except (ImportError, ValueError, OSError):
        pass
    return available


def _meminfo_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def set_max_tensor_bytes(limit: int | None) -> None:
    """Set the limit for this process (None: back to the default)."""
    global _limit
    _limit = limit


def max_tensor_bytes() -> int:
    if _limit is not None:
        return _limit
    env = os.environ.get(ENV_VAR)
    if env:
        return parse_size(env, ENV_VAR)
    return max(_available_memory() // 4, 64 << 20)


def element_count(shape: Sequence[int]) -> int:
    """The product of `shape` as a Python int (no overflow, unlike numpy's)."""
    return math.prod(int(d) for d in shape)


def check_tensor_size(what: str, shape: Sequence[int], itemsize: int | np.dtype = 4) -> None:
    """Refuse `what` (e.g. "initializer 'w'", "op 'x' result") before it is allocated.

    Negative dimensions are the caller's to report; here they count as 0.
    """
    size = np.dtype(itemsize).itemsize if not isinstance(itemsize, int) else itemsize
    nbytes = element_count([max(int(d), 0) for d in shape]) * size
    limit = max_tensor_bytes()
    if nbytes > limit:
        dims = "x".join(str(int(d)) for d in shape) or "scalar"
        raise ResourceLimitError(
            f"{what} of shape {dims} needs {format_size(nbytes)}, over the limit of {format_size(limit)} "
            f"per tensor; if the model really needs it, raise the limit with tpu-xdsl {FLAG} SIZE"
        )
