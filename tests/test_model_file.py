"""The `.tpumodel` file (docs/tpumodel.md): exact round trips, the byte layout, a one-line
ModelFileError for every bad file a user can give, size and load time of a real-sized program."""

from __future__ import annotations

import hashlib
import json
import math
import random
import struct
import subprocess
import sys
import time
from collections import Counter
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tpu_xdsl.device.isa import (
    INSTRUCTIONS,
    Compute,
    DdrView,
    DmaCopy,
    DmaFill,
    DmaLoad,
    DmaStore,
    Instruction,
    LocalTensor,
    from_json,
    to_json,
)
from tpu_xdsl.device.model_file import (
    DDR_VIEW_FIELDS,
    FORMAT_VERSION,
    INSTRUCTION_FIELDS,
    LOCAL_TENSOR_FIELDS,
    GroupDesc,
    IoDesc,
    ModelFileError,
    TensorDesc,
    TpuModel,
    load_model,
    model_summary,
    save_model,
)
from tpu_xdsl.errors import TpuXdslError

# -- models -------------------------------------------------------------------------------

ATTRS = {
    "kernel_shape": [3, 3],
    "pads": [1, 0, 1, 0],
    "multiplier": [1 << 30, 2**62, -(2**40)],
    "epsilon": 1e-300,
    "tiny": 5e-324,
    "huge": 1.7976931348623157e308,
    "third": 0.1 + 0.2,
    "negative_zero": -0.0,
    "min": -math.inf,
    "max": math.inf,
    "do_relu": True,
    "mode": "max",
    "axes": None,
    "name": "Ünïcode ✓",
    "nested": {"table": [[1, 2.5], [], [None, False, {"deep": [-3, "x"]}]], "empty": {}},
}


def local(addr: int, dtype: str, view: tuple[int, ...], eu_align: bool = True) -> LocalTensor:
    n, c, *rest = view
    return LocalTensor(addr, dtype, (n, c, 1, math.prod(rest)), view, eu_align)


def every_instruction() -> list[Instruction]:
    x = local(0, "bfloat16", (1, 4, 2, 3))
    w = local(128, "int8", (4, 4, 1, 1), eu_align=False)
    y = local(256, "float32", (1, 4, 2, 3))
    return [
        DmaLoad(0, src=DdrView(64, "bfloat16", (1, 4, 2, 3), (24, 6, 3, 1)), dst=x, layer="input"),
        # zero strides broadcast, negative ones walk backwards
        DmaCopy(1, src=DdrView(512, "int8", (4, 3), (0, -1)), dst=DdrView(1024, "int8", (4, 3), (3, 1))),
        DmaFill(2, dst=DdrView(2048, "float32", (2, 5), (5, 1)), value=-math.inf, deps=(1,), layer="pad ✓", group=1),
        DmaFill(3, dst=DdrView(4096, "uint8", (), ()), value=7, deps=(2,)),
        # a layer group of two ops (GROUPS[0])
        DmaLoad(4, src=DdrView(1024, "int8", (4, 4, 1, 1), (4, 1, 1, 1)), dst=w, deps=(1,), layer="/conv/Relu",
                group=0),
        Compute(5, kind="conv", inputs=(x, w, None), outputs=(y,), attrs=ATTRS, deps=(0, 4), layer="/conv/Conv",
                macs=96, group=0),
        Compute(6, kind="relu", inputs=(y,), outputs=(y,), attrs={}, deps=(5,), layer="/conv/Relu", group=0),
        DmaStore(7, src=y, dst=DdrView(8192, "float32", (1, 4, 2, 3), (24, 1, 12, 4)), deps=(6,), layer="/conv/Relu",
                 group=0),
        Compute(8, kind="cast", inputs=(), outputs=(local(512, "int16", (2, 1)),), attrs={"x": 1}, macs=2**40),
    ]


GROUPS = [GroupDesc("/conv/Relu", ("/conv/Conv", "/conv/Relu"), 2, 3), GroupDesc("pad ✓", ("pad ✓",), 1, 1)]


