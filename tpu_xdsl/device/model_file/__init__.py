"""The `.tpumodel` file: what codegen produces and the device runtime loads (no xDSL).

Layout (docs/tpumodel.md has every detail, for readers in other languages):

    offset  size  field
         0     8  magic b"TPUMODEL"
         8     4  format version, uint32 little endian
        12     8  header length H in bytes, uint64 little endian
        20     8  blob length B in bytes, uint64 little endian
        28    32  SHA-256 of bytes 0..28 (magic, version, both lengths), then the H
                  header bytes, then the B blob bytes: moving the header/blob
                  boundary, or any other change, fails the check
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

- `format`: the fixed header and the field tables;
- `model`: `TpuModel` and its descriptors, `ModelFileError`;
- `encode`: values as header JSON;
- `validation`: a parsed header decoded and checked into a `TpuModel`;
- `writer`: `save_model`, and `reseal` (a file with an edited header, sealed again:
  for tests and fuzzing); `reader`: `load_model`;
- `summary`: `model_summary`, `instruction_lines`, `memory_map_lines`.
"""

from tpu_xdsl.device.model_file.format import (
    BLOB_ALIGNMENT,
    DDR_VIEW_FIELDS,
    FIXED_HEADER_BYTES,
    FORMAT_VERSION,
    INSTRUCTION_FIELDS,
    LOCAL_TENSOR_FIELDS,
    MAGIC,
)
from tpu_xdsl.device.model_file.model import (
    GroupDesc,
    IoDesc,
    ModelFileError,
    TensorDesc,
    TpuModel,
)
from tpu_xdsl.device.model_file.reader import load_model
from tpu_xdsl.device.model_file.summary import (
    instruction_lines,
    memory_map_lines,
    model_summary,
)
from tpu_xdsl.device.model_file.writer import reseal, save_model

__all__ = [
    "BLOB_ALIGNMENT", "DDR_VIEW_FIELDS", "FIXED_HEADER_BYTES", "FORMAT_VERSION", "INSTRUCTION_FIELDS",
    "LOCAL_TENSOR_FIELDS", "MAGIC", "GroupDesc", "IoDesc", "ModelFileError", "TensorDesc", "TpuModel",
    "instruction_lines", "load_model", "memory_map_lines", "model_summary", "reseal", "save_model",
]
