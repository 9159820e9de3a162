"""The `.tpumodel` file: what codegen produces and the device runtime loads (no xDSL).

Layout (docs/tpumodel.md has every detail, for readers in other languages):

    offset  size  field
         0     8  magic b"TPUMODEL"
         8     4  format version, uint32 little endian
        12     8  header length H in bytes, uint64 little endian
        20     8  blob length B in bytes, uint64 little endian
        28    32  SHA-256 of the H header bytes followed by the B blob bytes
        60     H  header: UTF-8 JSON, padded with spaces so the blob starts on a
                  multiple of 64 bytes
      60+H     B  blob: the coefficients, placed at DDR address 0

The header holds the name, chip, mode, DDR size, inputs, outputs, named
tensors, layer groups and the program: one JSON array per instruction, one
instruction per line, its fields by position (the header's `fields` table names
them); layer names and Compute attributes are indices into the header's
`layers` and `attrs` tables, so a name or an attribute dict shared by many
instructions is written once, and an instruction's group is an index into
`groups` (-1 for none).
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import os
import struct
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpu_xdsl.device.isa import (
    DTYPE_SIZES,
    INSTRUCTIONS,
    DdrView,
    Instruction,
    LocalTensor,
)
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.files import write_atomic

FORMAT_VERSION = 2

MAGIC = b"TPUMODEL"
# magic, version, header length, blob length, SHA-256 of header + blob
_FIXED = struct.Struct("<8sIQQ32s")
FIXED_HEADER_BYTES = _FIXED.size  # 60
BLOB_ALIGNMENT = 64

DDR_VIEW_FIELDS = ("addr", "dtype", "shape", "strides")
LOCAL_TENSOR_FIELDS = ("addr", "dtype", "shape4", "view", "eu_align")
# Every instruction row starts with these; `layer` is an index into the header's `layers`,
# `group` one into its `groups` (-1: in no group).
_COMMON_FIELDS = ("op", "id", "deps", "layer", "group")
# The fields after the common ones, in row order, and how each is encoded.
_OPERANDS: dict[str, tuple[tuple[str, str], ...]] = {
    "DmaLoad": (("src", "ddr"), ("dst", "local")),
    "DmaStore": (("src", "local"), ("dst", "ddr")),
    "DmaCopy": (("src", "ddr"), ("dst", "ddr")),
    "DmaFill": (("dst", "ddr"), ("value", "number")),
    # `attrs` is an index into the header's `attrs` table.
    "Compute": (
        ("kind", "str"),
        ("inputs", "locals_or_null"),
        ("outputs", "locals"),
        ("attrs", "attrs"),
        ("macs", "int"),
    ),
}
INSTRUCTION_FIELDS = {op: _COMMON_FIELDS + tuple(name for name, _ in operands) for op, operands in _OPERANDS.items()}
# The header's `fields` table: what each position of a row or operand array holds.
_FIELDS_TABLE = {
    **{op: list(names) for op, names in INSTRUCTION_FIELDS.items()},
    "DdrView": list(DDR_VIEW_FIELDS),
    "LocalTensor": list(LOCAL_TENSOR_FIELDS),
}
_IO_FIELDS = ("name", "shape", "dtype", "addr", "scale", "zero_point", "scales")
_TENSOR_FIELDS = ("name", "shape", "dtype", "addr", "written_by", "scale", "zero_point", "scales")
_GROUP_FIELDS = ("name", "ops", "n_slices", "h_slices")
# Non-finite floats have no JSON number: they are written as {"$float": "inf" | "-inf" | "nan"}.
_FLOAT_TAG = "$float"
_RECOMPILE = "recompile the model with `tpu-xdsl deploy`"


class ModelFileError(TpuXdslError):
    """A .tpumodel file is missing, corrupt, truncated, of an unknown version, or for another chip."""


@dataclass(frozen=True)
class IoDesc:
    """A model input or output: where it lives in DDR and how it is quantized.

    `scale`/`zero_point` for an INT8 tensor quantized per tensor, `scales` (along
    `channel_axis`, 1 unless a features-last tensor's last axis) for one quantized
    per channel; both absent for float tensors."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    addr: int
    scale: float | None = None
    zero_point: int = 0
    scales: tuple[float, ...] | None = None
    channel_axis: int = 1


@dataclass(frozen=True)
class TensorDesc:
    """A named tensor of the program (for debugging and --dump-all): its DDR place and
    the instruction whose write completes it."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    addr: int
    written_by: int
    scale: float | None = None
    zero_point: int = 0
    scales: tuple[float, ...] | None = None
    channel_axis: int = 1


@dataclass(frozen=True)
class GroupDesc:
    """A layer group: ops run slice by slice out of local memory, their intermediate
    tensors never in DDR. `name` is the last op's tensor name, `ops` the tensor names
    of its ops in program order; the output is cut into `n_slices` (batch) x
    `h_slices` (height) steps. For profiles: instructions carry the group's index."""

    name: str
    ops: tuple[str, ...]
    n_slices: int
    h_slices: int


@dataclass
class TpuModel:
    """A compiled model: the instruction streams (one program, each instruction names its
    engine), the coefficients placed at DDR address 0, the DDR the program needs, its
    inputs, outputs, named tensors and layer groups."""

    name: str
    chip: str
    mode: str
    instructions: list[Instruction]
    coefficients: bytes
    ddr_bytes: int
    inputs: list[IoDesc]
    outputs: list[IoDesc]
    tensors: list[TensorDesc] = field(default_factory=list)
    groups: list[GroupDesc] = field(default_factory=list)
    version: int = FORMAT_VERSION
    # The image preprocessing the model was imported with (TOP's module.preprocess), so
    # that `tpu-xdsl run` can feed it images; None when not recorded.
    preprocess: dict[str, Any] | None = None


# -- saving -------------------------------------------------------------------------------


def save_model(model: TpuModel, path: str | Path) -> None:
    """Write `model` to `path` atomically (a failure leaves no file behind).

    A model the format cannot hold exactly (ids not 0..n-1, a forward dependency,
    attrs that are not plain JSON values) is a compiler bug: ValueError."""
    path = Path(path)
    if model.version != FORMAT_VERSION:
        raise ValueError(f"model version {model.version}: this code writes version {FORMAT_VERSION} only")
    problem = _program_problem(model.instructions)
    if problem:
        raise ValueError(f"cannot save {path}: {problem}")
    try:
        header = _header_text(model).encode("utf-8")
    except ValueError as e:
        raise ValueError(f"cannot save {path}: {e}") from None
    header += b" " * (-(FIXED_HEADER_BYTES + len(header)) % BLOB_ALIGNMENT)
    blob = bytes(model.coefficients)
    digest = hashlib.sha256(header)
    digest.update(blob)
    fixed = _FIXED.pack(MAGIC, FORMAT_VERSION, len(header), len(blob), digest.digest())

    def write(f) -> None:
        for part in (fixed, header, blob):
            f.write(part)

    try:
        write_atomic(path, write, binary=True)
    except OSError as e:
        raise ModelFileError(f"{path}: cannot write ({e.strerror}); check that its folder exists and is writable") from e




def _header_text(model: TpuModel) -> str:
    """The header JSON: one key per line, one instruction per line (so `less` shows the program).

    Every value is checked with the loader's own decoders first: save refuses what
    load would refuse, naming the instruction or descriptor."""
    layers = {name: index for index, name in enumerate(dict.fromkeys(i.layer for i in model.instructions))}
    _within("layer names", _strs, list(layers))
    attrs: dict[str, int] = {}  # JSON text of an attrs dict -> its index in the `attrs` table
    groups = [_group_json(g, f"groups[{k}]") for k, g in enumerate(model.groups)]
    rows = ",\n".join(_dumps(_row(i, layers, attrs, len(groups))) for i in model.instructions)
    top = {
        "name": _within("name", _str, model.name),
        "chip": _within("chip", _str, model.chip),
        "mode": _within("mode", _str, model.mode),
        "ddr_bytes": _within("ddr_bytes", _int, model.ddr_bytes),
        "inputs": [_desc_json(d, _IO_FIELDS, f"inputs[{k}]") for k, d in enumerate(model.inputs)],
        "outputs": [_desc_json(d, _IO_FIELDS, f"outputs[{k}]") for k, d in enumerate(model.outputs)],
        "tensors": [_desc_json(d, _TENSOR_FIELDS, f"tensors[{k}]") for k, d in enumerate(model.tensors)],
        "groups": groups,
        "fields": _FIELDS_TABLE,
        "layers": list(layers),
        "instruction_count": len(model.instructions),
        "preprocess": _json_value(model.preprocess, "preprocess") if model.preprocess is not None else None,
    }
    lines = [f"{json.dumps(key)}:{_dumps(value)}," for key, value in top.items()]
    lines.append('"attrs":[\n' + ",\n".join(attrs) + "\n],")
    return "{\n" + "\n".join(lines) + '\n"instructions":[\n' + rows + "\n]}\n"


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _desc_json(desc: IoDesc | TensorDesc, names: tuple[str, ...], where: str) -> dict[str, Any]:
    data = {name: getattr(desc, name) for name in names}
    data["shape"] = _list_of(desc.shape)
    data["scales"] = _list_of(desc.scales)
    if desc.channel_axis != 1:  # written only when not axis 1: files of axis-1 scales stay as they were
        data["channel_axis"] = desc.channel_axis
    _desc(data, names, where)
    return _json_value(data, where)


def _group_json(group: GroupDesc, where: str) -> dict[str, Any]:
    data = {name: getattr(group, name) for name in _GROUP_FIELDS}
    data["ops"] = _list_of(group.ops)
    _group(data, where)
    return data


def _list_of(values: Any) -> Any:
    return list(values) if isinstance(values, tuple | list) else values


def _row(instruction: Instruction, layers: dict[str, int], attrs: dict[str, int], groups: int) -> list[Any]:
    op = type(instruction).__name__
    if INSTRUCTIONS.get(op) is not type(instruction):
        raise ValueError(f"instruction {instruction.id}: {op} is not an instruction of the device")
    try:
        _group_index(instruction.group, groups)
    except ValueError as e:
        raise ValueError(f"instruction {instruction.id} ({op}): {e}") from None
    row = [op, instruction.id, list(instruction.deps), layers[instruction.layer], instruction.group]
    for name, kind in _OPERANDS[op]:
        value = getattr(instruction, name)
        try:
            if kind == "attrs":
                _object(value)
                row.append(attrs.setdefault(_dumps(_json_value(value, "")), len(attrs)))
            else:
                encoded = _ENCODE[kind](value)
                _DECODE[kind](encoded)  # refuse what load would refuse
                row.append(_json_value(encoded, "") if kind == "number" else encoded)
        except ValueError as e:
            raise ValueError(f"instruction {instruction.id} ({op}): {name}: {e}") from None
    return row


def _ddr_json(view: DdrView) -> list[Any]:
    return [view.addr, view.dtype, _list_of(view.shape), _list_of(view.strides)]


def _local_json(tensor: LocalTensor | None) -> list[Any] | None:
    if tensor is None:
        return None
    return [tensor.addr, tensor.dtype, _list_of(tensor.shape4), _list_of(tensor.view), tensor.eu_align]


_ENCODE: dict[str, Callable[[Any], Any]] = {
    "ddr": _ddr_json,
    "local": _local_json,
    "locals": lambda tensors: [_local_json(t) for t in tensors],
    "locals_or_null": lambda tensors: [_local_json(t) for t in tensors],
    "number": lambda value: value,
    "int": lambda value: value,
    "str": lambda value: value,
}


def _json_value(value: Any, where: str) -> Any:
    """`value` as JSON that loads back equal: non-finite floats tagged; tuples, numpy
    scalars and other types refused (they would load back as something else)."""
    if value is None or type(value) in (str, bool, int):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else {_FLOAT_TAG: repr(value)}
    if type(value) is list:
        return [_json_value(v, where) for v in value]
    if type(value) is dict:
        if not all(type(k) is str for k in value) or _FLOAT_TAG in value:
            raise ValueError(f"{where or 'a dict'}: keys must be strings other than {_FLOAT_TAG!r}")
        return {k: _json_value(v, f"{where}.{k}" if where else k) for k, v in value.items()}
    raise ValueError(
        f"{where + ': ' if where else ''}{type(value).__name__} {_show(value)} would not load back as itself; "
        "use None, bool, int, float, str, list or dict"
    )


# -- loading ------------------------------------------------------------------------------


def load_model(path: str | Path, chip: str | None = None) -> TpuModel:
    """Read a .tpumodel file; with `chip`, refuse one built for another chip.

    Every problem with the file is a one-line ModelFileError naming it."""
    path = Path(path)
    header_bytes, blob = _read_checked(path)
    try:
        with _without_cyclic_gc():
            header = json.loads(header_bytes.decode("utf-8"), object_hook=_tagged_float, parse_constant=_no_constant)
            model = _model_from_header(header, blob)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ModelFileError(f"{path}: malformed header ({_one_line(e)}); {_RECOMPILE}") from e
    problem = _program_problem(model.instructions)
    if problem:
        raise ModelFileError(f"{path}: {problem}; {_RECOMPILE}")
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
            fixed = f.read(FIXED_HEADER_BYTES)
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
                        f"{FORMAT_VERSION}: {_RECOMPILE}"
                    )
            if size < FIXED_HEADER_BYTES:
                raise ModelFileError(
                    f"{path}: not a .tpumodel file, or truncated: {size} bytes is shorter than the "
                    f"{FIXED_HEADER_BYTES}-byte fixed header; {_RECOMPILE}"
                )
            _, _, header_length, blob_length, checksum = _FIXED.unpack(fixed)
            expected = FIXED_HEADER_BYTES + header_length + blob_length
            if expected > size:
                raise ModelFileError(
                    f"{path} is truncated: it has {size} bytes, its fixed header says {expected}; "
                    f"copy it again or {_RECOMPILE}"
                )
            if expected < size:
                raise ModelFileError(
                    f"{path} is corrupt: {size - expected} unexpected bytes after the model; {_RECOMPILE}"
                )
            header = f.read(header_length)
            blob = f.read(blob_length)
    except FileNotFoundError as e:
        raise ModelFileError(f"{path}: no such file; give the .tpumodel that `tpu-xdsl deploy` wrote") from e
    except IsADirectoryError as e:
        raise ModelFileError(f"{path} is a folder; give a .tpumodel file") from e
    except OSError as e:
        raise ModelFileError(f"{path}: cannot read ({e.strerror})") from e
    digest = hashlib.sha256(header)
    digest.update(blob)
    if digest.digest() != checksum:
        raise ModelFileError(f"{path} is corrupt (its SHA-256 checksum does not match); {_RECOMPILE}")
    return header, blob