def small_model(**changes: Any) -> TpuModel:
    model = TpuModel(
        name="toy",
        chip="bm1684x",
        mode="INT8",
        instructions=every_instruction(),
        coefficients=bytes(range(256)) * 3,
        ddr_bytes=1 << 34,
        inputs=[IoDesc("images", (1, 3, 2, 2), "int8", 64, scale=0.0078125, zero_point=-3)],
        outputs=[
            IoDesc("logits", (1, 4), "float32", 8192),
            IoDesc("features", (1, 4, 2, 3), "int8", 9000, scales=(0.5, 0.25, 1e-7, 3.0)),
        ],
        tensors=[
            TensorDesc("/conv/Conv_output_0", (1, 4, 2, 3), "int8", 9000, 7, 0.1, 2),
            TensorDesc("/conv/Relu_output_0", (), "float32", 9100, 8, scales=(1.5,)),
        ],
        groups=list(GROUPS),
    )
    return replace(model, **changes)


LAYERS = [f"/backbone/stage{i // 10}/block{i % 10}/conv2/Conv_output_0" for i in range(400)]


def realistic_program(count: int) -> list[Instruction]:
    """A layer-group pipeline: per slice load, conv, store; four H slices per layer."""
    instructions: list[Instruction] = []
    layer_index = 0
    while len(instructions) < count:
        layer = LAYERS[layer_index % len(LAYERS)]
        c = (64, 128, 256)[layer_index % 3]
        attrs = {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "group": 1,
                 "do_relu": True, "multiplier": [19000 + layer_index], "rshift": [9], "output_zero_point": 0}
        layer_index += 1
        for _ in range(4):
            base = len(instructions)
            x = LocalTensor(0, "int8", (1, c, 16, 56), (1, c, 16, 56))
            w = LocalTensor(65536, "int8", (1, c, 9, c), (c, c, 3, 3))
            y = LocalTensor(131072, "int8", (1, c, 14, 56), (1, c, 14, 56))
            addr = 12_345_600 + 4096 * base
            instructions += [
                DmaLoad(base, src=DdrView(addr, "int8", (1, c, 16, 56), (c * 3136, 3136, 56, 1)), dst=x,
                        deps=(base - 1,) if base else (), layer=layer),
                Compute(base + 1, kind="conv", inputs=(x, w, None), outputs=(y,), attrs=attrs, deps=(base,),
                        layer=layer, macs=c * c * 9 * 14 * 56),
                DmaStore(base + 2, src=y, dst=DdrView(addr + 1024, "int8", (1, c, 14, 56), (c * 3136, 3136, 56, 1)),
                         deps=(base + 1,), layer=layer),
            ]
    return instructions[:count]


def assert_one_line_error(path: Path, *fragments: str, chip: str | None = None) -> str:
    with pytest.raises(ModelFileError) as info:
        load_model(path, chip=chip)
    message = str(info.value)
    assert isinstance(info.value, TpuXdslError)
    assert "\n" not in message and str(path) in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


# -- an independent writer of the documented layout, for crafted files -------------------------


def write_raw(path: Path, header: bytes, blob: bytes, version: int = FORMAT_VERSION) -> None:
    layout = b"TPUMODEL" + struct.pack("<IQQ", version, len(header), len(blob))
    digest = hashlib.sha256(layout + header + blob).digest()
    path.write_bytes(layout + digest + header + blob)


def split_file(path: Path) -> tuple[dict[str, Any], bytes]:
    data = path.read_bytes()
    header_length = struct.unpack_from("<Q", data, 12)[0]
    return json.loads(data[60 : 60 + header_length]), data[60 + header_length :]


def rewrite_header(path: Path, edit) -> None:
    header, blob = split_file(path)
    edit(header)
    write_raw(path, json.dumps(header).encode(), blob)


# -- round trips --------------------------------------------------------------------------------


def test_round_trip_of_every_instruction_type_is_exact(tmp_path: Path):
    model = small_model()
    path = tmp_path / "toy.tpumodel"
    save_model(model, path)
    loaded = load_model(path, chip="bm1684x")
    assert loaded == model
    assert {type(i) for i in loaded.instructions} == set(INSTRUCTIONS.values())
    # exactly: the same types and float bits, not only == (0 == 0.0 == False, -0.0 == 0.0)
    for ours, theirs in zip(loaded.instructions, model.instructions, strict=True):
        assert repr(ours) == repr(theirs)
    attrs = loaded.instructions[5].attrs  # type: ignore[attr-defined]
    assert math.copysign(1, attrs["negative_zero"]) == -1 and attrs["tiny"] == 5e-324 and attrs["third"] == 0.1 + 0.2
    assert type(loaded.instructions[3].value) is int  # type: ignore[attr-defined]
    assert loaded.instructions[5].inputs[2] is None  # type: ignore[attr-defined]
    assert loaded.coefficients == model.coefficients and type(loaded.coefficients) is bytes
    assert repr(loaded.inputs + loaded.outputs + loaded.tensors) == repr(model.inputs + model.outputs + model.tensors)
    assert loaded.groups == GROUPS and type(loaded.groups[0].ops) is tuple
    assert [i.group for i in loaded.instructions] == [-1, -1, 1, -1, 0, 0, 0, 0, -1]


