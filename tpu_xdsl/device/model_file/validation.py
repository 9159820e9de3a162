"""Validation of a parsed header: every field decoded and checked, the model built.

The decoders raise a short ValueError; callers add where it happened (`within`).
The writer runs the same decoders on what it writes, so save refuses what load
would refuse.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from tpu_xdsl.device.chip import CHIPS
from tpu_xdsl.device.isa import (
    DTYPE_SIZES,
    INSTRUCTIONS,
    Compute,
    DdrView,
    DmaCopy,
    DmaFill,
    DmaLoad,
    DmaStore,
    IllegalProgramError,
    Instruction,
    LocalTensor,
    where,
)
from tpu_xdsl.device.model_file.format import (
    FIELDS_TABLE,
    FORMAT_VERSION,
    GROUP_FIELDS,
    HEADER_KEYS,
    IO_FIELDS,
    OPERANDS,
    TENSOR_FIELDS,
)
from tpu_xdsl.device.model_file.model import GroupDesc, IoDesc, TensorDesc, TpuModel
from tpu_xdsl.limits import ResourceLimitError, check_tensor_size, max_tensor_bytes

T = TypeVar("T")


def show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def model_from_header(header: Any, blob: bytes) -> TpuModel:
    """The model the parsed header describes; ValueError naming the field that is wrong.

    The decoders below raise a short ValueError; callers add where it happened."""
    try:
        return _model_from_header(header, blob)
    finally:
        _LOCALS.clear()


def _model_from_header(header: Any, blob: bytes) -> TpuModel:
    _check_keys(header)
    layers, attrs_table, rows = _tables(header)
    listed = within("groups", decode_list, header["groups"])
    groups = [GroupDesc(**check_group(g, f"groups[{i}]")) for i, g in enumerate(listed)]
    checked: set[tuple[str, int]] = set()  # (kind, attrs index) pairs whose attributes are fine
    instructions = [
        _instruction(row, position, layers, attrs_table, len(groups), checked) for position, row in enumerate(rows)
    ]
    ddr_bytes = within("ddr_bytes", decode_int, header["ddr_bytes"])
    inputs, outputs, tensors = (within(key, decode_list, header[key]) for key in ("inputs", "outputs", "tensors"))
    if ddr_bytes < len(blob):
        raise ValueError(f"ddr_bytes {ddr_bytes} is less than the {len(blob)} coefficient bytes")
    model = TpuModel(
        name=within("name", decode_str, header["name"]),
        chip=within("chip", decode_str, header["chip"]),
        mode=within("mode", decode_str, header["mode"]),
        instructions=instructions,
        coefficients=blob,
        ddr_bytes=ddr_bytes,
        inputs=[IoDesc(**check_desc(d, IO_FIELDS, f"inputs[{i}]")) for i, d in enumerate(inputs)],
        outputs=[IoDesc(**check_desc(d, IO_FIELDS, f"outputs[{i}]")) for i, d in enumerate(outputs)],
        tensors=[TensorDesc(**check_desc(d, TENSOR_FIELDS, f"tensors[{i}]")) for i, d in enumerate(tensors)],
        groups=groups,
        version=FORMAT_VERSION,
        preprocess=_preprocess(header.get("preprocess")),
        weight_bytes=_weight_bytes(header.get("weight_bytes"), len(blob)),
    )
    check_model(model)
    return model


def _weight_bytes(value: Any, blob_bytes: int) -> int | None:
    """The optional `weight_bytes`: an integer no larger than the coefficients."""
    if value is None:
        return None
    weight_bytes = within("weight_bytes", decode_int, value)
    if not 0 <= weight_bytes <= blob_bytes:
        raise ValueError(f"weight_bytes {weight_bytes} is not between 0 and the {blob_bytes} coefficient bytes")
    return weight_bytes


def check_model(model: TpuModel) -> None:
    """What the fields say together, checked before anything runs: a known chip and mode,
    every tensor under the size limit and inside the model's DDR (or a lane's local memory),
    aligned to its element type, DMA sources and destinations of equal sizes, fill values
    the destination type holds, `written_by` naming an instruction. ValueError naming the
    field. (Compute kernels and their attributes' types are checked as each instruction is
    decoded; what a kernel needs of its operands, the device checks when it loads the
    program: tpu_xdsl.device.attributes.)"""
    chip = CHIPS.get(model.chip)
    if chip is None:
        raise ValueError(f"chip {show(model.chip)} is not a chip this tpu-xdsl knows ({', '.join(CHIPS)})")
    if model.mode not in chip.modes:
        raise ValueError(f"mode {show(model.mode)} is not one of {model.chip}'s modes ({', '.join(chip.modes)})")
    if not 0 <= model.ddr_bytes < INT64:
        raise ValueError(f"ddr_bytes {model.ddr_bytes} is negative or too large")
    count, limit = len(model.instructions), max_tensor_bytes()
    for role, descs in (("inputs", model.inputs), ("outputs", model.outputs), ("tensors", model.tensors)):
        for index, desc in enumerate(descs):
            where = f"{role}[{index}] ({show(desc.name)})"
            _check_ddr(DdrView.contiguous(desc.addr, desc.dtype, desc.shape), model.ddr_bytes, where, limit)
            if isinstance(desc, TensorDesc):  # its quantization is for people reading dumps: the run uses none
                if not 0 <= desc.written_by < count:
                    raise ValueError(f"{where}: written_by {desc.written_by} is not an instruction (0..{count - 1})")
                continue
            _check_scales(desc.shape, desc.dtype, desc.scales, desc.channel_axis, where)
            if desc.scale is not None and desc.dtype not in _INTEGER_RANGES:
                raise ValueError(f"{where}: a scale on a {desc.dtype} tensor; only integer tensors are quantized")
    npu, eu, lmem = chip.npu_num, chip.eu_bytes, chip.lmem_bytes
    fine: set[int] = set()  # ids of the local tensors checked (decoding makes one object of equal ones)

    def local(tensor: LocalTensor | None, position: int, name: str) -> None:
        if tensor is not None and id(tensor) not in fine:
            _check_local(tensor, npu, eu, lmem, f"{_at(model, position)}: {name}", limit)
            fine.add(id(tensor))

    def ddr(view: DdrView, position: int, name: str) -> None:
        _check_ddr(view, model.ddr_bytes, f"{_at(model, position)}: {name}", limit)

    for position, instruction in enumerate(model.instructions):
        match instruction:
            case DmaLoad(src=src, dst=dst):
                ddr(src, position, "src")
                local(dst, position, "dst")
                _check_count(math.prod(src.shape), math.prod(dst.shape4), model, position)
            case DmaStore(src=src, dst=dst):
                local(src, position, "src")
                ddr(dst, position, "dst")
                _check_count(math.prod(src.shape4), math.prod(dst.shape), model, position)
            case DmaCopy(src=src, dst=dst):
                ddr(src, position, "src")
                ddr(dst, position, "dst")
                _check_count(math.prod(src.shape), math.prod(dst.shape), model, position)
            case DmaFill(dst=dst, value=value):
                ddr(dst, position, "dst")
                _check_fill(dst.dtype, value, f"{_at(model, position)}: value")
            case Compute(inputs=inputs, outputs=outputs, macs=macs):
                if not 0 <= macs < INT64:
                    raise ValueError(f"{_at(model, position)}: macs {macs} is negative or too large")
                for index, tensor in enumerate(inputs):
                    local(tensor, position, f"inputs[{index}]")
                for index, tensor in enumerate(outputs):
                    local(tensor, position, f"outputs[{index}]")


def _at(model: TpuModel, position: int) -> str:
    return f"instruction {position} ({type(model.instructions[position]).__name__})"


def _check_count(src: int, dst: int, model: TpuModel, position: int) -> None:
    if src != dst:
        raise ValueError(f"{_at(model, position)}: src has {src} elements, dst {dst}; they must match")


def _check_size(what: str, shape: tuple[int, ...], dtype: str, limit: int) -> None:
    """The size limit (`limit` bytes, read once per model: reading it looks at the free
    memory), as a ValueError: every problem of a header is one."""
    if math.prod(shape) * DTYPE_SIZES[dtype] <= limit:
        return
    try:
        check_tensor_size(what, shape, DTYPE_SIZES[dtype])
    except ResourceLimitError as e:
        raise ValueError(str(e)) from None


def _check_ddr(view: DdrView, ddr_bytes: int, where: str, limit: int) -> None:
    _check_size(where, view.shape, view.dtype, limit)
    size, low, high = DTYPE_SIZES[view.dtype], view.addr, view.addr
    if 0 not in view.shape:
        for d, s in zip(view.shape, view.strides, strict=True):
            if s < 0:
                low += (d - 1) * s * size
            else:
                high += (d - 1) * s * size
        high += size
    if low < 0 or high > ddr_bytes:
        raise ValueError(f"{where}: DDR bytes [{low}, {high}) are outside the model's {ddr_bytes} bytes of DDR")
    if view.addr % DTYPE_SIZES[view.dtype]:
        raise ValueError(f"{where}: DDR address {view.addr} is not aligned to {view.dtype}")


def _check_local(tensor: LocalTensor, npu: int, eu: int, lmem: int, where: str, limit: int) -> None:
    _check_size(where, tensor.shape4, tensor.dtype, limit)
    if 0 in tensor.shape4:  # the lanes hold no empty tensor: the compiler never makes one
        raise ValueError(f"{where}: local tensor {list(tensor.shape4)} has no elements")
    if tensor.eu_align and tensor.addr % eu:
        raise ValueError(f"{where}: local address {tensor.addr} is not aligned to the {eu}-byte execution units")
    size = tensor.lane_bytes(npu, eu)
    if tensor.addr + size > lmem:
        raise ValueError(
            f"{where}: {size} bytes per lane at local address {tensor.addr} do not fit the {lmem} bytes of a lane"
        )


def _check_scales(
    shape: tuple[int, ...], dtype: str, scales: tuple[float, ...] | None, axis: int, where: str
) -> None:
    """Per-channel scales: one per channel of `channel_axis` (a scalar keeps one)."""
    if scales is None:
        return
    if dtype not in _INTEGER_RANGES:
        raise ValueError(f"{where}: per-channel scales on a {dtype} tensor; only integer tensors are quantized")
    if not shape:
        if len(scales) != 1:
            raise ValueError(f"{where}: a scalar with {len(scales)} scales")
        return
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"{where}: channel_axis {axis} is not an axis of shape {list(shape)}")
    if len(scales) not in (1, shape[axis]):
        raise ValueError(f"{where}: {len(scales)} scales for the {shape[axis]} channels of axis {axis}")


_INTEGER_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-(1 << 15), (1 << 15) - 1),
                   "int32": (-(1 << 31), (1 << 31) - 1)}


def _check_fill(dtype: str, value: float, where: str) -> None:
    bounds = _INTEGER_RANGES.get(dtype)
    if bounds is not None and not (math.isfinite(value) and bounds[0] <= value <= bounds[1]):
        raise ValueError(f"{show(value)} does not fit {dtype} ({where})")


def _check_keys(header: Any) -> None:
    """A JSON object with every key of the header, and this version's `fields` table."""
    if type(header) is not dict:
        raise ValueError("the header is not a JSON object")
    missing = [key for key in HEADER_KEYS if key not in header]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    if header["fields"] != FIELDS_TABLE:
        raise ValueError(f"its `fields` table differs from version {FORMAT_VERSION}'s")


