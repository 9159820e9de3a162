"""TPU-MLIR's calibration table: header comments, then `name threshold min max` per tensor.

    # genetated time: 2024-05-01 10:00:59.743675
    # histogram number: 2048
    # sample number: 100
    # tune number: 5
    # quantization threshold calculation method: kl
    ###
    # op_name    threshold    min    max
    images 1.0000080 0.0000000 1.0000080
    conv1 56.4281803 -102.5830231 97.6811752

(TPU-MLIR spells the first header "genetated"; readers look for it, so it stays.)
Lines starting with `#` are comments; every other non-blank line is one
tensor: its name (no whitespace), the symmetric threshold, then min and max.

Per-channel ranges (for per-channel activation scales) follow in comment
lines, which TPU-MLIR's reader skips:

    #channel conv1 3 -1.2000000 0.9000000 -0.5000000 2.1000000 0.0000000 0.7000000
    #channel:2 fc1 2 -0.3000000 0.3000000 -250.0000000 310.0000000

the name, the channel count C, then min and max of each channel; the
channels are along axis 1, or along the axis after `#channel:` (the last axis
of a features-last tensor [N, L, C]).
"""

from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.weights import write_atomic


class CalibrationTableError(TpuXdslError):
    """A calibration table cannot be read, is malformed, or cannot be written."""


@dataclass(frozen=True)
class TableRow:
    name: str
    threshold: float
    min: float
    max: float


@dataclass
class CalibrationTable:
    rows: list[TableRow]
    # name -> (per-channel min, per-channel max), along axis 1 or the one `channel_axes` names
    channels: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)
    histogram_bins: int | None = None
    samples: int | None = None
    tune_num: int | None = None
    method: str | None = None
    generated: str = field(default_factory=lambda: str(datetime.datetime.now()))
    channel_axes: dict[str, int] = field(default_factory=dict)  # when not axis 1

    def by_name(self) -> dict[str, TableRow]:
        return {row.name: row for row in self.rows}

    def format(self) -> str:
        lines = [f"# genetated time: {self.generated}"]
        if self.histogram_bins is not None:
            lines.append(f"# histogram number: {self.histogram_bins}")
        if self.samples is not None:
            lines.append(f"# sample number: {self.samples}")
        if self.tune_num is not None:
            lines.append(f"# tune number: {self.tune_num}")
        if self.method is not None:
            lines.append(f"# quantization threshold calculation method: {self.method}")
        lines += ["###", "# op_name    threshold    min    max"]
        for row in self.rows:
            lines.append(f"{row.name} {row.threshold:.7f} {row.min:.7f} {row.max:.7f}")
        if self.channels:
            lines += [
                "###",
                (
                    "# per-channel ranges (axis 1, or #channel:AXIS): "
                    "#channel op_name channels min_0 max_0 min_1 max_1 ..."
                ),
            ]
        for name, (low, high) in self.channels.items():
            pairs = " ".join(f"{lo:.7f} {hi:.7f}" for lo, hi in zip(low, high, strict=True))
            axis = self.channel_axes.get(name, 1)
            prefix = CHANNEL_PREFIX if axis == 1 else f"{CHANNEL_PREFIX}:{axis}"
            lines.append(f"{prefix} {name} {len(low)} {pairs}")
        return "\n".join(lines) + "\n"


CHANNEL_PREFIX = "#channel"

_HEADERS = {
    "histogram number": "histogram_bins",
    "sample number": "samples",
    "tune number": "tune_num",
}


def write_table(path: str | Path, table: CalibrationTable) -> None:
    """Write `table` atomically: a failure leaves no partial file."""
    for row in table.rows:
        if not row.name or re.search(r"\s", row.name):
            raise CalibrationTableError(
                f"tensor name {row.name!r} has whitespace, which the table format cannot hold; "
                "rename the tensor in the ONNX model"
            )
    text = table.format()
    try:
        write_atomic(path, lambda f: f.write(text))
    except OSError as e:
        raise CalibrationTableError(f"{path}: cannot write the calibration table: {e.strerror}") from e