def test_nan_round_trips_as_nan(tmp_path: Path):
    fill = DmaFill(0, dst=DdrView(0, "float32", (2,), (1,)), value=math.nan)
    compute = Compute(1, kind="clip", inputs=(), outputs=(), attrs={"table": [math.nan, 1.0]})
    save_model(small_model(instructions=[fill, compute], tensors=[]), tmp_path / "nan.tpumodel")
    loaded = load_model(tmp_path / "nan.tpumodel").instructions
    assert math.isnan(loaded[0].value)  # type: ignore[attr-defined]
    assert math.isnan(loaded[1].attrs["table"][0]) and loaded[1].attrs["table"][1] == 1.0  # type: ignore[attr-defined]


def test_empty_program_round_trips(tmp_path: Path):
    model = small_model(instructions=[], coefficients=b"", inputs=[], outputs=[], tensors=[], ddr_bytes=0)
    save_model(model, tmp_path / "empty.tpumodel")
    assert load_model(tmp_path / "empty.tpumodel") == model


def test_isa_to_json_from_json_round_trip_through_json_text():
    for instruction in every_instruction():
        assert from_json(json.loads(json.dumps(to_json(instruction)))) == instruction


def test_the_format_names_every_field_of_the_isa():
    # A field added to isa.py must be added to the format (and FORMAT_VERSION bumped).
    for op, cls in INSTRUCTIONS.items():
        assert set(INSTRUCTION_FIELDS[op]) == {"op"} | {f.name for f in fields(cls)}, op
    assert DDR_VIEW_FIELDS == tuple(f.name for f in fields(DdrView))
    assert LOCAL_TENSOR_FIELDS == tuple(f.name for f in fields(LocalTensor))


def test_the_byte_layout_is_the_documented_one(tmp_path: Path):
    model = small_model()
    path = tmp_path / "toy.tpumodel"
    save_model(model, path)
    data = path.read_bytes()
    magic, version, header_length, blob_length, digest = struct.unpack_from("<8sIQQ32s", data)
    assert (magic, version) == (b"TPUMODEL", 3)
    assert 60 + header_length + blob_length == len(data)
    assert (60 + header_length) % 64 == 0  # the blob is 64-byte aligned
    header, blob = data[60 : 60 + header_length], data[60 + header_length :]
    assert hashlib.sha256(data[:28] + header + blob).digest() == digest
    assert blob == model.coefficients
    text = header.decode("utf-8")
    parsed = json.loads(text)
    assert parsed["instruction_count"] == len(parsed["instructions"]) == 9
    assert (parsed["name"], parsed["chip"], parsed["mode"], parsed["ddr_bytes"]) == ("toy", "bm1684x", "INT8", 1 << 34)
    assert parsed["layers"] == ["input", "", "pad ✓", "/conv/Relu", "/conv/Conv"]
    assert parsed["groups"] == [
        {"name": "/conv/Relu", "ops": ["/conv/Conv", "/conv/Relu"], "n_slices": 2, "h_slices": 3},
        {"name": "pad ✓", "ops": ["pad ✓"], "n_slices": 1, "h_slices": 1},
    ]
    # one instruction per line, its fields by position as the `fields` table says
    lines = text.splitlines()
    start = lines.index('"instructions":[') + 1
    assert json.loads(lines[start + 1].rstrip(",")) == [
        "DmaCopy", 1, [], 1, -1, [512, "int8", [4, 3], [0, -1]], [1024, "int8", [4, 3], [3, 1]]
    ]
    assert parsed["fields"]["DmaCopy"] == ["op", "id", "deps", "layer", "group", "src", "dst"]
    compute = parsed["instructions"][5]
    assert compute[:6] == ["Compute", 5, [0, 4], 4, 0, "conv"] and compute[7][0][:2] == [256, "float32"]
    assert compute[6][2] is None and parsed["attrs"][compute[8]]["max"] == {"$float": "inf"}
    assert parsed["instructions"][2][4:] == [1, [2048, "float32", [2, 5], [5, 1]], {"$float": "-inf"}]
    assert "Infinity" not in text and "NaN" not in text  # strict JSON: any parser reads it


