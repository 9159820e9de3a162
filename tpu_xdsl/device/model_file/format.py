"""The `.tpumodel` format's fixed header (the layout is in the package docstring and
docs/tpumodel.md) and the tables that name every field of the JSON header."""

from __future__ import annotations

import hashlib
import struct

# 3: the checksum covers the magic, version and both lengths too, so moving the
# header/blob boundary (a shorter header, a longer blob) no longer keeps it valid.
FORMAT_VERSION = 3

MAGIC = b"TPUMODEL"
# magic, version, header length, blob length, SHA-256 of the 28 bytes before it, header and blob
FIXED = struct.Struct("<8sIQQ32s")
FIXED_HEADER_BYTES = FIXED.size  # 60
# The fields before the checksum: what it covers besides the header and the blob.
LAYOUT = struct.Struct("<8sIQQ")
BLOB_ALIGNMENT = 64

DDR_VIEW_FIELDS = ("addr", "dtype", "shape", "strides")
LOCAL_TENSOR_FIELDS = ("addr", "dtype", "shape4", "view", "eu_align")
# Every instruction row starts with these; `layer` is an index into the header's `layers`,
# `group` one into its `groups` (-1: in no group).
COMMON_FIELDS = ("op", "id", "deps", "layer", "group")
# The fields after the common ones, in row order, and how each is encoded.
OPERANDS: dict[str, tuple[tuple[str, str], ...]] = {
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
INSTRUCTION_FIELDS = {op: COMMON_FIELDS + tuple(name for name, _ in operands) for op, operands in OPERANDS.items()}
# The header's `fields` table: what each position of a row or operand array holds.
FIELDS_TABLE = {
    **{op: list(names) for op, names in INSTRUCTION_FIELDS.items()},
    "DdrView": list(DDR_VIEW_FIELDS),
    "LocalTensor": list(LOCAL_TENSOR_FIELDS),
}
IO_FIELDS = ("name", "shape", "dtype", "addr", "scale", "zero_point", "scales")
TENSOR_FIELDS = ("name", "shape", "dtype", "addr", "written_by", "scale", "zero_point", "scales")
GROUP_FIELDS = ("name", "ops", "n_slices", "h_slices")
# Non-finite floats have no JSON number: they are written as {"$float": "inf" | "-inf" | "nan"}.
FLOAT_TAG = "$float"
RECOMPILE = "recompile the model with `tpu-xdsl deploy`"
# The keys every header has.
HEADER_KEYS = (
    "name", "chip", "mode", "ddr_bytes", "inputs", "outputs", "tensors", "groups",
    "fields", "layers", "instruction_count", "attrs", "instructions",
)


def checksum(version: int, header: bytes, blob: bytes, magic: bytes = MAGIC) -> bytes:
    """The SHA-256 of the layout (magic, version, header and blob lengths as the fixed header
    packs them), the header and the blob: any change of a length fails the check."""
    digest = hashlib.sha256(LAYOUT.pack(magic, version, len(header), len(blob)))
    digest.update(header)
    digest.update(blob)
    return digest.digest()


def seal(header: bytes, blob: bytes, version: int = FORMAT_VERSION) -> bytes:
    """The whole file: the fixed header (its checksum computed), the header, the blob."""
    return FIXED.pack(MAGIC, version, len(header), len(blob), checksum(version, header, blob)) + header + blob
