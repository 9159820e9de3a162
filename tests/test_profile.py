"""`tpu-xdsl run --profile` per layer group and the roofline, and `--trace` (Chrome trace events):
every figure checked against one computed here from the simulated schedule or the chip's
published numbers, not read back from the profile code."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.test_cli_int8_errors import assert_fails_cleanly, run
from tests.test_codegen import lower
from tests.test_layer_group_codegen import conv_chain
from tpu_xdsl.backend.codegen import Codegen, codegen
from tpu_xdsl.backend.codegen.groups import WeightLoads
from tpu_xdsl.device.chip import chip_config
from tpu_xdsl.device.isa import (
    Compute,
    DdrView,
    DmaCopy,
    DmaLoad,
    DmaStore,
    LocalTensor,
)
from tpu_xdsl.device.model_file import IoDesc, TpuModel, save_model
from tpu_xdsl.device.runtime import (
    profile_lines,
    profile_rows,
    roofline_cycles,
    run_model,
)
from tpu_xdsl.device.trace import TraceFileError, trace_events, write_trace
from tpu_xdsl.transforms.tpu_assign_memory import assign_memory
from tpu_xdsl.transforms.tpu_layer_group import layer_group

# cv183x as docs/device.md gives it: 650 MHz, INT8 2,048 MAC/cycle, DDR -> local 4 GB/s.
CV183X_HZ, CV183X_INT8_PEAK, CV183X_DDR_BYTES_PER_S = 650e6, 2048, 4e9
# The columns after the name, right to left from the end of a row.
COLUMNS = ("ops", "slices", "cycles", "compute", "dma", "MACs", "util", "DMA bytes", "compute%", "DMA%")


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    """cast -> conv+relu -> conv -> add -> max pool -> requant to one scale on [2, 8, 96, 64],
    INT8 on cv183x, run as one layer group (its output stored slice by slice), then a flatten
    and a cast out of INT8 outside groups; and the run's timeline."""
    folder = tmp_path_factory.mktemp("grouped")
    tpu, feeds = lower(conv_chain(flatten=True), "INT8", "cv183x", folder)
    model = grouped_program(tpu)
    return model, feeds, run_model(model, feeds).timeline


def grouped_program(tpu) -> TpuModel:
    """The compiled program, grouped by tpu-layer-group."""
    layer_group(tpu)
    assign_memory(tpu)
    return codegen(tpu)


def nbytes(view: DdrView | LocalTensor) -> int:
    return math.prod(view.shape4 if isinstance(view, LocalTensor) else view.shape) * np.dtype(view.dtype).itemsize


def row_of(lines: list[str], name: str) -> dict[str, str]:
    line = next(line for line in lines if line[:40].strip() == name)
    return dict(zip(COLUMNS, line[40:].split()[-len(COLUMNS):], strict=True))