def test_instructions_with_equal_attrs_share_one_table_entry(tmp_path: Path):
    program = realistic_program(120)  # 10 layers, 4 slices each, one attrs dict per layer
    save_model(small_model(instructions=program), tmp_path / "m.tpumodel")
    header, _ = split_file(tmp_path / "m.tpumodel")
    assert len(header["attrs"]) == 10 and len(header["layers"]) == 10
    assert load_model(tmp_path / "m.tpumodel").instructions == program


def test_the_model_file_module_does_not_import_xdsl():
    code = "import sys, tpu_xdsl.device.model_file; print(sorted(m for m in sys.modules if m.startswith('xdsl')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- saving ---------------------------------------------------------------------------------------


def test_save_is_atomic_and_reports_a_missing_folder(tmp_path: Path):
    with pytest.raises(ModelFileError, match="cannot write.*folder exists"):
        save_model(small_model(), tmp_path / "no" / "such" / "m.tpumodel")
    path = tmp_path / "m.tpumodel"
    save_model(small_model(), path)
    before = path.read_bytes()
    bad = small_model(instructions=[DmaLoad(0, src=DdrView(0, "int8", (1,), (1,)), dst=local(0, "int8", (1, 1)),
                                            deps=(3,))])
    with pytest.raises(ValueError, match="depends on instruction 3"):
        save_model(bad, path)
    assert path.read_bytes() == before


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path: Path, monkeypatch):
    path = tmp_path / "m.tpumodel"
    save_model(small_model(), path)
    before = path.read_bytes()

    def disk_full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("tpu_xdsl.files.os.replace", disk_full)
    with pytest.raises(ModelFileError, match="m.tpumodel: cannot write \\(No space left on device\\)"):
        save_model(small_model(name="other"), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.tpumodel"]


@pytest.mark.parametrize(
    "instruction, fragment",
    [
        (Compute(0, kind="conv", inputs=(), outputs=(), attrs={"kernel_shape": (3, 3)}),
         "instruction 0 (Compute): attrs: kernel_shape: tuple"),
        (Compute(0, kind="conv", inputs=(), outputs=(), attrs={"group": np.int64(2)}),
         "attrs: group: int64"),
        (DmaLoad(0, src=DdrView(np.int64(8), "int8", (1,), (1,)), dst=local(0, "int8", (1, 1))),
         "instruction 0 (DmaLoad): src: addr: expected an integer"),
        (DmaFill(0, dst=DdrView(0, "int4", (1,), (1,)), value=0.0), "dst: dtype: unknown dtype 'int4'"),
        (DmaFill(0, dst=DdrView(0, "int8", (1,), (1,)), value="0"), "value: expected a number"),
        (DmaLoad(1, src=DdrView(0, "int8", (1,), (1,)), dst=local(0, "int8", (1, 1))), "has id 1"),
        (DmaFill(0, dst=DdrView(0, "int8", (1,), (1,)), value=0, group=2),
         "instruction 0 (DmaFill): group 2 is neither -1 nor an index of `groups`"),
        (DmaFill(0, dst=DdrView(0, "int8", (1,), (1,)), value=0, group=-2), "group -2 is neither"),
        (DmaFill(0, dst=DdrView(0, "int8", (1,), (1,)), value=0, group=np.int64(0)), "group: expected an integer"),
    ],
)
def test_save_refuses_what_load_would_refuse_or_not_load_back_equal(tmp_path: Path, instruction, fragment):
    with pytest.raises(ValueError, match="cannot save") as info:
        save_model(small_model(instructions=[instruction]), tmp_path / "m.tpumodel")
    assert fragment in str(info.value)
    assert not (tmp_path / "m.tpumodel").exists()


@pytest.mark.parametrize(
    "group, fragment",
    [
        (GroupDesc("g", ("a", 3), 1, 1), "groups[2].ops: expected a list of strings"),  # type: ignore[arg-type]
        (GroupDesc("g", ("a",), 0, 4), "groups[2]: 0 x 4 slices; both must be at least 1"),
        (GroupDesc("g", ("a",), 1, True), "groups[2].h_slices: expected an integer"),
    ],
)
def test_save_refuses_a_bad_group(tmp_path: Path, group: GroupDesc, fragment: str):
    with pytest.raises(ValueError, match="cannot save") as info:
        save_model(small_model(groups=[*GROUPS, group]), tmp_path / "m.tpumodel")
    assert fragment in str(info.value)
    assert not (tmp_path / "m.tpumodel").exists()


# -- errors a user can cause --------------------------------------------------------------------


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "toy.tpumodel"
    save_model(small_model(), path)
    return path


def test_missing_file(tmp_path: Path):
    assert_one_line_error(tmp_path / "absent.tpumodel", "no such file", "tpu-xdsl deploy")


def test_a_folder(tmp_path: Path):
    assert_one_line_error(tmp_path, "is a folder")


@pytest.mark.parametrize("content", [b"\x08\x07\x12\x04onnx-model-bytes" * 8, b"PK\x03\x04", b"TPUMODEX" + bytes(80)])
def test_not_a_tpumodel(tmp_path: Path, content: bytes):
    path = tmp_path / "model.onnx"
    path.write_bytes(content)
    assert_one_line_error(path, "not a .tpumodel file", "does not start with TPUMODEL")


@pytest.mark.parametrize("size", [0, 5, 12, 59])
def test_too_short_for_the_fixed_header(saved: Path, size: int):
    saved.write_bytes(saved.read_bytes()[:size])
    assert_one_line_error(saved, "not a .tpumodel file, or truncated", f"{size} bytes", "60-byte fixed header")


@pytest.mark.parametrize("version", [0, 1, 2, 4, 0xFFFFFFFF])
def test_a_version_this_code_does_not_read(saved: Path, version: int):
    data = bytearray(saved.read_bytes())
    struct.pack_into("<I", data, 8, version)
    saved.write_bytes(bytes(data))
    assert_one_line_error(saved, f"version {version} .tpumodel", "reads version 3", "recompile", "tpu-xdsl deploy")


@pytest.mark.parametrize("keep", [60, 200, -100, -1])
def test_truncated(saved: Path, keep: int):
    data = saved.read_bytes()
    saved.write_bytes(data[:keep])
    assert_one_line_error(saved, "is truncated", f"has {len(data[:keep])} bytes", f"says {len(data)}")


def test_bytes_after_the_model(saved: Path):
    saved.write_bytes(saved.read_bytes() + b"\n")
    assert_one_line_error(saved, "is corrupt", "1 unexpected bytes after the model")


@pytest.mark.parametrize("where", ["header", "blob"])
def test_checksum_mismatch(saved: Path, where: str):
    data = bytearray(saved.read_bytes())
    header_length = struct.unpack_from("<Q", data, 12)[0]
    data[100 if where == "header" else 60 + header_length + 10] ^= 0x20
    saved.write_bytes(bytes(data))
    assert_one_line_error(saved, "is corrupt", "SHA-256 checksum does not match", "recompile", "tpu-xdsl deploy")


def test_a_single_flipped_byte_anywhere_is_detected(saved: Path):
    original = saved.read_bytes()
    header_end = 60 + struct.unpack_from("<Q", original, 12)[0]
    padding = header_end - len(original[:header_end].rstrip(b" "))
    assert padding > 0 and len(original) - header_end == 768
    # Every byte of the fixed header, the first and last bytes of the JSON header, its
    # padding and the blob, and every 7th byte in between (the file is written once per
    # offset: the whole file would take too long).
    edges = {60, 61, header_end - padding - 1, header_end - 1, header_end, header_end + 1, len(original) - 1}
    offsets = sorted({*range(60), *edges, *range(62, len(original), 7)})
    for offset in offsets:
        data = bytearray(original)
        data[offset] ^= 0x01 if offset % 2 else 0x80
        saved.write_bytes(bytes(data))
        with pytest.raises(ModelFileError):
            load_model(saved)


def test_random_changes_to_the_header_give_a_model_or_a_model_file_error(saved: Path):
    """Never another exception: each decoder checks what it is given."""
    rng = random.Random(1)
    original, blob = split_file(saved)
    replacements = [None, True, False, -1, 0, 3, 2**70, 1.5, "x", "int8", [], [1, "a"], [[1]], {}, {"k": 1},
                    {"$float": "inf"}, ["DmaLoad"]]
    outcomes = Counter()
    for _ in range(150):
        header = json.loads(json.dumps(original))
        parent: Any = header
        key: Any = rng.choice(list(header))
        while isinstance(parent[key], dict | list) and parent[key] and rng.random() < 0.75:
            parent = parent[key]
            key = rng.choice(list(parent)) if isinstance(parent, dict) else rng.randrange(len(parent))
        if rng.random() < 0.15:
            del parent[key]
        else:
            parent[key] = rng.choice(replacements)
        write_raw(saved, json.dumps(header).encode(), blob)
        try:
            load_model(saved)
            outcomes["loaded"] += 1
        except ModelFileError as e:
            assert "\n" not in str(e)
            outcomes["refused"] += 1
    assert outcomes["refused"] > 100, outcomes


@pytest.mark.parametrize(
    "header, fragment",
    [
        (b"{not json", "Expecting property name"),
        (b"\xff\xfe{}", "utf-8"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"name": NaN}', "NaN is not JSON"),
    ],
)
def test_malformed_header_json(saved: Path, header: bytes, fragment: str):
    write_raw(saved, header, b"")
    assert_one_line_error(saved, "malformed header", fragment, "tpu-xdsl deploy")


def _set(path: list[Any], value: Any):
    def edit(header: dict[str, Any]) -> None:
        target = header
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (lambda h: h.pop("chip"), "missing chip"),
        (_set(["ddr_bytes"], "lots"), "ddr_bytes: expected an integer, got 'lots'"),
        (_set(["ddr_bytes"], 10), "ddr_bytes 10 is less than the 768 coefficient bytes"),
        (_set(["instruction_count"], 8), "instruction_count is 8 but there are 9 instructions"),
        (_set(["fields", "DmaLoad"], ["op", "id"]), "`fields` table differs"),
        (_set(["instructions", 4, 0], "DmaPrefetch"), "instruction 4: not an instruction: ['DmaPrefetch'"),
        (_set(["instructions", 4, 5], [1, "int8"]),
         "instruction 4 (DmaLoad): src: expected [addr, dtype, shape, strides]"),
        (_set(["instructions", 4, 5, 0], -1.5), "instruction 4 (DmaLoad): src: addr: expected an integer, got -1.5"),
        (_set(["instructions", 1, 5, 3], [1]), "instruction 1 (DmaCopy): src: 2 dims but 1 strides"),
        (_set(["instructions", 4, 6, 1], "int4"), "instruction 4 (DmaLoad): dst: dtype: unknown dtype 'int4'"),
        (_set(["instructions", 4, 6, 2], [1, 2, 3]), "dst: shape4 has 3 dims, not 4"),
        (_set(["instructions", 4, 6, 4], 1), "dst: eu_align is 1, not true or false"),
        (_set(["instructions", 5, 6], "x"), "instruction 5 (Compute): inputs: expected a list"),
        (_set(["instructions", 5, 7], [None]), "instruction 5 (Compute): outputs: expected [addr"),
        (_set(["instructions", 5, 8], 99), "instruction 5 (Compute): attrs 99 is not an index of `attrs`"),
        (_set(["instructions", 5, 3], 99), "instruction 5 (Compute): layer 99 is not an index of `layers`"),
        (_set(["instructions", 2, 2], [True]), "instruction 2 (DmaFill): deps: expected a list of integers"),
        (_set(["instructions", 2, 6], None), "instruction 2 (DmaFill): value: expected a number, got None"),
        (_set(["instructions", 2, 6], {"$float": "Infinity"}), "{'$float': 'Infinity'}: expected 'inf'"),
        (_set(["instructions", 3], ["DmaFill", 3, [2]]), "instruction 3 (DmaFill): 3 fields, not 7"),
        (_set(["attrs", 0], [1]), "attrs[0]: expected an object"),
        (_set(["layers", 0], 7), "layers: expected a list of strings"),
        (_set(["inputs", 0, "scale"], "0.5"), "inputs[0].scale: expected a number"),
        (lambda h: h["outputs"][1].pop("scales"), "outputs[1]: expected an object with the fields"),
        (_set(["tensors", 0, "written_by"], None), "tensors[0].written_by: expected an integer"),
        (_set(["tensors", 1, "scales"], [1.5, "x"]), "tensors[1].scales: expected a number"),
        (lambda h: h.pop("groups"), "missing groups"),
        (_set(["groups"], {}), "groups: expected a list"),
        (_set(["instructions", 5, 4], 2), "instruction 5 (Compute): group 2 is neither -1 nor an index of `groups`"),
        (_set(["instructions", 5, 4], None), "instruction 5 (Compute): group: expected an integer"),
        (_set(["groups", 1], ["pad ✓", ["pad ✓"], 1, 1]), "groups[1]: expected an object with the fields name, ops"),
        (lambda h: h["groups"][0].pop("h_slices"), "groups[0]: expected an object with the fields"),
        (_set(["groups", 0, "ops"], "/conv/Conv"), "groups[0].ops: expected a list of strings"),
        (_set(["groups", 0, "n_slices"], 0), "groups[0]: 0 x 3 slices; both must be at least 1"),
        (_set(["groups", 0, "name"], None), "groups[0].name: expected a string"),
    ],
)
def test_malformed_header_fields(saved: Path, edit, fragment: str):
    rewrite_header(saved, edit)
    assert_one_line_error(saved, "malformed header", fragment, "tpu-xdsl deploy")


