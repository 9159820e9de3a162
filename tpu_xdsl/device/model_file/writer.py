"""Writing a `.tpumodel` file: the header JSON (one key per line, one instruction per
line), padded so the blob starts aligned, the checksum, written atomically."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tpu_xdsl.device.isa import INSTRUCTIONS, Instruction
from tpu_xdsl.device.model_file.encode import ENCODE, dumps, json_value, list_of
from tpu_xdsl.device.model_file.format import (
    BLOB_ALIGNMENT,
    FIELDS_TABLE,
    FIXED_HEADER_BYTES,
    FORMAT_VERSION,
    GROUP_FIELDS,
    IO_FIELDS,
    OPERANDS,
    TENSOR_FIELDS,
    seal,
)
from tpu_xdsl.device.model_file.model import (
    GroupDesc,
    IoDesc,
    ModelFileError,
    TensorDesc,
    TpuModel,
)
from tpu_xdsl.device.model_file.validation import (
    DECODE,
    check_desc,
    check_group,
    check_group_index,
    check_kernel,
    check_model,
    decode_int,
    decode_object,
    decode_str,
    decode_strs,
    program_problem,
    within,
)
from tpu_xdsl.files import write_atomic


def save_model(model: TpuModel, path: str | Path) -> None:
    """Write `model` to `path` atomically (a failure leaves no file behind).

    A model the format cannot hold exactly (ids not 0..n-1, a forward dependency,
    attrs that are not plain JSON values), or that load_model would refuse (a tensor
    outside DDR, attributes of the wrong type...), is a compiler bug: ValueError."""
    path = Path(path)
    if model.version != FORMAT_VERSION:
        raise ValueError(f"model version {model.version}: this code writes version {FORMAT_VERSION} only")
    problem = program_problem(model.instructions)
    if problem:
        raise ValueError(f"cannot save {path}: {problem}")
    try:
        header = _header_text(model).encode("utf-8")
        check_model(model)
    except ValueError as e:
        raise ValueError(f"cannot save {path}: {e}") from None
    data = seal(_padded(header), bytes(model.coefficients))

    def write(f) -> None:
        f.write(data)

    try:
        write_atomic(path, write, binary=True)
    except OSError as e:
        raise ModelFileError(
            f"{path}: cannot write ({e.strerror}); check that its folder exists and is writable"
        ) from e


def _padded(header: bytes) -> bytes:
    """The header with the spaces that start the blob on a multiple of BLOB_ALIGNMENT."""
    return header + b" " * (-(FIXED_HEADER_BYTES + len(header)) % BLOB_ALIGNMENT)


def reseal(data: bytes, header: Callable[[Any], Any] | bytes | str) -> bytes:
    """`data` (a .tpumodel file's bytes) with another header, sealed as the writer seals it
    (padded, the checksum recomputed): what a hostile user can always do, for tests and
    fuzzing. `header` is the new header text, or a function given the parsed JSON header
    to edit in place (or to return a replacement). The fixed header's lengths are read
    as they are, unchecked; the blob is kept."""
    header_length, blob_length = struct.unpack_from("<QQ", data, 12)
    old = data[FIXED_HEADER_BYTES : FIXED_HEADER_BYTES + header_length]
    blob = data[FIXED_HEADER_BYTES + header_length : FIXED_HEADER_BYTES + header_length + blob_length]
    if callable(header):
        parsed = json.loads(old)
        replaced = header(parsed)
        header = json.dumps(parsed if replaced is None else replaced, ensure_ascii=False)
    text = header.encode("utf-8") if isinstance(header, str) else header
    return seal(_padded(text), blob)


def _header_text(model: TpuModel) -> str:
    """The header JSON: one key per line, one instruction per line (so `less` shows the program).

    Every value is checked with the loader's own decoders first: save refuses what
    load would refuse, naming the instruction or descriptor."""
    layers = {name: index for index, name in enumerate(dict.fromkeys(i.layer for i in model.instructions))}
    within("layer names", decode_strs, list(layers))
    attrs: dict[str, int] = {}  # JSON text of an attrs dict -> its index in the `attrs` table
    groups = [_group_json(g, f"groups[{k}]") for k, g in enumerate(model.groups)]
    rows = ",\n".join(dumps(_row(i, layers, attrs, len(groups))) for i in model.instructions)
    top = {
        "name": within("name", decode_str, model.name),
        "chip": within("chip", decode_str, model.chip),
        "mode": within("mode", decode_str, model.mode),
        "ddr_bytes": within("ddr_bytes", decode_int, model.ddr_bytes),
        "inputs": [_desc_json(d, IO_FIELDS, f"inputs[{k}]") for k, d in enumerate(model.inputs)],
        "outputs": [_desc_json(d, IO_FIELDS, f"outputs[{k}]") for k, d in enumerate(model.outputs)],
        "tensors": [_desc_json(d, TENSOR_FIELDS, f"tensors[{k}]") for k, d in enumerate(model.tensors)],
        "groups": groups,
        "fields": FIELDS_TABLE,
        "layers": list(layers),
        "instruction_count": len(model.instructions),
        "preprocess": json_value(model.preprocess, "preprocess") if model.preprocess is not None else None,
    }
    if model.weight_bytes is not None:
        top["weight_bytes"] = within("weight_bytes", decode_int, model.weight_bytes)
    lines = [f"{json.dumps(key)}:{dumps(value)}," for key, value in top.items()]
    lines.append('"attrs":[\n' + ",\n".join(attrs) + "\n],")
    return "{\n" + "\n".join(lines) + '\n"instructions":[\n' + rows + "\n]}\n"


def _desc_json(desc: IoDesc | TensorDesc, names: tuple[str, ...], where: str) -> dict[str, Any]:
    data = {name: getattr(desc, name) for name in names}
    data["shape"] = list_of(desc.shape)
    data["scales"] = list_of(desc.scales)
    if desc.channel_axis != 1:  # written only when not axis 1: files of axis-1 scales stay as they were
        data["channel_axis"] = desc.channel_axis
    check_desc(data, names, where)
    return json_value(data, where)


def _group_json(group: GroupDesc, where: str) -> dict[str, Any]:
    data = {name: getattr(group, name) for name in GROUP_FIELDS}
    data["ops"] = list_of(group.ops)
    check_group(data, where)
    return data


def _row(instruction: Instruction, layers: dict[str, int], attrs: dict[str, int], groups: int) -> list[Any]:
    op = type(instruction).__name__
    if INSTRUCTIONS.get(op) is not type(instruction):
        raise ValueError(f"instruction {instruction.id}: {op} is not an instruction of the device")
    try:
        check_group_index(instruction.group, groups)
    except ValueError as e:
        raise ValueError(f"instruction {instruction.id} ({op}): {e}") from None
    row = [op, instruction.id, list(instruction.deps), layers[instruction.layer], instruction.group]
    for name, kind in OPERANDS[op]:
        value = getattr(instruction, name)
        try:
            if kind == "attrs":
                text = dumps(json_value(decode_object(value), ""))
                check_kernel(instruction.kind, value)  # type: ignore[attr-defined]
                row.append(attrs.setdefault(text, len(attrs)))
            else:
                encoded = ENCODE[kind](value)
                DECODE[kind](encoded)  # refuse what load would refuse
                row.append(json_value(encoded, "") if kind == "number" else encoded)
        except ValueError as e:
            raise ValueError(f"instruction {instruction.id} ({op}): {name}: {e}") from None
    return row
