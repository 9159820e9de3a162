"""Reading `.npz` and `.npy` files a user gives (inputs, references, dumps to compare,
constants), validated before anything is allocated: no xDSL here, the device runtime
reads inputs too.

numpy's `np.load` takes an `.npy` for an archive, fails on an empty or cut file with
EOFError or BadZipFile, returns raw bytes for a member that is not an array, and
allocates what a header declares (2^40 x 3 x 8 x 8 in a 16-byte file) before it finds
the data short. Here each member's `.npy` header is read first: Python objects are
refused (nothing is unpickled), the size goes through `limits.check_tensor_size`, and
every failure is one `NpzError` line naming the file, the member and `hint`.

The `.npy` format has no bfloat16: numpy writes a bfloat16 array (a BF16 dump of `tpu-xdsl
run --dump-all`) as raw 2-byte records, which are read back as bfloat16.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path
from typing import IO

import ml_dtypes
import numpy as np

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.limits import check_tensor_size

# What reading a damaged archive or `.npy` member can raise: a truncated or corrupt zip
# (BadZipFile, zlib.error, EOFError), a bad header (ValueError), an unsupported or
# encrypted member (NotImplementedError, RuntimeError).
READ_ERRORS = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError)


class NpzError(TpuXdslError):
    """An .npz or .npy file that cannot be read as arrays."""


def read_header(stream: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype]:
    """Shape, Fortran order and dtype of an `.npy` stream (format versions 1.0 and 2.0;
    3.0 differs only for structured dtypes with unicode field names)."""
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(stream)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(stream)
    raise ValueError(f".npy format version {version[0]}.{version[1]}")


def _checked_header(open_stream, label: str, where: str, hint: str) -> None:
    try:
        with open_stream() as stream:
            shape, _, dtype = read_header(stream)
    except READ_ERRORS as e:
        raise NpzError(f"{where}: {label} is not a readable .npy array ({_reason(e)}); {hint}") from e
    if dtype.hasobject:
        raise NpzError(f"{where}: {label} holds Python objects ({dtype}), not numbers (they are never unpickled); "
                       f"{hint}")
    check_tensor_size(f"{where}: {label}", shape, dtype.itemsize)


def _read_array(open_stream, label: str, where: str, hint: str) -> np.ndarray:
    _checked_header(open_stream, label, where, hint)
    try:
        with open_stream() as stream:
            array = np.lib.format.read_array(stream, allow_pickle=False)
    except READ_ERRORS as e:
        raise NpzError(f"{where}: {label} cannot be read ({_reason(e)}); {hint}") from e
    if array.dtype.type is np.void and array.dtype.names is None and array.dtype.itemsize == 2:  # raw records
        return array.view(ml_dtypes.bfloat16)
    return array


def read_npz(path: str | Path, hint: str, where: str | None = None) -> dict[str, np.ndarray]:
    """Every array of the `.npz` at `path` by name. `where` (default: the path) starts
    each message, e.g. "--test-reference r.npz"."""
    file = Path(path)
    where = where or str(path)
    if not file.is_file():
        raise NpzError(f"{where}: no such file; {hint}")
    try:
        archive = zipfile.ZipFile(file)
    except zipfile.BadZipFile as e:
        kind = "empty" if file.stat().st_size == 0 else _what_it_is(file)
        raise NpzError(f"{where}: not an .npz archive ({kind}); {hint}") from e
    except READ_ERRORS as e:
        raise NpzError(f"{where}: cannot read ({_reason(e)}); {hint}") from e
    arrays: dict[str, np.ndarray] = {}
    with archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                raise NpzError(f"{where}: member '{info.filename}' is not an array (.npy); {hint}")
            name = info.filename.removesuffix(".npy")
            arrays[name] = _read_array(lambda info=info: archive.open(info), f"array '{name}'", where, hint)
    return arrays


def read_npy(path: str | Path, hint: str, where: str | None = None) -> np.ndarray:
    """The array of the `.npy` at `path`."""
    file = Path(path)
    where = where or str(path)
    if not file.is_file():
        raise NpzError(f"{where}: no such file; {hint}")
    return _read_array(lambda: open(file, "rb"), "the array", where, hint)


def _what_it_is(file: Path) -> str:
    try:
        with open(file, "rb") as f:
            head = f.read(6)
    except OSError:
        return "unreadable"
    return "an .npy array: name it .npy" if head == b"\x93NUMPY" else "truncated or another kind of file"


def _reason(error: BaseException) -> str:
    text = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    return (text.splitlines() or [type(error).__name__])[0] or type(error).__name__
