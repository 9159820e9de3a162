"""Outputs never destroy inputs, and a command's outputs are all or nothing.

Every command that writes refuses, before any work and in one line naming both flags, an
output that is the same file as an input (given, through a symbolic link, or derived: a
module's weight file, a dataset's samples, the `N_weights.npz` beside an output `N.mlir`),
two outputs on one file, a folder, and a folder that is missing, a file or not writable; no
input changes and no file appears. Killed by SIGTERM while writing, a command leaves the old
outputs as they were and no temporary; after SIGKILL the next run removes the temporaries.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.test_cli_int8_errors import assert_fails_cleanly, calibrated_top, int8_head_model
from tpu_xdsl import files
from tpu_xdsl.files import TEMP_MARK, OutputSet, immediate, write_atomic
from tpu_xdsl.tools.tpu_xdsl import main


@dataclass(frozen=True)
class Flow:
    """transform + calibrate + deploy -o m_int8.tpumodel of a tiny conv -> matmul model."""

    folder: Path
    onnx: Path
    mlir: Path  # the TOP module
    weights: Path  # its weight file
    x: Path  # a test input
    reference: Path  # transform --test-result
    table: Path
    data: Path  # the calibration samples' folder
    model: Path  # the .tpumodel
    tpu_mlir: Path  # its TPU module


@pytest.fixture(scope="module")
def flow(tmp_path_factory) -> Flow:
    folder = tmp_path_factory.mktemp("flow")
    top = calibrated_top(folder, int8_head_model(folder / "m.onnx"), "m")
    model = folder / "m_int8.tpumodel"
    assert main(["deploy", str(top.mlir), "--quantize", "INT8", "--calibration-table", str(top.table),
                 "-o", str(model)]) == 0
    return Flow(folder, folder / "m.onnx", top.mlir, folder / "m_weights.npz", top.x, top.reference, top.table,
                folder / "data", model, folder / "m_int8.mlir")


def contents(*folders: Path) -> dict[Path, str]:
    """Every file under `folders` (hidden ones too) with the SHA-256 of its bytes."""
    return {path: hashlib.sha256(path.read_bytes()).hexdigest()
            for folder in folders for path in folder.rglob("*") if path.is_file()}


def refused(capsys, folders: tuple[Path, ...], args: list, *fragments: str) -> str:
    """`args` exits 2 with one line holding every fragment; no file under `folders` changes
    (by content, not only size and time) and none appears."""
    before = contents(*folders)
    line = assert_fails_cleanly(capsys, folders, args, *fragments)
    assert contents(*folders) == before, "a refused command must change no file and write none"
    return line


def transform_args(flow: Flow, output: Path, test_result: Path | str | None = None, test_input=None) -> list:
    args = ["transform", "--model-def", flow.onnx, "--model-name", "m", "--input-shapes", "[[1,3,8,8]]",
            "--test-input", test_input or flow.x, "-o", output]
    return args + (["--test-result", test_result] if test_result is not None else [])


def deploy_args(flow: Flow, output: Path, *extra) -> list:
    return ["deploy", flow.mlir, "--quantize", "INT8", "--calibration-table", flow.table, *extra, "-o", output]


# -- an output that is an input -----------------------------------------------------------------


def test_transform_test_result_on_an_input(flow, tmp_path, capsys):
    folders = (flow.folder, tmp_path)
    refused(capsys, folders, transform_args(flow, tmp_path / "t.mlir", flow.onnx),
            f"--test-result {flow.onnx} is the same file as --model-def {flow.onnx}")
    refused(capsys, folders, transform_args(flow, tmp_path / "t.mlir", flow.x),
            "--test-result", "is the same file as --test-input")
    # The module's own weight file: two outputs on one file.
    refused(capsys, folders, transform_args(flow, tmp_path / "t.mlir", tmp_path / "t_weights.npz"),
            "(the weight file of -o", "--test-result", "are the same file")


def test_transform_weight_file_on_the_test_input(flow, tmp_path, capsys):
    x = tmp_path / "q_weights.npz"
    shutil.copy(flow.x, x)
    refused(capsys, (flow.folder, tmp_path), transform_args(flow, tmp_path / "q.mlir", test_input=x),
            f"{x} (the weight file of -o {tmp_path / 'q.mlir'}) is the same file as --test-input {x}")


def test_an_output_through_a_symbolic_link_to_an_input(flow, tmp_path, capsys):
    link = tmp_path / "result.npz"
    link.symlink_to(flow.onnx)
    refused(capsys, (flow.folder, tmp_path), transform_args(flow, tmp_path / "t.mlir", link),
            f"--test-result {link} is the same file as --model-def")
    page = tmp_path / "r.html"
    page.symlink_to(flow.x)
    refused(capsys, (flow.folder, tmp_path), ["report", flow.mlir, "--input", flow.x, "-o", page],
            f"-o {page} is the same file as --input")
    hard = tmp_path / "hard.npz"
    os.link(flow.x, hard)  # another name of the same file
    refused(capsys, (flow.folder, tmp_path), ["run", flow.model, "--input", flow.x, "--output", hard],
            f"--output {hard} is the same file as --input {flow.x}")
    linked_folder = tmp_path / "here"
    linked_folder.symlink_to(flow.folder)
    refused(capsys, (flow.folder, tmp_path),
            ["run", flow.model, "--input", flow.x, "--output", linked_folder / "m_int8.tpumodel"],
            "--output", "is the same file as the model")


@pytest.mark.parametrize("which", ["model", "tpu mlir", "weights", "input"])
def test_run_output_on_an_input(flow, tmp_path, capsys, which):
    model = flow.model if which == "model" else flow.tpu_mlir
    target = {"model": flow.model, "tpu mlir": flow.tpu_mlir, "weights": flow.folder / "m_int8_weights.npz",
              "input": flow.x}[which]
    refused(capsys, (flow.folder, tmp_path), ["run", model, "--input", flow.x, "--output", target],
            f"--output {target} is the same file as")


def test_run_output_on_the_weight_file_the_module_names(flow, tmp_path, capsys):
    """The weight file is the one `module.weight_file` names, whatever the .mlir's name."""
    shutil.copy(flow.tpu_mlir, tmp_path / "renamed.mlir")
    (tmp_path / "renamed.mlir").write_text(
        flow.tpu_mlir.read_text().replace('"m_int8_weights.npz"', '"stored.npz"'))
    shutil.copy(flow.folder / "m_int8_weights.npz", tmp_path / "stored.npz")
    refused(capsys, (flow.folder, tmp_path),
            ["run", tmp_path / "renamed.mlir", "--input", flow.x, "--output", tmp_path / "stored.npz"],
            f"--output {tmp_path / 'stored.npz'} is the same file as {tmp_path / 'stored.npz'} "
            f"(the weight file of the model {tmp_path / 'renamed.mlir'})")


