"""Values as the header's JSON: DDR views and local tensors as arrays, non-finite floats
tagged, everything else refused unless it loads back as itself."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from tpu_xdsl.device.isa import DdrView, LocalTensor
from tpu_xdsl.device.model_file.format import FLOAT_TAG
from tpu_xdsl.device.model_file.validation import show


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def list_of(values: Any) -> Any:
    return list(values) if isinstance(values, tuple | list) else values


def _ddr_json(view: DdrView) -> list[Any]:
    return [view.addr, view.dtype, list_of(view.shape), list_of(view.strides)]


def _local_json(tensor: LocalTensor | None) -> list[Any] | None:
    if tensor is None:
        return None
    return [tensor.addr, tensor.dtype, list_of(tensor.shape4), list_of(tensor.view), tensor.eu_align]


ENCODE: dict[str, Callable[[Any], Any]] = {
    "ddr": _ddr_json,
    "local": _local_json,
    "locals": lambda tensors: [_local_json(t) for t in tensors],
    "locals_or_null": lambda tensors: [_local_json(t) for t in tensors],
    "number": lambda value: value,
    "int": lambda value: value,
    "str": lambda value: value,
}


def json_value(value: Any, where: str) -> Any:
    """`value` as JSON that loads back equal: non-finite floats tagged; tuples, numpy
    scalars and other types refused (they would load back as something else)."""
    if value is None or type(value) in (str, bool, int):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else {FLOAT_TAG: repr(value)}
    if type(value) is list:
        return [json_value(v, where) for v in value]
    if type(value) is dict:
        if not all(type(k) is str for k in value) or FLOAT_TAG in value:
            raise ValueError(f"{where or 'a dict'}: keys must be strings other than {FLOAT_TAG!r}")
        return {k: json_value(v, f"{where}.{k}" if where else k) for k, v in value.items()}
    raise ValueError(
        f"{where + ': ' if where else ''}{type(value).__name__} {show(value)} would not load back as itself; "
        "use None, bool, int, float, str, list or dict"
    )
