"""Hostile `.tpumodel` files (issue 17): a moved header/blob boundary, a cut or lengthened file,
and headers edited and sealed again (the checksum recomputed, as anyone can) with wrong types,
unknown dtypes, huge or negative numbers, addresses outside memory and references to what
does not exist. `info` and `run` refuse each with exit code 2 and one line naming the field,
no traceback and no output file; a seeded mutation loop never gets another exit code.
"""

from __future__ import annotations

import random
import re
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.test_cli_int8_errors import int8_head_model, snapshot
from tpu_xdsl.device.attributes import ATTRIBUTE_TYPES
from tpu_xdsl.device.model_file import FIXED_HEADER_BYTES, load_model, reseal
from tpu_xdsl.tools.tpu_xdsl import main

IRDL = Path(__file__).resolve().parent.parent / "irdl" / "tpu.irdl"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> tuple[Path, Path]:
    """conv(+relu) -> flatten -> matmul compiled F32 for bm1684x (instructions 0-3 the conv, 4-7
    the matmul; the flatten is a view of the conv's result, no instruction), and an input for it."""
    folder = tmp_path_factory.mktemp("hostile")
    x = folder / "x.npz"
    np.savez(x, image=np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32))
    mlir, compiled = folder / "m.mlir", folder / "m_f32.tpumodel"
    assert main(["transform", "--model-def", str(int8_head_model(folder / "m.onnx")), "--model-name", "m",
                 "--input-shapes", "[[1,3,8,8]]", "-o", str(mlir)]) == 0
    assert main(["deploy", str(mlir), "--quantize", "F32", "-o", str(compiled)]) == 0
    return compiled, x


def run(capsys, *args: Any) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, path: Path, x: Path, *fragments: str, commands: tuple[str, ...] = ("info", "run")) -> None:
    """`info` and `run` of `path` exit 2 with one line holding every fragment; `run` writes nothing."""
    folder = path.parent
    for command in commands:
        out = folder / "out.npz"
        args = ["info", path, "--instructions"] if command == "info" else ["run", path, "--input", x, "--output", out]
        before = snapshot(folder)
        code, stdout, stderr = run(capsys, *args)
        assert code == 2, (command, stdout, stderr)
        assert "Traceback" not in stderr
        lines = stderr.strip().splitlines()
        assert len(lines) == 1, stderr
        assert lines[0].startswith("tpu-xdsl: error: "), lines[0]
        for fragment in fragments:
            assert fragment in lines[0], (command, lines[0])
        assert snapshot(folder) == before, "an error must leave no file behind"


def hostile(model: tuple[Path, Path], tmp_path: Path, edit) -> Path:
    path = tmp_path / "hostile.tpumodel"
    path.write_bytes(reseal(model[0].read_bytes(), edit))
    return path


def _set(*path_and_value: Any):
    *path, value = path_and_value

    def edit(header: dict[str, Any]) -> None:
        target: Any = header
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _attr(name: str, value: Any):
    """Set attribute `name` of the conv (the first `attrs` entry)."""
    return _set("attrs", 0, name, value)


# -- the fixed header ---------------------------------------------------------------------------


def test_the_untouched_model_runs_and_resealing_it_changes_nothing(model, tmp_path, capsys):
    path = hostile(model, tmp_path, lambda header: None)
    assert load_model(path) == load_model(model[0])
    code, _, err = run(capsys, "run", path, "--input", model[1], "--output", tmp_path / "y.npz")
    assert code == 0, err


def test_moving_the_header_blob_boundary_fails_the_checksum(model, tmp_path, capsys):
    """Header one byte shorter, blob one longer: the same bytes hashed, but not the same layout."""
    data = bytearray(model[0].read_bytes())
    header_length, blob_length = struct.unpack_from("<QQ", data, 12)
    struct.pack_into("<QQ", data, 12, header_length - 1, blob_length + 1)
    path = tmp_path / "moved.tpumodel"
    path.write_bytes(bytes(data))
    refused(capsys, path, model[1], "moved.tpumodel", "checksum does not match")


@pytest.mark.parametrize("cut", [1, 64, 500])
def test_a_truncated_file(model, tmp_path, capsys, cut):
    path = tmp_path / "cut.tpumodel"
    path.write_bytes(model[0].read_bytes()[:-cut])
    refused(capsys, path, model[1], "cut.tpumodel", "is truncated")