def test_run_trace_on_the_model_and_on_the_output(flow, tmp_path, capsys):
    base = ["run", flow.model, "--input", flow.x]
    refused(capsys, (flow.folder, tmp_path), [*base, "--output", tmp_path / "o.npz", "--trace", flow.model],
            f"--trace {flow.model} is the same file as the model")
    refused(capsys, (flow.folder, tmp_path), [*base, "--output", tmp_path / "o.npz", "--trace", tmp_path / "o.npz"],
            "--output", "--trace", "are the same file")


def test_calibrate_output_on_a_weight_file_or_a_sample(flow, tmp_path, capsys):
    base = ["calibrate", flow.mlir, "--dataset", flow.data]
    refused(capsys, (flow.folder, tmp_path), [*base, "-o", flow.weights],
            f"-o {flow.weights} is the same file as", "(the weight file of the model")
    sample = flow.data / "s0.npz"
    refused(capsys, (flow.folder, tmp_path), [*base, "-o", sample],
            f"-o {sample} is the same file as {sample} (a sample of --dataset {flow.data})")
    listing = tmp_path / "list.txt"
    listing.write_text(f"{flow.data / 's1.npz'}\n")
    refused(capsys, (flow.folder, tmp_path), ["calibrate", flow.mlir, "--data-list", listing, "-o", listing],
            "-o", "is the same file as --data-list")
    refused(capsys, (flow.folder, tmp_path),
            ["calibrate", flow.mlir, "--data-list", listing, "-o", flow.data / "s1.npz"],
            "(a sample of --data-list")


def test_calibrate_model_output_on_an_input(flow, tmp_path, capsys):
    sample = tmp_path / "e_weights.npz"
    shutil.copy(flow.data / "s0.npz", sample)
    listing = tmp_path / "list.txt"
    listing.write_text(f"{sample}\n{flow.data / 's1.npz'}\n")
    refused(capsys, (flow.folder, tmp_path),
            ["calibrate", flow.mlir, "--data-list", listing, "--we", "--model-output", tmp_path / "e.mlir",
             "-o", tmp_path / "t"],
            f"(the weight file of --model-output {tmp_path / 'e.mlir'}) is the same file as", "--data-list")