def test_the_group_row(grouped):
    model, _, timeline = grouped
    mine = [s for s in timeline.scheduled if s.instruction.group == 0]
    assert mine and {type(s.instruction) for s in mine} == {DmaLoad, Compute, DmaStore}
    span = max(s.finish for s in mine) - min(s.start for s in mine)
    moved = sum(nbytes(s.instruction.dst if isinstance(s.instruction, DmaLoad) else s.instruction.src)
                for s in mine if not isinstance(s.instruction, Compute))
    compute = sum(s.finish - s.start for s in mine if isinstance(s.instruction, Compute))
    dma = sum(s.finish - s.start for s in mine if not isinstance(s.instruction, Compute))
    # y_per_tensor [2, 16, 48, 32] is the group's only stored tensor: one store per step, and the steps'
    # N and H offsets (from the store addresses) give the cut.
    stores = [s.instruction.dst for s in mine if isinstance(s.instruction, DmaStore)]
    base = min(v.addr for v in stores)
    n_starts = {(v.addr - base) // v.strides[0] for v in stores}
    h_starts = {(v.addr - base) % v.strides[0] // v.strides[2] for v in stores}
    assert len(stores) == len(n_starts) * len(h_starts) > 1
    assert sum(v.shape[2] for v in stores) == len(n_starts) * 48

    (row,) = [r for r in profile_rows(model, timeline) if r.group is not None]
    # conv and relu fuse into one op, named by the relu's output; the flatten needs one scale
    assert row.name == "y_per_tensor" and row.group.ops == ("x_int8", "r1", "c2", "s", "y", "y_per_tensor")
    assert (row.group.n_slices, row.group.h_slices) == (len(n_starts), len(h_starts))
    assert (row.span, row.dma_bytes, row.busy("compute"), row.busy("dma")) == (span, moved, compute, dma)

    lines = profile_lines(model, timeline)
    text = row_of(lines, "group 0: y_per_tensor")
    assert text["ops"] == "6" and text["slices"] == f"{len(n_starts)}x{len(h_starts)}"
    assert (int(text["cycles"]), int(text["DMA bytes"])) == (span, moved)
    assert (int(text["compute"]), int(text["dma"])) == (compute, dma)
    assert text["compute%"] == f"{compute / span:.1%}" and text["DMA%"] == f"{dma / span:.1%}"
    assert 0 < compute <= span and 0 < dma <= span  # an engine is busy at most the whole span
    header = next(line for line in lines if line.startswith("group 0: y_per_tensor"))
    assert lines[lines.index(header) + 1] == "    ops: x_int8, r1, c2, s, y, y_per_tensor"


def test_layers_outside_groups_keep_one_row_each(grouped):
    model, _, timeline = grouped
    rows = profile_rows(model, timeline)
    # every instruction in exactly one row
    assert sorted(s.instruction.id for r in rows for s in r.scheduled) == list(range(len(model.instructions)))
    outside = list(dict.fromkeys(s.instruction.layer for s in timeline.scheduled if s.instruction.group < 0))
    # the cast out of INT8; the flatten before it is a view of the group's output, no instruction
    assert outside == ["f"]
    assert [r.name for r in rows if r.group is None] == outside
    lines = profile_lines(model, timeline)
    for name in outside:
        mine = [s for s in timeline.scheduled if s.instruction.layer == name]
        text = row_of(lines, name)
        assert (text["ops"], text["slices"]) == ("-", "-")
        assert int(text["cycles"]) == max(s.finish for s in mine) - min(s.start for s in mine)


def test_the_roofline_of_a_small_model_by_hand():
    conv = Compute(0, kind="conv", inputs=(), outputs=(), attrs={}, macs=3_000_000)
    add = Compute(1, kind="add", inputs=(), outputs=(), attrs={}, macs=1_000_000)
    model = TpuModel(
        name="m", chip="bm1684x", mode="INT8", instructions=[conv, add], coefficients=bytes(10_000),
        ddr_bytes=1 << 20, inputs=[IoDesc("x", (1, 3, 32, 32), "int8", 10_240)],
        outputs=[IoDesc("y", (1, 1000), "float32", 16_384)],
    )
    # bm1684x: 1 GHz, DDR -> local 58 GB/s = 58 bytes a cycle; INT8 16,384 MAC/cycle, F32 1,024.
    # INT8: 4e6 MACs take 244 cycles, 10,000 + 3,072 + 4,000 bytes 294: bound by memory.
    assert roofline_cycles(model) == pytest.approx((10_000 + 3 * 32 * 32 + 4 * 1000) / 58)
    # F32: the MACs take 3,906 cycles: bound by compute.
    model.mode = "F32"
    assert roofline_cycles(model) == pytest.approx(4_000_000 / 1024)


def test_the_profile_ends_with_the_roofline_ratio(grouped, tmp_path):
    model, _, timeline = grouped
    macs = sum(i.macs for i in model.instructions if isinstance(i, Compute))
    io = sum(math.prod(d.shape) * np.dtype(d.dtype).itemsize for d in (*model.inputs, *model.outputs))
    # The weights' own bytes: the coefficients of the same program compiled without the
    # lane images of its group's weights, which repeat them padded.
    tpu, _ = lower(conv_chain(flatten=True), "INT8", "cv183x", tmp_path)
    layer_group(tpu)
    assign_memory(tpu)
    weights = len(Codegen(tpu, chip_config("cv183x"), WeightLoads(images=False)).run().coefficients)
    assert weights < len(model.coefficients)
    bound = max(macs / CV183X_INT8_PEAK, (weights + io) / (CV183X_DDR_BYTES_PER_S / CV183X_HZ))
    assert roofline_cycles(model) == pytest.approx(bound)
    simulated = max(s.finish for s in timeline.scheduled)
    last = profile_lines(model, timeline)[-1]
    assert last.startswith(f"roofline: bound {bound:.0f} cycles")
    assert last.endswith(f"simulated / bound = {simulated / bound:.2f}")


def test_the_trace_has_one_event_per_instruction_on_its_engines_track(grouped, tmp_path):
    model, _, timeline = grouped
    path = tmp_path / "t.json"
    write_trace(path, model, timeline)
    events = json.loads(path.read_text())["traceEvents"]
    tracks = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sorted(tracks.values()) == ["DMA", "compute"]
    complete = [e for e in events if e["ph"] == "X"]
    assert sorted(e["args"]["id"] for e in complete) == list(range(len(model.instructions)))
    microseconds = 1e6 / CV183X_HZ
    for event in complete:
        item = timeline.scheduled[event["args"]["id"]]
        instruction = item.instruction
        assert tracks[event["tid"]] == ("compute" if isinstance(instruction, Compute) else "DMA")
        assert event["ts"] == pytest.approx(item.start * microseconds, rel=1e-12)
        assert event["dur"] == pytest.approx((item.finish - item.start) * microseconds, rel=1e-12)
        assert event["name"] == instruction.layer and event["args"]["op"] == type(instruction).__name__
        assert event["args"].get("group") == ("y_per_tensor" if instruction.group == 0 else None)
        if isinstance(instruction, Compute):
            assert (event["args"]["kind"], event["args"]["macs"]) == (instruction.kind, instruction.macs)
        else:
            # a DDR -> DDR copy reads and writes its bytes
            moved = 2 * nbytes(instruction.src) if isinstance(instruction, DmaCopy) else nbytes(
                instruction.dst if isinstance(instruction, DmaLoad) else instruction.src)
            assert event["args"]["bytes"] == moved
    assert trace_events(model, timeline)["traceEvents"] == events


def test_a_failed_trace_write_leaves_no_file(grouped, tmp_path, monkeypatch):
    model, _, timeline = grouped

    def disk_full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("tpu_xdsl.files.os.replace", disk_full)
    with pytest.raises(TraceFileError) as info:
        write_trace(tmp_path / "t.json", model, timeline)
    assert str(info.value) == (f"{tmp_path / 't.json'}: cannot write the trace (No space left on device); "
                               "check that its folder exists and is writable")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def saved(grouped, tmp_path_factory) -> tuple[Path, Path]:
    model, feeds, _ = grouped
    folder = tmp_path_factory.mktemp("cli")
    save_model(model, folder / "g.tpumodel")
    np.savez(folder / "x.npz", **feeds)
    return folder / "g.tpumodel", folder / "x.npz"


def test_run_with_profile_and_trace(grouped, saved, tmp_path, capsys):
    model, _, timeline = grouped
    tpumodel, x = saved
    code, out, err = run(capsys, "run", tpumodel, "--input", x, "--output", tmp_path / "y.npz",
                         "--profile", "--trace", tmp_path / "t.json")
    assert code == 0, err
    lines = out.splitlines()
    mine = [s for s in timeline.scheduled if s.instruction.group == 0]
    span = max(s.finish for s in mine) - min(s.start for s in mine)
    assert int(row_of(lines, "group 0: y_per_tensor")["cycles"]) == span
    assert any(line.startswith("roofline: bound ") for line in lines)
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert len([e for e in events if e["ph"] == "X"]) == len(model.instructions)
    assert f"wrote {tmp_path / 't.json'} ({len(model.instructions)} events" in out


def test_trace_into_a_missing_folder_or_onto_a_folder_fails_before_the_run(saved, tmp_path, capsys):
    tpumodel, x = saved
    args = ["run", tpumodel, "--input", x, "--output", tmp_path / "y.npz", "--trace"]
    assert_fails_cleanly(capsys, (tmp_path,), [*args, tmp_path / "no" / "t.json"],
                         f"--trace {tmp_path / 'no' / 't.json'}: folder {tmp_path / 'no'} does not exist")
    assert_fails_cleanly(capsys, (tmp_path,), [*args, tmp_path], f"--trace {tmp_path} is a folder")
    assert list(tmp_path.iterdir()) == []


def test_trace_is_for_a_tpumodel(tmp_path, capsys):
    assert_fails_cleanly(capsys, (tmp_path,), ["run", tmp_path / "m.mlir", "--input", tmp_path / "x.npz",
                                               "--output", tmp_path / "y.npz", "--trace", tmp_path / "t.json"],
                         "--trace", "for a .tpumodel")