def read_table(path: str | Path) -> CalibrationTable:
    """Parse a table; a malformed line is an error naming the file and line number."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) else "not a text file"
        raise CalibrationTableError(
            f"{path}: cannot read the calibration table: {reason}; give the table tpu-xdsl calibrate wrote"
        ) from e
    table = CalibrationTable(rows=[], generated="")
    seen: dict[str, int] = {}
    fix = "fix the line or make the table again with tpu-xdsl calibrate"
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith((CHANNEL_PREFIX + " ", CHANNEL_PREFIX + ":")):
            _read_channels(table, stripped, f"{path}:{number}", fix)
            continue
        if stripped.startswith("#"):
            _read_header(table, stripped)
            continue
        if not stripped:
            continue
        where = f"{path}:{number}"
        fields = stripped.split()
        if len(fields) != 4:
            raise CalibrationTableError(
                f"{where}: expected 'name threshold min max', got {len(fields)} field(s): {stripped[:60]!r}; {fix}"
            )
        name = fields[0]
        try:
            threshold, low, high = (float(v) for v in fields[1:])
        except ValueError:
            raise CalibrationTableError(
                f"{where}: threshold, min and max of '{name}' must be numbers: {stripped[:60]!r}; {fix}"
            ) from None
        if not all(math.isfinite(v) for v in (threshold, low, high)):
            raise CalibrationTableError(f"{where}: '{name}' has a non-finite value: {stripped[:60]!r}; {fix}")
        if threshold <= 0:
            raise CalibrationTableError(f"{where}: '{name}' has threshold {threshold}; it must be positive; {fix}")
        if low > high:
            raise CalibrationTableError(f"{where}: '{name}' has min {low} above max {high}; {fix}")
        if name in seen:
            raise CalibrationTableError(f"{where}: '{name}' is listed twice (first on line {seen[name]}); {fix}")
        seen[name] = number
        table.rows.append(TableRow(name, threshold, low, high))
    if not table.rows:
        raise CalibrationTableError(
            f"{path}: no tensor rows; is this a calibration table? give the table tpu-xdsl calibrate wrote"
        )
    return table


def _read_channels(table: CalibrationTable, line: str, where: str, fix: str) -> None:
    prefix, *fields = line.split()
    try:
        axis = int(prefix.partition(":")[2] or 1)
        if axis < 1:
            raise ValueError
        name, count = fields[0], int(fields[1])
        values = [float(v) for v in fields[2:]]
    except (IndexError, ValueError):
        raise CalibrationTableError(
            f"{where}: expected '{CHANNEL_PREFIX} name channels min max ...' with numbers "
            f"('{CHANNEL_PREFIX}:AXIS ...', AXIS 1 or more, for another axis than 1): {line[:60]!r}; {fix}"
        ) from None
    if count < 1 or len(values) != 2 * count:
        raise CalibrationTableError(
            f"{where}: '{name}' has {len(values)} per-channel values for {count} channels (2 each); {fix}"
        )
    if not all(math.isfinite(v) for v in values):
        raise CalibrationTableError(f"{where}: '{name}' has a non-finite per-channel value; {fix}")
    if name in table.channels:
        raise CalibrationTableError(f"{where}: per-channel ranges of '{name}' are listed twice; {fix}")
    table.channels[name] = (values[0::2], values[1::2])
    if axis != 1:
        table.channel_axes[name] = axis


def _read_header(table: CalibrationTable, line: str) -> None:
    key, _, value = line.lstrip("#").partition(":")
    key, value = key.strip(), value.strip()
    if key == "genetated time":
        table.generated = value
    elif key == "quantization threshold calculation method":
        table.method = value
    elif key in _HEADERS and value.isdigit():
        setattr(table, _HEADERS[key], int(value))