@pytest.mark.parametrize("flag", ["--test-reference", "--test-input"])
def test_deploy_weight_file_on_an_input(flow, tmp_path, capsys, flag):
    """deploy -o r.mlir writes r_weights.npz beside it."""
    named = tmp_path / "r_weights.npz"
    shutil.copy(flow.reference if flag == "--test-reference" else flow.x, named)
    test = {"--test-reference": named, "--test-input": flow.x}
    test[flag] = named
    extra = ["--test-input", test["--test-input"], "--test-reference", test["--test-reference"]]
    for output in (tmp_path / "r.mlir", tmp_path / "r.tpumodel"):
        refused(capsys, (flow.folder, tmp_path), deploy_args(flow, output, *extra),
                f"{named} (the weight file of -o {output}) is the same file as {flag} {named}")


def test_deploy_output_on_the_calibration_table(flow, tmp_path, capsys):
    link = tmp_path / "t.tpumodel"
    link.symlink_to(flow.table)
    refused(capsys, (flow.folder, tmp_path), deploy_args(flow, link),
            f"-o {link} is the same file as --calibration-table {flow.table}")


def test_search_qtable_output_on_a_sample(flow, tmp_path, capsys):
    sample = flow.data / "s2.npz"
    refused(capsys, (flow.folder, tmp_path),
            ["search-qtable", flow.mlir, "--calibration-table", flow.table, "--dataset", flow.data, "-o", sample],
            f"-o {sample} is the same file as {sample} (a sample of --dataset")


# -- an output that cannot be a file ------------------------------------------------------------


def outputs_of_every_command(flow: Flow, output) -> dict[str, list]:
    """A command line of each command writing `output`."""
    return {
        "transform": transform_args(flow, output) if str(output).endswith(".mlir") else
        transform_args(flow, flow.folder / "unused.mlir", output),
        "run": ["run", flow.model, "--input", flow.x, "--output", output],
        "run --trace": ["run", flow.model, "--input", flow.x, "--output", flow.folder / "unused.npz",
                        "--trace", output],
        "calibrate": ["calibrate", flow.mlir, "--dataset", flow.data, "-o", output],
        "deploy": deploy_args(flow, output),
        "search-qtable": ["search-qtable", flow.mlir, "--calibration-table", flow.table, "--dataset", flow.data,
                          "-o", output],
    }


COMMANDS = ["transform", "run", "run --trace", "calibrate", "deploy", "search-qtable"]


@pytest.mark.parametrize("command", COMMANDS)
def test_output_is_the_current_folder(flow, tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    args = outputs_of_every_command(flow, ".")[command]
    refused(capsys, (flow.folder, tmp_path), args, ". is a folder")


@pytest.mark.parametrize("command", COMMANDS)
def test_output_is_a_folder(flow, tmp_path, capsys, command):
    folder = tmp_path / ("out.tpumodel" if command == "deploy" else "out.mlir" if command == "transform" else "out")
    folder.mkdir()
    refused(capsys, (flow.folder, tmp_path), outputs_of_every_command(flow, folder)[command], f"{folder} is a folder")
    # A name ending in a slash names a folder, even one that does not exist.
    refused(capsys, (flow.folder, tmp_path), outputs_of_every_command(flow, f"{tmp_path / 'new'}/")[command],
            "is a folder")


def test_a_derived_output_that_is_a_folder(flow, tmp_path, capsys):
    (tmp_path / "r.mlir").mkdir()
    refused(capsys, (flow.folder, tmp_path), deploy_args(flow, tmp_path / "r.tpumodel"),
            f"{tmp_path / 'r.mlir'} (the .mlir of -o {tmp_path / 'r.tpumodel'}) is a folder")
    (tmp_path / "s_weights.npz").mkdir()
    refused(capsys, (flow.folder, tmp_path), transform_args(flow, tmp_path / "s.mlir"),
            f"{tmp_path / 's_weights.npz'} (the weight file of -o {tmp_path / 's.mlir'}) is a folder")


@pytest.mark.parametrize("command", COMMANDS)
def test_output_folder_missing(flow, tmp_path, capsys, command):
    name = {"transform": "x.mlir", "deploy": "x.tpumodel"}.get(command, "x")
    output = tmp_path / "nowhere" / name
    refused(capsys, (flow.folder, tmp_path), outputs_of_every_command(flow, output)[command],
            str(output), f"folder {tmp_path / 'nowhere'} does not exist")


@pytest.mark.parametrize("command", COMMANDS)
def test_output_folder_is_a_file(flow, tmp_path, capsys, command):
    name = {"transform": "x.mlir", "deploy": "x.tpumodel"}.get(command, "x")
    output = flow.x / name
    refused(capsys, (flow.folder, tmp_path), outputs_of_every_command(flow, output)[command],
            str(output), f"{flow.x} is a file, not a folder")


@pytest.mark.parametrize("command", COMMANDS)
def test_output_folder_not_writable(flow, tmp_path, capsys, monkeypatch, command):
    locked = tmp_path / "locked"
    locked.mkdir()
    name = {"transform": "x.mlir", "deploy": "x.tpumodel"}.get(command, "x")
    if os.geteuid() == 0:
        # chmod does not stop root: make the folder unwritable to the check instead.
        real_access = os.access
        monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if Path(path) == locked
                            else real_access(path, mode, **kw))
    else:
        locked.chmod(0o555)
    try:
        refused(capsys, (flow.folder, tmp_path), outputs_of_every_command(flow, locked / name)[command],
                f"folder {locked} is not writable")
    finally:
        locked.chmod(0o755)