def _tables(header: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]], list[Any]]:
    """The `layers` and `attrs` tables and the instruction rows, their count checked."""
    layers = within("layers", decode_strs, header["layers"])
    attrs_table = within("attrs", decode_list, header["attrs"])
    for index, attrs in enumerate(attrs_table):
        within(f"attrs[{index}]", decode_object, attrs)
    rows = within("instructions", decode_list, header["instructions"])
    count = within("instruction_count", decode_int, header["instruction_count"])
    if count != len(rows):
        raise ValueError(f"instruction_count is {count} but there are {len(rows)} instructions")
    return layers, attrs_table, rows


# The image preprocessing `run` applies to an image input (frontend.preprocess.Preprocess):
# each key's decoder.
_PREPROCESS: dict[str, Callable[[Any], Any]] = {
    "mean": lambda v: _finite_numbers(v),
    "scale": lambda v: _finite_numbers(v),
    "pixel_format": lambda v: decode_str(v),
    "channel_format": lambda v: decode_str(v),
    "resize_dims": lambda v: None if v is None else _image_sides(v),
    "keep_aspect_ratio": lambda v: _bool(v),
}


def _preprocess(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    values = within("preprocess", decode_object, value)
    for key, item in values.items():
        if key not in _PREPROCESS:
            raise ValueError(f"preprocess: unknown key {show(key)} (known: {', '.join(_PREPROCESS)})")
        within(f"preprocess.{key}", _PREPROCESS[key], item)
    return values


def _finite_numbers(value: Any) -> list[float]:
    numbers = decode_list(value)
    if not 1 <= len(numbers) <= 4 or not all(type(v) in (int, float) and math.isfinite(v) for v in numbers):
        raise ValueError(f"expected 1 to 4 finite numbers, got {show(value)}")
    return numbers


def _image_sides(value: Any) -> tuple[int, ...]:
    from tpu_xdsl.limits import MAX_IMAGE_SIDE

    sides = _dims(value)
    if len(sides) != 2 or not all(1 <= side <= MAX_IMAGE_SIDE for side in sides):
        raise ValueError(f"expected [height, width] from 1 to {MAX_IMAGE_SIDE}, got {show(value)}")
    return sides


def program_problem(instructions: list[Instruction]) -> str | None:
    """What breaks the program's order (ids 0..n-1, dependencies on earlier instructions), if anything."""
    for position, instruction in enumerate(instructions):
        if type(instruction.id) is not int or instruction.id != position:
            return (
                f"{where(instruction, position)} has id {instruction.id!r}; ids must be 0, 1, 2, ... in program order"
            )
        for dep in instruction.deps:
            if not (type(dep) is int and 0 <= dep < position):
                return f"{where(instruction, position)} depends on instruction {dep!r}, which does not come before it"
    return None


def within(where: str, decode: Callable[[Any], Any], value: Any) -> Any:
    try:
        return decode(value)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def _exactly(kind: type[T], expected: str) -> Callable[[Any], T]:
    """A decoder taking JSON values of exactly `kind` (so true is no integer, 1 no boolean)."""

    def decode(value: Any) -> T:
        if type(value) is not kind:
            raise ValueError(f"expected {expected}, got {show(value)}")
        return value

    return decode


decode_int = _exactly(int, "an integer")
decode_str = _exactly(str, "a string")
decode_list: Callable[[Any], list[Any]] = _exactly(list, "a list")
decode_object: Callable[[Any], dict[str, Any]] = _exactly(dict, "an object")
_bool = _exactly(bool, "true or false")


def _ints(value: Any) -> tuple[int, ...]:
    if type(value) is list:
        for v in value:
            if type(v) is not int:
                break
        else:
            return tuple(value)
    raise ValueError(f"expected a list of integers, got {show(value)}")


# Integers of the file are int64 on the chip: addresses, lengths, dimensions and strides too.
INT64 = 1 << 63


def _dims(value: Any) -> tuple[int, ...]:
    """A shape: a list of integers, none negative."""
    if type(value) is list:
        for d in value:
            if type(d) is not int or not 0 <= d < INT64:
                if type(d) is int:
                    raise ValueError(f"dimension {show(d)} of {show(value)} is {'negative' if d < 0 else 'too large'}")
                break
        else:
            return tuple(value)
    raise ValueError(f"expected a list of integers (a shape), got {show(value)}")


def _address(value: Any) -> int:
    address = decode_int(value)
    if not 0 <= address < INT64:
        raise ValueError(f"address {show(address)} is negative or too large")
    return address


def decode_strs(value: Any) -> list[str]:
    if type(value) is not list or not set(map(type, value)) <= {str}:
        raise ValueError(f"expected a list of strings, got {show(value)}")
    return value


def _number(value: Any) -> float:
    if type(value) not in (int, float):
        raise ValueError(f"expected a number, got {show(value)}")
    return value


def _number_or_null(value: Any) -> float | None:
    return None if value is None else _number(value)


def _scale(value: Any) -> float:
    """A quantization scale: a finite number above 0."""
    scale = _number(value)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale {show(scale)} is not a finite number above 0")
    return scale


def _dtype(value: Any) -> str:
    if type(value) is not str or value not in DTYPE_SIZES:
        raise ValueError(f"unknown dtype {show(value)}")
    return value


def _ddr_view(value: Any) -> DdrView:
    """[addr, dtype, shape, strides]: the well-formed case first, as for local tensors."""
    if type(value) is list and len(value) == 4:
        addr, dtype, shape, strides = value
        if type(addr) is int and 0 <= addr < INT64 and type(dtype) is str and dtype in DTYPE_SIZES:
            try:
                dims, steps = _dims(shape), _ints(strides)
            except ValueError:
                pass
            else:
                if len(dims) == len(steps) and all(-INT64 < step < INT64 for step in steps):
                    return DdrView(addr, dtype, dims, steps)
    return _checked_ddr_view(value)


def _checked_ddr_view(value: Any) -> DdrView:
    if type(value) is not list or len(value) != 4:
        raise ValueError(f"expected [addr, dtype, shape, strides], got {show(value)}")
    addr, dtype, shape, strides = value
    view = DdrView(
        within("addr", _address, addr), within("dtype", _dtype, dtype),
        within("shape", _dims, shape), within("strides", _ints, strides),
    )
    if len(view.shape) != len(view.strides):
        raise ValueError(f"{len(view.shape)} dims but {len(view.strides)} strides")
    for stride in view.strides:
        if not -INT64 < stride < INT64:
            raise ValueError(f"stride {stride} is too large")
    return view


def _local_tensor(value: Any) -> LocalTensor:
    """[addr, dtype, shape4, view, eu_align]: the common, well-formed case first (a program
    has tens of thousands), then every check in turn for the message."""
    if type(value) is list and len(value) == 5:
        addr, dtype, shape4, view, eu_align = value
        if (type(addr) is int and 0 <= addr < INT64 and type(dtype) is str and dtype in DTYPE_SIZES
                and type(eu_align) is bool and type(shape4) is list and len(shape4) == 4):
            try:
                key = (addr, dtype, _dims(shape4), _dims(view), eu_align)
                found = _LOCALS.get(key)
                if found is None:
                    found = LocalTensor(*key)  # type: ignore[arg-type]
                    if len(_LOCALS) >= 1 << 16:
                        _LOCALS.clear()
                    _LOCALS[key] = found
                return found
            except (ValueError, IllegalProgramError):  # IllegalProgramError: shape4 and view differ in size
                pass
    return _checked_local_tensor(value)


# Local tensors decoded, by their fields: a program names the same few again and again, and
# one object for each lets check_model check it once. Emptied after each header.
_LOCALS: dict[tuple[Any, ...], LocalTensor] = {}


def _checked_local_tensor(value: Any) -> LocalTensor:
    if type(value) is not list or len(value) != 5:
        raise ValueError(f"expected [addr, dtype, shape4, view, eu_align], got {show(value)}")
    addr, dtype, shape4, view, eu_align = value
    shape4 = within("shape4", _dims, shape4)
    if len(shape4) != 4:
        raise ValueError(f"shape4 has {len(shape4)} dims, not 4")
    if type(eu_align) is not bool:
        raise ValueError(f"eu_align is {show(eu_align)}, not true or false")
    view = within("view", _dims, view)
    if math.prod(shape4) != math.prod(view):
        raise ValueError(f"shape4 {list(shape4)} and view {list(view)} hold different numbers of elements")
    return LocalTensor(
        within("addr", _address, addr), within("dtype", _dtype, dtype), shape4,  # type: ignore[arg-type]
        view, eu_align,
    )


def _locals(value: Any) -> tuple[LocalTensor, ...]:
    return tuple(_local_tensor(t) for t in decode_list(value))


def _locals_or_null(value: Any) -> tuple[LocalTensor | None, ...]:
    return tuple(None if t is None else _local_tensor(t) for t in decode_list(value))


DECODE: dict[str, Callable[[Any], Any]] = {
    "ddr": _ddr_view,
    "local": _local_tensor,
    "locals": _locals,
    "locals_or_null": _locals_or_null,
    "number": _number,
    "attrs": decode_int,  # an index into the `attrs` table, resolved by _instruction
    "int": decode_int,
    "str": decode_str,
}

# Each row after its `op`: the field names and their decoders (`layer` is an index too).
_ROW_DECODERS = {
    op: (
        ("id", decode_int), ("deps", _ints), ("layer", decode_int), ("group", decode_int),
        *((name, DECODE[kind]) for name, kind in operands),
    )
    for op, operands in OPERANDS.items()
}


def _check_kernel(kind: str, index: int, attrs_table: list[dict[str, Any]], checked: set, where: str) -> None:
    """A kernel the device has, and attributes of the types and bounds it takes (each pair once:
    many instructions share an `attrs` entry)."""
    if (kind, index) in checked:
        return
    try:
        check_kernel(kind, attrs_table[index])
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    checked.add((kind, index))


def check_kernel(kind: str, attrs: dict[str, Any]) -> None:
    """ValueError if the device has no `kind` kernel or `attrs` are not of the types it takes."""
    from tpu_xdsl.device.attributes import attributes_problem
    from tpu_xdsl.kernels.tpu import has_tpu_kernel

    if not has_tpu_kernel(kind):
        raise ValueError(f"no compute kernel {show(kind)}")
    problem = attributes_problem(kind, attrs)
    if problem:
        raise ValueError(problem)


def _instruction(
    row: Any, position: int, layers: list[str], attrs_table: list[dict[str, Any]], groups: int, checked: set
) -> Instruction:
    if type(row) is not list or not row or type(row[0]) is not str or row[0] not in OPERANDS:
        raise ValueError(f"instruction {position}: not an instruction: {show(row)}")
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
        check_group_index(values["group"], groups)
    except ValueError as e:
        raise ValueError(f"instruction {position} ({op}): {e}") from None
    if "attrs" in values:
        if not 0 <= values["attrs"] < len(attrs_table):
            raise ValueError(f"instruction {position} ({op}): attrs {values['attrs']} is not an index of `attrs`")
        _check_kernel(values["kind"], values["attrs"], attrs_table, checked, f"instruction {position} ({op})")
        values["attrs"] = attrs_table[values["attrs"]]
    ident = values.pop("id")
    return INSTRUCTIONS[op](ident, **values)


def check_desc(data: Any, names: tuple[str, ...], where: str) -> dict[str, Any]:
    """The fields of an IoDesc or TensorDesc (`channel_axis` optional, 1 when absent)."""
    if type(data) is not dict or set(data) - {"channel_axis"} != set(names):
        raise ValueError(f"{where}: expected an object with the fields {', '.join(names)} (and channel_axis)")
    values = {
        "name": within(f"{where}.name", decode_str, data["name"]),
        "shape": within(f"{where}.shape", _dims, data["shape"]),
        "dtype": within(f"{where}.dtype", _dtype, data["dtype"]),
        "addr": within(f"{where}.addr", _address, data["addr"]),
        "scale": None if data["scale"] is None else within(f"{where}.scale", _scale, data["scale"]),
        "zero_point": within(f"{where}.zero_point", decode_int, data["zero_point"]),
        "scales": None,
        "channel_axis": within(f"{where}.channel_axis", decode_int, data.get("channel_axis", 1)),
    }
    if not -(1 << 31) <= values["zero_point"] < 1 << 31:
        raise ValueError(f"{where}.zero_point {values['zero_point']} is out of range")
    if data["scales"] is not None:
        scales = within(f"{where}.scales", decode_list, data["scales"])
        values["scales"] = tuple(within(f"{where}.scales", _scale, s) for s in scales)
    if "written_by" in names:
        values["written_by"] = within(f"{where}.written_by", decode_int, data["written_by"])
    return values


def check_group_index(index: Any, groups: int) -> None:
    if not -1 <= within("group", decode_int, index) < groups:
        raise ValueError(f"group {index} is neither -1 nor an index of `groups`")


def check_group(data: Any, where: str) -> dict[str, Any]:
    """The fields of a GroupDesc."""
    if type(data) is not dict or set(data) != set(GROUP_FIELDS):
        raise ValueError(f"{where}: expected an object with the fields {', '.join(GROUP_FIELDS)}")
    values = {
        "name": within(f"{where}.name", decode_str, data["name"]),
        "ops": tuple(within(f"{where}.ops", decode_strs, data["ops"])),
        "n_slices": within(f"{where}.n_slices", decode_int, data["n_slices"]),
        "h_slices": within(f"{where}.h_slices", decode_int, data["h_slices"]),
    }
    if values["n_slices"] < 1 or values["h_slices"] < 1:
        raise ValueError(f"{where}: {values['n_slices']} x {values['h_slices']} slices; both must be at least 1")
    return values
