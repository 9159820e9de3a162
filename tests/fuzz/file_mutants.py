"""Mutants of tpu-xdsl's own files: `.tpumodel` (bytes changed, the header/blob boundary moved,
header fields edited and the checksum recomputed as a hostile user would), TOP `.mlir` text
and its weight `.npz`."""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
import zipfile

import numpy as np

from tests.fuzz.onnx_mutants import byte_mutant
from tpu_xdsl.device.model_file.format import FIXED, FIXED_HEADER_BYTES


def split_model(data: bytes) -> tuple[tuple, bytes, bytes]:
    fixed = FIXED.unpack(data[:FIXED_HEADER_BYTES])
    h, b = fixed[2], fixed[3]
    start = FIXED_HEADER_BYTES
    return fixed, data[start:start + h], data[start + h:start + h + b]


def seal(version: int, header: bytes, blob: bytes) -> bytes:
    """The file a hostile user writes after editing: the checksum recomputed as the format says."""
    from tpu_xdsl.device.model_file import format as fmt

    sealer = getattr(fmt, "seal", None)  # the format's own sealing, when it covers the layout
    if sealer is not None:
        return sealer(header, blob, version)
    digest = hashlib.sha256(header + blob).digest()
    return FIXED.pack(b"TPUMODEL", version, len(header), len(blob), digest) + header + blob


def moved_boundary(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """The audit's case: header length -k, blob length +k, SHA-256 over the same bytes."""
    fixed, header, blob = split_model(data)
    k = rng.choice([1, 2, 4, 64])
    magic, version, h, b, digest = fixed
    how = rng.choice(["header-shorter", "header-longer"])
    if how == "header-shorter":
        h, b = h - k, b + k
    else:
        h, b = h + k, b - k
    return FIXED.pack(magic, version, h, b, digest) + header + blob, f"boundary moved {how} by {k}"


_HOSTILE_VALUES = [None, True, -1, 0, 1, 2 ** 31, 2 ** 63, 1e30, -1e30, 0.5, "bool", "", "x" * 3, [], [1e30],
                   [-1, 2], {}, {"a": 1}, [[]], "\u00e9", 10 ** 40]


def _leaves(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))
    yield path


def _set(value, path, new):
    for key in path[:-1]:
        value = value[key]
    if new is _DELETE:
        del value[path[-1]]
    else:
        value[path[-1]] = new


_DELETE = object()


def resealed_header(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One field of the JSON header given a hostile value (or removed), the file re-sealed."""
    fixed, header, blob = split_model(data)
    doc = json.loads(header)
    paths = [p for p in _leaves(doc) if p]
    path = rng.choice(paths)
    new = _DELETE if rng.random() < 0.1 else rng.choice(_HOSTILE_VALUES)
    try:
        _set(doc, path, new)
    except (KeyError, IndexError, TypeError):
        pass
    text = json.dumps(doc).encode()
    text += b" " * (-(FIXED_HEADER_BYTES + len(text)) % 64)
    shown = "deleted" if new is _DELETE else repr(new)[:30]
    return seal(fixed[1], text, blob), f"header {'/'.join(map(str, path))[:80]} = {shown}"


def tpumodel_mutant(data: bytes, rng: random.Random) -> tuple[bytes, str, bool]:
    """(mutant, what, must_fail): every byte change and every moved boundary must be refused."""
    r = rng.random()
    if r < 0.35:
        mutant, what = byte_mutant(data, rng)
        return mutant, what, mutant != data
    if r < 0.45:
        mutant, what = moved_boundary(data, rng)
        return mutant, what, True
    mutant, what = resealed_header(data, rng)
    return mutant, what, False


# ---- TOP .mlir and weights -------------------------------------------------------------


def mlir_mutant(text: str, rng: random.Random) -> tuple[bytes, str]:
    lines = text.splitlines(keepends=True)
    body = [i for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith(("builtin.module", "}"))]
    how = rng.choice(["delete", "duplicate", "swap", "number", "type", "ssa", "op", "truncate", "bytes", "attr"])
    i = rng.choice(body) if body else 0
    if how == "delete":
        lines.pop(i)
    elif how == "duplicate":
        lines.insert(i, lines[i])
    elif how == "swap":
        j = rng.choice(body)
        lines[i], lines[j] = lines[j], lines[i]
    elif how == "number":
        numbers = list(re.finditer(r"(?<![%\w])-?\d+", lines[i]))
        if numbers:
            m = rng.choice(numbers)
            value = rng.choice(["0", "-1", "999999999", "3", "1e30", "18446744073709551616"])
            lines[i] = lines[i][: m.start()] + value + lines[i][m.end():]
    elif how == "type":
        lines[i] = re.sub(r"\bf32\b", rng.choice(["i8", "f16", "i64", "f64", "bf16", "i1"]), lines[i], count=1)
    elif how == "ssa":
        names = re.findall(r"%[\w.]+", lines[i])
        if names:
            lines[i] = lines[i].replace(rng.choice(names), rng.choice(["%0", "%nowhere", "%1"]), 1)
    elif how == "op":
        lines[i] = re.sub(r'"?top\.\w+"?', rng.choice(["top.Frob", "top.Relu", "top.Conv", "tpu.Add"]),
                          lines[i], count=1)
    elif how == "truncate":
        joined = "".join(lines)
        return joined[: rng.randrange(len(joined))].encode(), "truncated"
    elif how == "bytes":
        raw = bytearray("".join(lines).encode())
        at = rng.randrange(len(raw))
        raw[at:at + 2] = b"\xff\xfe"
        return bytes(raw), f"invalid UTF-8 at {at}"
    else:
        lines[i] = re.sub(r"\{", "{bogus = 1 : i64, ", lines[i], count=1)
    return "".join(lines).encode(), f"{how} line {i + 1}"


def weights_mutant(data: bytes, rng: random.Random) -> tuple[bytes, str, bool]:
    """(mutant npz, what, must_fail): a weight of the wrong shape, dtype or name is known-bad."""
    how = rng.choice(["reshape", "flatten", "scalar", "rename", "drop", "dtype", "truncate", "pickle", "not-zip",
                      "extra", "values"])
    if how == "truncate":
        return data[: rng.randrange(len(data))], "truncated", True
    if how == "not-zip":
        return b"this is not a zip file\n", "not a zip", True
    arrays = dict(np.load(io.BytesIO(data), allow_pickle=False))
    name = rng.choice(sorted(arrays))
    a = arrays[name]
    must_fail = True
    if how == "reshape":
        arrays[name] = np.zeros(tuple(d + 1 for d in a.shape) or (2,), a.dtype)
    elif how == "flatten":
        arrays[name] = a.ravel()
        must_fail = a.ndim != 1
    elif how == "scalar":
        arrays[name] = np.array(a.ravel()[0] if a.size else 0, a.dtype)
        must_fail = a.shape != ()
    elif how == "rename":
        arrays[name + "_renamed"] = arrays.pop(name)
    elif how == "drop":
        arrays.pop(name)
    elif how == "dtype":
        arrays[name] = a.astype(np.float64 if a.dtype != np.float64 else np.float32)
    elif how == "pickle":
        arrays[name] = np.array([{"x": 1}], dtype=object)
    elif how == "extra":
        arrays["unused_extra"] = np.zeros(3, np.float32)
        must_fail = False
    else:
        arrays[name] = (a * 2).astype(a.dtype)
        must_fail = False
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for key, value in arrays.items():
            with z.open(f"{key}.npy", "w") as f:
                np.lib.format.write_array(f, np.asanyarray(value), allow_pickle=True)
    return buffer.getvalue(), f"{how} {name}", must_fail