@pytest.mark.parametrize("tail", [b"\0", b" " * 64])
def test_trailing_bytes(model, tmp_path, capsys, tail):
    path = tmp_path / "long.tpumodel"
    path.write_bytes(model[0].read_bytes() + tail)
    refused(capsys, path, model[1], "long.tpumodel", f"{len(tail)} unexpected bytes after the model")


def test_a_flipped_byte_in_the_lengths_or_the_blob(model, tmp_path, capsys):
    data = model[0].read_bytes()
    for offset in (13, 21, len(data) - 3):
        changed = bytearray(data)
        changed[offset] ^= 0x01
        path = tmp_path / "flipped.tpumodel"
        path.write_bytes(bytes(changed))
        refused(capsys, path, model[1], "flipped.tpumodel", commands=("info",))


# -- headers edited and sealed again ------------------------------------------------------------

# (edit, what the one line says); each is refused by `info` as well as `run`.
LOAD_REFUSES = {
    "unknown input dtype": (_set("inputs", 0, "dtype", "bool"), "inputs[0].dtype: unknown dtype 'bool'"),
    "unknown tensor dtype": (_set("tensors", 0, "dtype", "complex64"), "tensors[0].dtype: unknown dtype"),
    "unknown DDR view dtype": (_set("instructions", 1, 5, 1, "bool"), "instruction 1 (DmaLoad): src: dtype"),
    "a 1e30 dimension": (_set("inputs", 0, "shape", [1, 3, 8, 10**30]), "inputs[0].shape: dimension 10000"),
    "a 1e12 dimension": (_set("inputs", 0, "shape", [1, 3, 8, 10**12]), "inputs[0] ('image') of shape 1x3x8x10000"),
    "a float dimension": (_set("inputs", 0, "shape", [1, 3, 8, 1e30]), "inputs[0].shape: expected a list of int"),
    "a negative dimension": (_set("outputs", 0, "shape", [1, -5]), "outputs[0].shape: dimension -5 of [1, -5] is neg"),
    "a 1e30 view dimension": (_set("instructions", 0, 5, 2, [1, 10**30]), "instruction 0 (DmaLoad): src"),
    "a huge local tensor": (_set("instructions", 1, 6, 2, [1, 3, 8, 10**12]), "instruction 1 (DmaLoad): dst"),
    "a DDR address past the end": (_set("instructions", 3, 6, 0, 10**6), "outside the model's 9984 bytes of DDR"),
    "a negative DDR address": (_set("instructions", 0, 5, 0, -4), "address -4 is negative"),
    "an unaligned DDR address": (_set("instructions", 0, 5, 0, 2), "not aligned to float32"),
    "an input outside DDR": (_set("inputs", 0, "addr", 10**9), "inputs[0] ('image'): DDR bytes"),
    "a local address past a lane": (_set("instructions", 1, 6, 0, 1 << 30), "do not fit the 262144 bytes of a lane"),
    "an unaligned local address": (_set("instructions", 1, 6, 0, 130), "not aligned to the 64-byte execution units"),
    "an empty local tensor": (
        _set("instructions", 1, ["DmaLoad", 1, [], 0, -1, [9216, "float32", [0, 3, 8, 8], [192, 64, 8, 1]],
                                 [128, "float32", [0, 3, 8, 8], [0, 3, 8, 8], True]]),
        "instruction 1 (DmaLoad): dst: local tensor [0, 3, 8, 8] has no elements",
    ),
    "negative MACs": (_set("instructions", 6, 9, -1), "instruction 6 (Compute): macs -1 is negative"),
    "unequal DMA sizes": (_set("instructions", 4, 5, 2, [255, 5]), "src has 1275 elements, dst 1280"),
    "a missing attrs entry": (_set("instructions", 2, 8, 7), "attrs 7 is not an index of `attrs`"),
    "a missing layer": (_set("instructions", 2, 3, 9), "layer 9 is not an index of `layers`"),
    "a missing group": (_set("instructions", 2, 4, 0), "group 0 is neither -1 nor an index of `groups`"),
    "a missing dependency": (_set("instructions", 2, 2, [0, 5]), "depends on instruction 5"),
    "written_by no instruction": (_set("tensors", 0, "written_by", 99), "written_by 99 is not an instruction"),
    "an unknown chip": (_set("chip", "tpu9000"), "chip 'tpu9000' is not a chip this tpu-xdsl knows"),
    "a mode the chip lacks": (_set("mode", "F8"), "mode 'F8' is not one of bm1684x's modes"),
    "a scale on a float input": (_set("inputs", 0, "scale", 0.5), "a scale on a float32 tensor"),
    "scales of another channel count": (
        lambda h: h["outputs"][0].update(dtype="int8", scales=[0.5, 0.25]), "2 scales for the 5 channels of axis 1"
    ),
    "a channel_axis past the rank": (
        lambda h: h["outputs"][0].update(dtype="int8", scales=[0.5], channel_axis=2),
        "outputs[0] ('logits'): channel_axis 2 is not an axis of shape [1, 5]",
    ),
    "a zero scale": (_set("outputs", 0, "scale", 0.0), "outputs[0].scale: scale 0.0 is not a finite number above 0"),
    "a fill value the type cannot hold": (
        _set("instructions", 4, ["DmaFill", 4, [], 1, -1, [8192, "int8", [4], [1]], 300]),
        "300 does not fit int8",
    ),
    "a bad preprocess": (_set("preprocess", "resize_dims", [0, 10**9]), "preprocess.resize_dims"),
    "weight bytes past the coefficients": (_set("weight_bytes", 10**9), "weight_bytes 1000000000 is not between 0"),
    "negative weight bytes": (_set("weight_bytes", -1), "weight_bytes -1 is not between 0"),
    "string weight bytes": (_set("weight_bytes", "12"), "weight_bytes"),
    "a header that is a list": (lambda header: [header], "the header is not a JSON object"),
    # a compute kernel the device has, attributes of the types the dialect gives them
    "an unknown kernel": (_set("instructions", 2, 5, "conv9"), "instruction 2 (Compute): no compute kernel 'conv9'"),
    "a float kernel_shape": (_attr("kernel_shape", [3.0, 3]), "(Compute): attribute kernel_shape [3.0, 3]: expected a"),
    "a dict group": (_attr("group", {"g": 1}), "attribute group {'g': 1}: expected an integer"),
    "a zero group": (_attr("group", 0), "attribute group 0: it must be at least 1"),
    "a string stride": (_attr("strides", "1,1"), "attribute strides '1,1': expected a list of integers"),
    "a huge kernel": (_attr("kernel_shape", [10**30, 3]), "outside the 64-bit integers"),
    "a negative dilation": (_attr("dilations", [-1, 1]), "attribute dilations [-1, 1]: each value must be at least 1"),
    "a string relu flag": (_attr("do_relu", "yes"), "attribute do_relu 'yes': expected a boolean"),
    "a list relu limit": (_attr("relu_limit", [1.0]), "attribute relu_limit [1.0]: expected a number"),
}