def _tagged_float(obj: dict[str, Any]) -> Any:
    if len(obj) != 1 or _FLOAT_TAG not in obj:
        return obj
    text = obj[_FLOAT_TAG]
    if text not in ("inf", "-inf", "nan"):
        raise ValueError(f"{{{_FLOAT_TAG!r}: {_show(text)}}}: expected 'inf', '-inf' or 'nan'")
    return float(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON; non-finite floats are written as {{{_FLOAT_TAG!r}: ...}}")


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= 300 else text[:297] + "..."


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _model_from_header(header: Any, blob: bytes) -> TpuModel:
    """The model the parsed header describes; ValueError naming the field that is wrong.

    The decoders below raise a short ValueError; callers add where it happened."""
    if type(header) is not dict:
        raise ValueError("the header is not a JSON object")
    missing = [key for key in _HEADER_KEYS if key not in header]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    if header["fields"] != _FIELDS_TABLE:
        raise ValueError(f"its `fields` table differs from version {FORMAT_VERSION}'s")
    layers = _within("layers", _strs, header["layers"])
    attrs_table = _within("attrs", _list, header["attrs"])
    for index, attrs in enumerate(attrs_table):
        _within(f"attrs[{index}]", _object, attrs)
    rows = _within("instructions", _list, header["instructions"])
    count = _within("instruction_count", _int, header["instruction_count"])
    if count != len(rows):
        raise ValueError(f"instruction_count is {count} but there are {len(rows)} instructions")
    groups = [GroupDesc(**_group(g, f"groups[{i}]")) for i, g in enumerate(_within("groups", _list, header["groups"]))]
    instructions = [
        _instruction(row, position, layers, attrs_table, len(groups)) for position, row in enumerate(rows)
    ]
    ddr_bytes = _within("ddr_bytes", _int, header["ddr_bytes"])
    inputs, outputs, tensors = (_within(key, _list, header[key]) for key in ("inputs", "outputs", "tensors"))
    if ddr_bytes < len(blob):
        raise ValueError(f"ddr_bytes {ddr_bytes} is less than the {len(blob)} coefficient bytes")
    return TpuModel(
        name=_within("name", _str, header["name"]),
        chip=_within("chip", _str, header["chip"]),
        mode=_within("mode", _str, header["mode"]),
        instructions=instructions,
        coefficients=blob,
        ddr_bytes=ddr_bytes,
        inputs=[IoDesc(**_desc(d, _IO_FIELDS, f"inputs[{i}]")) for i, d in enumerate(inputs)],
        outputs=[IoDesc(**_desc(d, _IO_FIELDS, f"outputs[{i}]")) for i, d in enumerate(outputs)],
        tensors=[TensorDesc(**_desc(d, _TENSOR_FIELDS, f"tensors[{i}]")) for i, d in enumerate(tensors)],
        groups=groups,
        version=FORMAT_VERSION,
        preprocess=_preprocess(header.get("preprocess")),
    )


def _preprocess(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    return _within("preprocess", _object, value)


_HEADER_KEYS = (
    "name", "chip", "mode", "ddr_bytes", "inputs", "outputs", "tensors", "groups",
    "fields", "layers", "instruction_count", "attrs", "instructions",
)


def _program_problem(instructions: list[Instruction]) -> str | None:
    """What breaks the program's order (ids 0..n-1, dependencies on earlier instructions), if anything."""
    for position, instruction in enumerate(instructions):
        if type(instruction.id) is not int or instruction.id != position:
            return f"{_name(instruction, position)} has id {instruction.id!r}; ids must be 0, 1, 2, ... in program order"
        for dep in instruction.deps:
            if not (type(dep) is int and 0 <= dep < position):
                return f"{_name(instruction, position)} depends on instruction {dep!r}, which does not come before it"
    return None


def _name(instruction: Instruction, position: int) -> str:
    return f"instruction {position} ({type(instruction).__name__}, layer {instruction.layer or '-'})"


def _within(where: str, decode: Callable[[Any], Any], value: Any) -> Any:
    try:
        return decode(value)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def _int(value: Any) -> int:
    if type(value) is not int:
        raise ValueError(f"expected an integer, got {_show(value)}")
    return value


def _str(value: Any) -> str:
    if type(value) is not str:
        raise ValueError(f"expected a string, got {_show(value)}")
    return value


def _list(value: Any) -> list[Any]:
    if type(value) is not list:
        raise ValueError(f"expected a list, got {_show(value)}")
    return value


def _object(value: Any) -> dict[str, Any]:
    if type(value) is not dict:
        raise ValueError(f"expected an object, got {_show(value)}")
    return value


def _ints(value: Any) -> tuple[int, ...]:
    if type(value) is list:
        for v in value:
            if type(v) is not int:
                break
        else:
            return tuple(value)
    raise ValueError(f"expected a list of integers, got {_show(value)}")


def _strs(value: Any) -> list[str]:
    if type(value) is not list or not set(map(type, value)) <= {str}:
        raise ValueError(f"expected a list of strings, got {_show(value)}")
    return value


def _number(value: Any) -> float:
    if type(value) not in (int, float):
        raise ValueError(f"expected a number, got {_show(value)}")
    return value


def _number_or_null(value: Any) -> float | None:
    return None if value is None else _number(value)


def _dtype(value: Any) -> str:
    if type(value) is not str or value not in DTYPE_SIZES:
        raise ValueError(f"unknown dtype {_show(value)}")
    return value


def _ddr_view(value: Any) -> DdrView:
    if type(value) is not list or len(value) != 4:
        raise ValueError(f"expected [addr, dtype, shape, strides], got {_show(value)}")
    addr, dtype, shape, strides = value
    view = DdrView(
        _within("addr", _int, addr), _within("dtype", _dtype, dtype),
        _within("shape", _ints, shape), _within("strides", _ints, strides),
    )
    if len(view.shape) != len(view.strides):
        raise ValueError(f"{len(view.shape)} dims but {len(view.strides)} strides")
    return view


def _local_tensor(value: Any) -> LocalTensor:
    if type(value) is not list or len(value) != 5:
        raise ValueError(f"expected [addr, dtype, shape4, view, eu_align], got {_show(value)}")
    addr, dtype, shape4, view, eu_align = value
    shape4 = _within("shape4", _ints, shape4)
    if len(shape4) != 4:
        raise ValueError(f"shape4 has {len(shape4)} dims, not 4")
    if type(eu_align) is not bool:
        raise ValueError(f"eu_align is {_show(eu_align)}, not true or false")
    return LocalTensor(
        _within("addr", _int, addr), _within("dtype", _dtype, dtype), shape4,  # type: ignore[arg-type]
        _within("view", _ints, view), eu_align,
    )


def _locals(value: Any) -> tuple[LocalTensor, ...]:
    return tuple(_local_tensor(t) for t in _list(value))


def _locals_or_null(value: Any) -> tuple[LocalTensor | None, ...]:
    return tuple(None if t is None else _local_tensor(t) for t in _list(value))


_DECODE: dict[str, Callable[[Any], Any]] = {
    "ddr": _ddr_view,
    "local": _local_tensor,
    "locals": _locals,
    "locals_or_null": _locals_or_null,
    "number": _number,
    "attrs": _int,  # an index into the `attrs` table, resolved by _instruction
    "int": _int,
    "str": _str,
}
# Each row after its `op`: the field names and their decoders (`layer` is an index too).
_ROW_DECODERS = {
    op: (
        ("id", _int), ("deps", _ints), ("layer", _int), ("group", _int),
        *((name, _DECODE[kind]) for name, kind in operands),
    )
    for op, operands in _OPERANDS.items()
}


def _instruction(
    row: Any, position: int, layers: list[str], attrs_table: list[dict[str, Any]], groups: int
) -> Instruction:
    if type(row) is not list or not row or type(row[0]) is not str or row[0] not in _OPERANDS:
        raise ValueError(f"instruction {position}: not an instruction: {_show(row)}")
    op = row[0]
    decoders = _ROW_DECODERS[op]
    if len(row) != 1 + len(decoders):
        raise ValueError(f"instruction {position} ({op}): {len(row)} fields, not {1 + len(decoders)}")
    values = {}
    for (name, decode), value in zip(decoders, row[1:], strict=True):
        try:
            values[name] = decode(value)
        except ValueError as e:
            raise ValueError(f"instruction {position} ({op}): {name}: {e}") from None
    if not 0 <= values["layer"] < len(layers):
        raise ValueError(f"instruction {position} ({op}): layer {values['layer']} is not an index of `layers`")
    values["layer"] = layers[values["layer"]]
    try:
        _group_index(values["group"], groups)
    except ValueError as e:
        raise ValueError(f"instruction {position} ({op}): {e}") from None
    if "attrs" in values:
        if not 0 <= values["attrs"] < len(attrs_table):
            raise ValueError(f"instruction {position} ({op}): attrs {values['attrs']} is not an index of `attrs`")
        values["attrs"] = attrs_table[values["attrs"]]
    ident = values.pop("id")
    return INSTRUCTIONS[op](ident, **values)


def _desc(data: Any, names: tuple[str, ...], where: str) -> dict[str, Any]:
    """The fields of an IoDesc or TensorDesc (`channel_axis` optional, 1 when absent)."""
    if type(data) is not dict or set(data) - {"channel_axis"} != set(names):
        raise ValueError(f"{where}: expected an object with the fields {', '.join(names)} (and channel_axis)")
    values = {
        "name": _within(f"{where}.name", _str, data["name"]),
        "shape": _within(f"{where}.shape", _ints, data["shape"]),
        "dtype": _within(f"{where}.dtype", _str, data["dtype"]),
        "addr": _within(f"{where}.addr", _int, data["addr"]),
        "scale": _within(f"{where}.scale", _number_or_null, data["scale"]),
        "zero_point": _within(f"{where}.zero_point", _int, data["zero_point"]),
        "scales": None,
        "channel_axis": _within(f"{where}.channel_axis", _int, data.get("channel_axis", 1)),
    }
    if data["scales"] is not None:
        scales = _within(f"{where}.scales", _list, data["scales"])
        values["scales"] = tuple(_within(f"{where}.scales", _number, s) for s in scales)
    if "written_by" in names:
        values["written_by"] = _within(f"{where}.written_by", _int, data["written_by"])
    return values


def _group_index(index: Any, groups: int) -> None:
    if not -1 <= _within("group", _int, index) < groups:
        raise ValueError(f"group {index} is neither -1 nor an index of `groups`")


def _group(data: Any, where: str) -> dict[str, Any]:
    """The fields of a GroupDesc."""
    if type(data) is not dict or set(data) != set(_GROUP_FIELDS):
        raise ValueError(f"{where}: expected an object with the fields {', '.join(_GROUP_FIELDS)}")
    values = {
        "name": _within(f"{where}.name", _str, data["name"]),
        "ops": tuple(_within(f"{where}.ops", _strs, data["ops"])),
        "n_slices": _within(f"{where}.n_slices", _int, data["n_slices"]),
        "h_slices": _within(f"{where}.h_slices", _int, data["h_slices"]),
    }
    if values["n_slices"] < 1 or values["h_slices"] < 1:
        raise ValueError(f"{where}: {values['n_slices']} x {values['h_slices']} slices; both must be at least 1")
    return values


# -- summary ------------------------------------------------------------------------------


def model_summary(model: TpuModel) -> list[str]:
    """Lines describing the model, for `tpu-xdsl info`."""
    by_type = Counter(type(i).__name__ for i in model.instructions)
    by_engine = Counter(i.engine for i in model.instructions)
    lines = [
        f"model: {model.name}",
        f"chip: {model.chip}",
        f"mode: {model.mode}",
        f"format version: {model.version}",
        f"instructions: {len(model.instructions)} ("
        + ", ".join(f"{op} {by_type[op]}" for op in INSTRUCTIONS if by_type[op])
        + ")",
        "engines: " + ", ".join(f"{engine} {by_engine[engine]}" for engine in ("dma", "compute")),
        f"DDR bytes: {len(model.coefficients):,} coefficients / {model.ddr_bytes:,} total",
    ]
    for role, descs in (("input", model.inputs), ("output", model.outputs)):
        for d in descs:
            shape = "x".join(str(s) for s in d.shape) or "scalar"
            lines.append(f"{role} {d.name}: {shape} {d.dtype} at DDR 0x{d.addr:x}, {_quantization(d)}")
    lines.append(f"named tensors: {len(model.tensors)}")
    lines.append(f"layer groups: {len(model.groups)}")
    return lines


def _quantization(desc: IoDesc) -> str:
    if desc.scales is not None:
        return f"per-channel scales ({len(desc.scales)} channels), zero point {desc.zero_point}"
    if desc.scale is not None:
        return f"scale {desc.scale:.6g}, zero point {desc.zero_point}"
    return "not quantized"


def instruction_lines(model: TpuModel) -> list[str]:
    """Every instruction, one line each, for `tpu-xdsl info --instructions`: its id, engine,
    kind, layer, group and dependencies, then its operands as the file encodes them
    (DDR views [addr, dtype, shape, strides], local tensors [addr, dtype, shape4, view,
    eu_align]), and the SHA-256 of the coefficients they read: two models whose lines are
    equal run the same program on the same data."""
    lines = [f"coefficients: {len(model.coefficients)} bytes, sha256 {hashlib.sha256(model.coefficients).hexdigest()}"]
    for instruction in model.instructions:
        op = type(instruction).__name__
        operands = []
        for name, kind in _OPERANDS[op]:
            value = getattr(instruction, name)
            encoded = _json_value(value, "") if kind == "attrs" else _ENCODE[kind](value)
            operands.append(f"{name}={_dumps(encoded)}")
        lines.append(
            f"{instruction.id:>6} {instruction.engine:<7} {op:<8} {instruction.layer} group={instruction.group} "
            f"deps={_dumps(list(instruction.deps))} " + " ".join(operands)
        )
    return lines


def memory_map_lines(model: TpuModel) -> list[str]:
    """The DDR map for `tpu-xdsl info` and the debugger: coefficients, then every named
    tensor, input and output by address."""
    import numpy as np

    lines = ["memory map (DDR):",
             f"  {0:#012x} - {len(model.coefficients):#012x}  coefficients ({len(model.coefficients)} bytes)"]
    named = {d.name for d in model.tensors}
    entries = [*model.tensors, *(d for d in (*model.inputs, *model.outputs) if d.name not in named)]
    for desc in sorted(entries, key=lambda d: (d.addr, d.name)):
        size = int(np.prod(desc.shape)) * DTYPE_SIZES[desc.dtype] if desc.shape else DTYPE_SIZES[desc.dtype]
        lines.append(f"  {desc.addr:#012x} - {desc.addr + size:#012x}  {desc.name} {list(desc.shape)} {desc.dtype}")
    return lines
