"""import-calibration: a calibration table's ranges become the tensor types of a TOP module.

Every float tensor of @main whose name has a row in the table gets the type
`tensor<..., #top.calibrated<threshold, min, max>>` (TPU-MLIR's calibrated
type), so the ranges are visible in the `.mlir` and INT8 lowering reads them
from the IR. Per-channel ranges, when the table has them, go to the weight
file ([2, C]: min, max) and the type names the entry and the channel axis:
`#top.channel_calibrated<threshold, min, max, "conv1_channel_ranges", 1>`. The
module state becomes TOP_CALIBRATED.

A table without rows for most of the module's tensors was made for another
model: an error. Tensors without a row, and rows naming no tensor, are warnings
(named); INT8 lowering later refuses an op whose tensors it needs lack a range.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from tpu_xdsl.calibration.table import CalibrationTable, read_table
from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.dialects.quant_types import FLOAT_TYPES, Calibration, calibrated_type
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.transforms.matching import sync_function_type
from tpu_xdsl.weights import weights_of

CALIBRATED_STATE = "TOP_CALIBRATED"
_UNCALIBRATED_OPS = ("top.weight", "top.none")


class CalibrationMismatchError(TpuXdslError):
    """A calibration table does not belong to the module."""


@dataclass
class CalibrationImport:
    """What attaching a table did: tensors calibrated, tensors left without a row, unused rows."""

    calibrated: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)

    def warnings(self, source: str) -> list[str]:
        lines = []
        if self.missing:
            lines.append(
                f"calibration table {source} has no row for {len(self.missing)} tensor(s) of the module: "
                f"{_first(self.missing)}; INT8 ops producing them cannot lower"
            )
        if self.unused:
            lines.append(
                f"calibration table {source} has {len(self.unused)} row(s) naming no tensor of the module: "
                f"{_first(self.unused)}"
            )
        return lines


def _first(names: list[str], count: int = 3) -> str:
    shown = ", ".join(names[:count])
    return shown + (f" and {len(names) - count} more" if len(names) > count else "")


def _is_float_tensor(t) -> bool:
    return isinstance(t, TensorType) and isinstance(t.element_type, FLOAT_TYPES)


def _channel_ranges(module: ModuleOp, name: str, t: TensorType, table: CalibrationTable) -> tuple[str | None, int]:
    """The weight entry holding the tensor's per-channel [min; max] and their axis, added
    when the table has them for a tensor of that channel count along that axis."""
    found = table.channels.get(name)
    shape = t.get_shape()
    axis = table.channel_axes.get(name, 1)
    if found is None or not 1 <= axis < len(shape) or len(found[0]) != shape[axis]:
        return None, 1
    store = weights_of(module)
    entry = store.unique_name(f"{name}_channel_ranges")
    store[entry] = np.array(found, dtype=np.float32)
    return entry, axis


def import_calibration(module: ModuleOp, table: CalibrationTable, source: str) -> CalibrationImport:
    """Set the calibrated type of every float tensor of @main that `table` has a row for."""
    rows = table.by_name()
    main = main_func(module)
    result = CalibrationImport()
    for op in main.body.block.ops:
        if op.name in _UNCALIBRATED_OPS or not op.name.startswith("top."):
            continue
        for name, value in zip(tensor_names(op), list(op.results)):
            if not _is_float_tensor(value.type):
                continue
            row = rows.get(name)
            if row is None:
                result.missing.append(name)
                continue
            ranges, axis = _channel_ranges(module, name, value.type, table)  # type: ignore[arg-type]
            calibration = Calibration(row.threshold, row.min, row.max, ranges, axis)
            new_type = calibrated_type(value.type, calibration)  # type: ignore[arg-type]
            Rewriter.replace_value_with_new_type(value, new_type)
            result.calibrated.append(name)
    if len(result.missing) > len(result.calibrated):
        first_row = table.rows[0].name if table.rows else "none"
        raise CalibrationMismatchError(
            f"calibration table {source} has rows for only {len(result.calibrated)} of the module's "
            f"{len(result.calibrated) + len(result.missing)} tensors (its first row is '{first_row}', the "
            f"module's first uncalibrated tensor '{result.missing[0]}'): it was made for another model; "
            "calibrate this one with tpu-xdsl calibrate"
        )
    known = set(result.calibrated) | set(result.missing)
    result.unused = [row.name for row in table.rows if row.name not in known]
    sync_function_type(main)
    module.attributes["module.state"] = StringAttr(CALIBRATED_STATE)
    return result


@dataclass(frozen=True)
class ImportCalibrationPass(ModulePass):
    """Attach the calibration table `table` (TPU-MLIR's format) to the module's tensor types."""

    name = "import-calibration"

    table: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not self.table:
            raise CalibrationMismatchError(
                "import-calibration needs the table: import-calibration{table=N_cali_table}"
            )
        imported = import_calibration(op, read_table(self.table), self.table)
        for line in imported.warnings(self.table):
            print(f"warning: {line}", file=sys.stderr)