def test_dependencies_must_point_backwards(saved: Path):
    rewrite_header(saved, _set(["instructions", 5, 2], [0, 7]))
    assert_one_line_error(
        saved, "instruction 5 (Compute, layer /conv/Conv) depends on instruction 7, which does not come before it",
        "tpu-xdsl deploy",
    )


def test_ids_must_count_from_zero(saved: Path):
    rewrite_header(saved, _set(["instructions", 3, 1], 30))
    assert_one_line_error(saved, "instruction 3 (DmaFill, layer -) has id 30; ids must be 0, 1, 2, ...")


def test_a_model_for_another_chip(saved: Path):
    rewrite_header(saved, _set(["chip"], "cv183x"))
    message = assert_one_line_error(saved, chip="bm1684x")
    assert message == f"{saved} was built for cv183x; run it on cv183x or deploy again with --chip bm1684x"
    assert load_model(saved, chip="cv183x").chip == "cv183x"
    assert load_model(saved).chip == "cv183x"


# -- summary ----------------------------------------------------------------------------------------


def test_model_summary():
    lines = model_summary(small_model())
    assert lines == [
        "model: toy",
        "chip: bm1684x",
        "mode: INT8",
        "format version: 3",
        "instructions: 9 (DmaLoad 2, DmaStore 1, DmaCopy 1, DmaFill 2, Compute 3)",
        "engines: dma 6, compute 3",
        "DDR bytes: 768 coefficients / 17,179,869,184 total",
        "input images: 1x3x2x2 int8 at DDR 0x40, scale 0.0078125, zero point -3",
        "output logits: 1x4 float32 at DDR 0x2000, not quantized",
        "output features: 1x4x2x3 int8 at DDR 0x2328, per-channel scales (4 channels), zero point 0",
        "named tensors: 2",
        "layer groups: 2",
    ]


# -- size and speed ---------------------------------------------------------------------------------


def test_20000_instructions_take_under_45_percent_of_naive_json_and_load_in_under_a_second(tmp_path: Path):
    program = realistic_program(20_000)
    model = small_model(instructions=program, coefficients=b"", tensors=[])
    path = tmp_path / "big.tpumodel"
    save_model(model, path)
    naive = len(json.dumps([to_json(i) for i in program]))
    size = path.stat().st_size
    ratio = size / naive
    # measured: 3.3 MB against 8.9 MB, ratio 0.37
    assert ratio < 0.45, (size, naive)
    seconds = []
    for _ in range(3):  # up to three tries: the machine may be busy
        start = time.perf_counter()
        loaded = load_model(path)
        seconds.append(time.perf_counter() - start)
        if seconds[-1] < 1.0:
            break
    assert loaded.instructions == program
    assert min(seconds) < 1.0, seconds
    print(f"\n{len(program)} instructions: {size:,} bytes, naive JSON {naive:,} (ratio {ratio:.3f}); "
          f"load {min(seconds):.3f} s")