@pytest.mark.parametrize("case", LOAD_REFUSES)
def test_load_refuses_a_resealed_bad_field(model, tmp_path, capsys, case):
    edit, fragment = LOAD_REFUSES[case]
    refused(capsys, hostile(model, tmp_path, edit), model[1], "hostile.tpumodel", fragment, "recompile")


# What a kernel needs of its operands: refused by the device when `run` loads the program,
# before anything runs (`info` shows them).
RUN_REFUSES = {
    "a group that does not divide": (_attr("group", 2), "group 2 does not divide 3 input"),
    "a kernel_shape the filter lacks": (_attr("kernel_shape", [5, 5]), "kernel_shape [5, 5] but filter [4, 3, 3, 3]"),
    "huge pads": (_attr("pads", [1 << 40, 1, 1, 1]), "spatial dim 0: input 8, kernel 3"),
    "a compute without inputs": (_set("instructions", 6, 6, []), "a matmul needs its first input"),
    "a matmul without weights": (_set("instructions", 6, 6, 1, None), "a matmul needs its weights as input 1"),
    "DDR over the size limit": (_set("ddr_bytes", 10 << 30), "the program's DDR of shape"),
}


@pytest.mark.parametrize("case", RUN_REFUSES)
def test_run_refuses_a_resealed_bad_compute(model, tmp_path, capsys, case, monkeypatch):
    monkeypatch.setenv("TPU_XDSL_MAX_TENSOR_BYTES", "1G")
    edit, fragment = RUN_REFUSES[case]
    path = hostile(model, tmp_path, edit)
    refused(capsys, path, model[1], "instruction" if case != "DDR over the size limit" else "DDR", fragment,
            commands=("run",))


def test_a_layer_name_with_a_newline_stays_on_one_line(model, tmp_path, capsys):
    def edit(header: dict[str, Any]) -> None:
        header["layers"][0] = "relu\nsecond line"
        header["attrs"][0]["group"] = 2
    refused(capsys, hostile(model, tmp_path, edit), model[1], "layer 'relu\\nsecond line'", "group 2 does not divide",
            commands=("run",))


