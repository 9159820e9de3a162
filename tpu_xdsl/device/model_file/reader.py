"""Reading a `.tpumodel` file: the fixed header and checksum checked, the header parsed
and validated; every problem is a one-line ModelFileError naming it."""

from __future__ import annotations

import gc
import json
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tpu_xdsl.device.model_file.format import (
    FIXED,
    FIXED_HEADER_BYTES,
    FLOAT_TAG,
    FORMAT_VERSION,
    MAGIC,
    RECOMPILE,
    checksum,
)
from tpu_xdsl.device.model_file.model import ModelFileError, TpuModel
from tpu_xdsl.device.model_file.validation import (
    model_from_header,
    program_problem,
    show,
)


def load_model(path: str | Path, chip: str | None = None) -> TpuModel:
    """Read a .tpumodel file; with `chip`, refuse one built for another chip.

    Every problem with the file is a one-line ModelFileError naming it."""
    path = Path(path)
    header_bytes, blob = _read_checked(path)
    try:
        with _without_cyclic_gc():
            header = json.loads(header_bytes.decode("utf-8"), object_hook=_tagged_float, parse_constant=_no_constant)
            model = model_from_header(header, blob)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ModelFileError(f"{path}: malformed header ({_one_line(e)}); {RECOMPILE}") from e
    problem = program_problem(model.instructions)
    if problem:
        raise ModelFileError(f"{path}: {problem}; {RECOMPILE}")
    if chip is not None and model.chip != chip:
        raise ModelFileError(
            f"{path} was built for {model.chip}; run it on {model.chip} or deploy again with --chip {chip}"
        )
    return model


@contextmanager
def _without_cyclic_gc() -> Iterator[None]:
    """Decoding makes a few objects per JSON value and no cycles; left on, the cyclic
    garbage collector rescans them again and again (20,000 instructions: 0.6 s with
    it, 0.22 s without, when the caller holds many objects as a test does)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _read_checked(path: Path) -> tuple[bytes, bytes]:
    """The header and blob bytes, after checking magic, version, lengths and checksum."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            header_length, blob_length, expected = _check_fixed(path, f.read(FIXED_HEADER_BYTES), size)
            header = f.read(header_length)
            blob = f.read(blob_length)
    except FileNotFoundError as e:
        raise ModelFileError(f"{path}: no such file; give the .tpumodel that `tpu-xdsl deploy` wrote") from e
    except IsADirectoryError as e:
        raise ModelFileError(f"{path} is a folder; give a .tpumodel file") from e
    except OSError as e:
        raise ModelFileError(f"{path}: cannot read ({e.strerror})") from e
    if len(header) != header_length or len(blob) != blob_length:  # the file shrank while it was read
        raise ModelFileError(f"{path} is truncated: it changed while it was read; copy it again or {RECOMPILE}")
    if checksum(FORMAT_VERSION, header, blob) != expected:
        raise ModelFileError(f"{path} is corrupt (its SHA-256 checksum does not match); {RECOMPILE}")
    return header, blob


def _check_fixed(path: Path, fixed: bytes, size: int) -> tuple[int, int, bytes]:
    """The header length, blob length and checksum of the fixed header `fixed` of a file
    of `size` bytes, after checking its magic, version and lengths."""
    if fixed[:8] != MAGIC[: len(fixed[:8])]:
        raise ModelFileError(
            f"{path}: not a .tpumodel file (it does not start with {MAGIC.decode()}); "
            "give a file written by `tpu-xdsl deploy`"
        )
    if size >= 12:
        (version,) = struct.unpack_from("<I", fixed, 8)
        if version != FORMAT_VERSION:
            raise ModelFileError(
                f"{path} is a version {version} .tpumodel; this tpu-xdsl reads version "
                f"{FORMAT_VERSION}: {RECOMPILE}"
            )
    if size < FIXED_HEADER_BYTES:
        raise ModelFileError(
            f"{path}: not a .tpumodel file, or truncated: {size} bytes is shorter than the "
            f"{FIXED_HEADER_BYTES}-byte fixed header; {RECOMPILE}"
        )
    _, _, header_length, blob_length, digest = FIXED.unpack(fixed)
    expected = FIXED_HEADER_BYTES + header_length + blob_length
    if expected > size:
        raise ModelFileError(
            f"{path} is truncated: it has {size} bytes, its fixed header says {expected}; "
            f"copy it again or {RECOMPILE}"
        )
    if expected < size:
        raise ModelFileError(
            f"{path} is corrupt: {size - expected} unexpected bytes after the model; {RECOMPILE}"
        )
    return header_length, blob_length, digest


def _tagged_float(obj: dict[str, Any]) -> Any:
    if len(obj) != 1 or FLOAT_TAG not in obj:
        return obj
    text = obj[FLOAT_TAG]
    if text not in ("inf", "-inf", "nan"):
        raise ValueError(f"{{{FLOAT_TAG!r}: {show(text)}}}: expected 'inf', '-inf' or 'nan'")
    return float(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON; non-finite floats are written as {{{FLOAT_TAG!r}: ...}}")


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= 300 else text[:297] + "..."
