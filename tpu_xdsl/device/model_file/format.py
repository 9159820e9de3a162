"""The `.tpumodel` format: its fixed header, and the tables that name every field.

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

import struct

FORMAT_VERSION = 2

MAGIC = b"TPUMODEL"
# magic, version, header length, blob length, SHA-256 of header + blob
FIXED = struct.Struct("<8sIQQ32s")
FIXED_HEADER_BYTES = FIXED.size  # 60
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