def test_a_kernel_that_raises_on_made_up_operands_is_one_line(model, tmp_path, capsys):
    """Operands check_compute has no rule for (a matmul's weights of another shape) still end
    in one line naming the instruction, not a traceback."""
    def edit(header: dict[str, Any]) -> None:
        header["instructions"][6][6][1] = [0, "float32", [1, 255, 1, 5], [255, 5], True]
    refused(capsys, hostile(model, tmp_path, edit), model[1], "instruction 6 (Compute", "matmul kernel cannot run",
            commands=("run",))


# -- the attribute table is the dialect's --------------------------------------------------------


def _irdl_attribute_types() -> dict[str, set[str]]:
    """Each attribute name of irdl/tpu.irdl and the types its ops give it."""
    found: dict[str, set[str]] = {}
    for body in re.findall(r"irdl\.operation @\w+ \{(.*?)\n  \}", IRDL.read_text(), re.DOTALL):
        defs = dict(re.findall(r"%(\w+) = (.+)", body))
        block = re.search(r"irdl\.attributes \{(.*?)\}", body, re.DOTALL)
        for name, var in re.findall(r'"(\w+)" = (?:optional )?%(\w+)', block.group(1) if block else ""):
            found.setdefault(name, set()).add(_irdl_kind(defs, defs[var]))
    return found


def _irdl_kind(defs: dict[str, str], text: str) -> str:
    if text.startswith('irdl.base "#builtin.'):
        return {"integer": "int", "float": "number", "string": "str"}[text.split(".")[-1].rstrip('"')]
    if text.startswith("irdl.parametric @builtin::@array<%"):
        return _irdl_kind(defs, defs[text.split("%")[1].rstrip(">")]) + "s"
    if text.startswith("irdl.parametric @builtin::@integer<") and "%i1" in text:
        return "bool"
    return text


def test_attribute_types_are_those_of_the_tpu_dialect():
    dialect = _irdl_attribute_types()
    assert len(dialect) > 50
    for name, kinds in dialect.items():
        if name == "ginfo":  # the layer-group placement: codegen reads it, no kernel does
            continue
        assert kinds == {ATTRIBUTE_TYPES[name]}, (name, kinds)


# -- a mutation loop ----------------------------------------------------------------------------

REPLACEMENTS = [None, True, -1, 0, 7, 2**63, 10**30, 1.5, 1e30, "x", "bool", "int8", [], [0], [-1], [1.5],
                [10**9, 10**9], {}, {"k": 1}, {"$float": "nan"}, [3, 3], [0, 0, 0, 0]]


def test_a_seeded_mutation_loop_gets_exit_code_0_or_2(model, tmp_path, capsys):
    """Random values at random places of the header, sealed again: `info` and `run` succeed or
    refuse in one line, never crash (exit 3 or an exception)."""
    rng = random.Random(17)
    data, x = model[0].read_bytes(), model[1]
    path, out = tmp_path / "m.tpumodel", tmp_path / "out.npz"
    codes = []
    for _ in range(30):
        def edit(header: dict[str, Any]) -> None:
            parent: Any = header
            key: Any = rng.choice(["attrs", "instructions", "inputs", "outputs", "tensors", "ddr_bytes"])
            while isinstance(parent[key], dict | list) and parent[key] and rng.random() < 0.85:
                parent = parent[key]
                key = rng.choice(list(parent)) if isinstance(parent, dict) else rng.randrange(len(parent))
            parent[key] = rng.choice(REPLACEMENTS)
        path.write_bytes(reseal(data, edit))
        for args in (["info", path, "--instructions"], ["run", path, "--input", x, "--output", out]):
            code, _, err = run(capsys, *args)
            assert code in (0, 2) and "Traceback" not in err and len(err.strip().splitlines()) <= 1, (args[0], err)
            assert code == 0 or not out.exists()
            codes.append(code)
            out.unlink(missing_ok=True)
    assert codes.count(2) > 20, codes


def test_reseal_keeps_the_blob_and_pads_the_header(model):
    data = model[0].read_bytes()
    sealed = reseal(data, b'{"x": 1}')
    header_length, blob_length = struct.unpack_from("<QQ", sealed, 12)
    assert (FIXED_HEADER_BYTES + header_length) % 64 == 0 and sealed[-blob_length:] == data[-blob_length:]