def test_output_that_is_not_a_regular_file(flow, tmp_path, capsys):
    """Renaming over /dev/null (as root) would replace the device."""
    refused(capsys, (flow.folder, tmp_path), ["run", flow.model, "--input", flow.x, "--output", os.devnull],
            f"--output {os.devnull} exists and is not a regular file")


def test_demo_workdir_that_cannot_be_made(tmp_path, capsys):
    (tmp_path / "file").touch()
    refused(capsys, (tmp_path,), ["demo", "--workdir", tmp_path / "file" / "work"],
            "--workdir", "cannot make the folder")


# -- all or nothing -----------------------------------------------------------------------------


def test_an_output_set_renames_only_when_complete(tmp_path):
    (tmp_path / "a").write_text("old a")
    with pytest.raises(RuntimeError), OutputSet():
        write_atomic(tmp_path / "a", lambda f: f.write("new a"))
        write_atomic(tmp_path / "b", lambda f: f.write("new b"))
        assert (tmp_path / "a").read_text() == "old a" and not (tmp_path / "b").exists()
        raise RuntimeError("a failure after both files were written")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"] and (tmp_path / "a").read_text() == "old a"
    with OutputSet() as outer:
        with OutputSet():  # joins the outer set
            write_atomic(tmp_path / "a", lambda f: f.write("new a"))
        with immediate():  # a work file a later step reads
            write_atomic(tmp_path / "work", lambda f: f.write("w"))
        assert (tmp_path / "work").read_text() == "w" and (tmp_path / "a").read_text() == "old a"
        outer.path(tmp_path / "c").write_text("c")
        assert [p.name for p in outer.finals] == ["a", "c"]
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {"a": "new a", "work": "w", "c": "c"}
    assert oct((tmp_path / "c").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def test_a_signal_another_thread_takes_waits_for_the_renames(tmp_path, monkeypatch):
    """Ctrl-C between two renames of a set's final step is held until both are in place,
    also when the OS hands it to a thread other than the main one (a progress bar's monitor,
    a pool's manager): Python runs the handler in the main thread whichever thread took it,
    so masking the signal in the main thread alone would not hold it."""
    release = threading.Event()
    other = threading.Thread(target=release.wait, daemon=True)
    other.start()
    renamed: list[str] = []
    real_replace = os.replace

    def replace(source, destination):
        if renamed:  # the second rename: Ctrl-C, taken by the other thread
            signal.pthread_kill(other.ident, signal.SIGINT)
            time.sleep(0.05)  # the main thread passes many points where Python runs handlers
        real_replace(source, destination)
        renamed.append(Path(destination).name)

    monkeypatch.setattr(files.os, "replace", replace)
    # Python's own Ctrl-C handler: a process started in the background (CI) inherits SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), OutputSet():
            write_atomic(tmp_path / "a", lambda f: f.write("new a"))
            write_atomic(tmp_path / "b", lambda f: f.write("new b"))
    finally:
        release.set()
        signal.signal(signal.SIGINT, previous)
    assert renamed == ["a", "b"]
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {"a": "new a", "b": "new b"}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_stale_temporaries_of_dead_processes_are_removed(tmp_path, monkeypatch):
    final = tmp_path / "out.npz"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    stale = tmp_path / f".out.npz{TEMP_MARK}{dead.stdout.strip()}-0123abcd"
    alive = tmp_path / f".out.npz{TEMP_MARK}{os.getppid()}-0123abcd"
    other = tmp_path / f".other.npz{TEMP_MARK}{dead.stdout.strip()}-0123abcd"
    for path in (stale, alive, other):
        path.write_bytes(b"partial")
        os.utime(path, (time.time() - 60, time.time() - 60))
    monkeypatch.setattr(files, "_STARTED", time.time())
    write_atomic(final, lambda f: f.write("done"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([final.name, alive.name, other.name])


CHILD = textwrap.dedent("""
    import sys, time
    import tpu_xdsl.tools.deploy as deploy

    def slow(*args, **kwargs):  # every output is written (as temporaries) when the device check starts
        print("WRITTEN", flush=True)
        time.sleep(60)

    deploy._check_device = slow
    from tpu_xdsl.tools.tpu_xdsl import main
    sys.exit(main(sys.argv[1:]))
""")


def _deploy_stopped(flow: Flow, folder: Path, how: signal.Signals) -> subprocess.CompletedProcess:
    """deploy -o folder/m_int8.tpumodel in a child, stopped by `how` once it wrote every output."""
    args = [sys.executable, "-c", CHILD, *map(str, deploy_args(
        flow, folder / "m_int8.tpumodel", "--test-input", flow.x, "--test-reference", flow.reference))]
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    lines = []
    for line in child.stdout:
        lines.append(line)
        if line.strip() == "WRITTEN":
            break
    else:
        pytest.fail("".join(lines) + child.communicate()[1])
    temporaries = sorted(p.name for p in folder.iterdir() if TEMP_MARK in p.name)
    assert len(temporaries) == 3, temporaries  # weights, .mlir, .tpumodel
    child.send_signal(how)
    out, err = child.communicate(timeout=60)
    return subprocess.CompletedProcess(args, child.returncode, "".join(lines) + out, err)


def test_sigterm_leaves_the_old_outputs_and_no_temporary(flow, tmp_path):
    for name in ("m_int8.tpumodel", "m_int8.mlir", "m_int8_weights.npz"):
        shutil.copy(flow.folder / name, tmp_path / name)
    (tmp_path / "m_int8.tpumodel").write_bytes(b"an old model")  # to tell the old file from a new one
    before = contents(tmp_path)
    done = _deploy_stopped(flow, tmp_path, signal.SIGTERM)
    assert done.returncode == 143, done.stderr
    assert done.stderr.strip() == "tpu-xdsl: terminated", done.stderr
    assert contents(tmp_path) == before


def test_sigkill_leaves_recognizable_temporaries_the_next_run_removes(flow, tmp_path, monkeypatch):
    done = _deploy_stopped(flow, tmp_path, signal.SIGKILL)
    assert done.returncode == -signal.SIGKILL
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == 3 and all(TEMP_MARK in name for name in left), left
    monkeypatch.setattr(files, "_STARTED", time.time() + 1)  # the next run starts after the kill
    assert main([str(a) for a in deploy_args(flow, tmp_path / "m_int8.tpumodel")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m_int8.mlir", "m_int8.tpumodel", "m_int8_weights.npz"]


def test_transform_output_on_the_model_external_data(tmp_path, capsys):
    """An ONNX model's external data file is an input too."""
    import onnx

    from tests.test_cli_transform import small_cnn

    model = onnx.load(small_cnn(tmp_path / "src.onnx"))
    onnx.save(model, tmp_path / "m.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="m_weights.npz", size_threshold=0)
    x = tmp_path / "x.npz"
    np.savez(x, image=np.zeros((1, 3, 8, 8), np.float32))
    refused(capsys, (tmp_path,), ["transform", "--model-def", tmp_path / "m.onnx", "--model-name", "m",
                                  "--input-shapes", "[[1,3,8,8]]", "-o", tmp_path / "m.mlir"],
            f"{tmp_path / 'm_weights.npz'} (the weight file of -o {tmp_path / 'm.mlir'}) is the same file as "
            f"{tmp_path / 'm_weights.npz'} (external data of --model-def {tmp_path / 'm.onnx'})")
    refused(capsys, (tmp_path,), ["transform", "--model-def", tmp_path / "m.onnx", "--model-name", "m",
                                  "--input-shapes", "[[1,3,8,8]]", "--test-input", x,
                                  "--test-result", tmp_path / "m_weights.npz", "-o", tmp_path / "n.mlir"],
            "--test-result", "is the same file as", "(external data of --model-def")
