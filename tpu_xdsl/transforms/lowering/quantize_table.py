"""TPU-MLIR's quantize table: per-op modes for mixed precision.

    # op_name   mode
    conv1       F16
    softmax_0   F32

One `name MODE` per line, `#` starting a comment; the name is a tensor name
of the op (its output), the mode one of F32, F16, BF16, INT8 that the chip
has. A name the module does not have, an unknown mode or a repeated name is
an error naming the file and line.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path

from tpu_xdsl.device.chip import ChipConfig
from tpu_xdsl.errors import TpuXdslError

MODES = ("F32", "F16", "BF16", "INT8")


class QuantizeTableError(TpuXdslError):
    """A quantize table cannot be read or does not fit the module or chip."""


def read_quantize_table(path: str | Path, op_names: Iterable[str], chip: ChipConfig) -> dict[str, str]:
    """name -> mode, checked against the module's tensor names and the chip's modes."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) else "not a text file"
        raise QuantizeTableError(
            f"{path}: cannot read the quantize table ({reason}); give a text file of 'op_name MODE' lines"
        ) from e
    known = set(op_names)
    table: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        content = line.split("#", 1)[0].strip()
        if not content:
            continue
        where = f"{path}:{number}"
        fields = content.split()
        if len(fields) != 2:
            raise QuantizeTableError(
                f"{where}: expected 'op_name MODE', got {content[:60]!r}; write one op name and one mode per line"
            )
        name, mode = fields[0], fields[1].upper()
        if mode not in MODES:
            raise QuantizeTableError(f"{where}: unknown mode '{fields[1]}' for "
                                     f"'{name}'; choose one of {', '.join(MODES)}")
        if not chip.supports(mode):
            raise QuantizeTableError(
                f"{where}: chip {chip.name} has no {mode} mode for '{name}'; use one of {', '.join(chip.modes)}"
            )
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else "; names are the op's output tensor names in the .mlir"
            raise QuantizeTableError(f"{where}: the module has no op named '{name}'{hint}")
        if name in table:
            raise QuantizeTableError(
                f"{where}: '{name}' is listed twice (first on line {lines[name]}); keep one line per op"
            )
        table[name] = mode
        lines[name] = number
    return table
