"""`tpu-xdsl debug` as a user drives it: a script (`--script`) and a terminal (a pseudo-terminal
with readline): breakpoints stop where they say, `print` and `compare` show a tensor in every
stage, `diff` and `break diverge` find a deliberately corrupted weight as the first diverging
tensor, the device is stepped instruction by instruction, and bad input is one line, exit 2.

Expected values come from `tpu-xdsl run --dump-all` of each stage, not from the debugger."""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.test_cli_device import compiled  # noqa: F401 (the module's fixture)
from tests.test_cli_int8_errors import assert_fails_cleanly, run
from tpu_xdsl.ir_io import read_module
from tpu_xdsl.weights import write_npz_atomic

LOOSE = "0.5,-1"  # 4 random samples calibrate the fixture's matmul poorly; see tests/test_cli_device.py


def stages(compiled, *kinds: str) -> list[str]:  # noqa: F811
    files = {"onnx": compiled.folder / "m.onnx", "top": compiled.folder / "m.mlir",
             "tpu": compiled.mlir, "device": compiled.model}
    return [str(files[k]) for k in kinds]


def session(capsys, tmp_path, compiled, kinds, commands: str, *flags: str) -> tuple[int, str, str]:  # noqa: F811
    script = tmp_path / "session.tdb"
    script.write_text(commands)
    return run(capsys, "debug", *stages(compiled, *kinds), "--input", compiled.x, "--script", script, *flags)


def dump(capsys, tmp_path, model: Path, x: Path) -> dict[str, np.ndarray]:
    out = tmp_path / f"{model.stem}_{model.suffix[1:]}_dump.npz"
    code, _, err = run(capsys, "run", model, "--input", x, "--output", out, "--dump-all")
    assert code == 0, err
    with np.load(out) as npz:
        return {k: npz[k] for k in npz.files}


def stats_line(value: np.ndarray) -> str:
    v = value.astype(np.float64)
    return f"min {v.min():.6g}  max {v.max():.6g}  mean {v.mean():.6g}  std {v.std():.6g}"


def test_breakpoint_print_and_compare_across_stages(compiled, tmp_path, capsys):  # noqa: F811
    code, out, err = session(capsys, tmp_path, compiled, ("onnx", "top", "tpu"), """
        break relu
        run
        where
        print relu
        next
        print relu 0,1,:3,0
        compare relu
        continue
        where
    """, "--tolerance", LOOSE)
    # The one command that fails is the print before the conv ran: the exit code says so.
    assert code == 2 and "1 command(s) failed; first 'print relu': 'relu' is not computed yet" in err, out + err
    top = dump(capsys, tmp_path, compiled.folder / "m.mlir", compiled.x)
    tpu = dump(capsys, tmp_path, compiled.mlir, compiled.x)
    # Stopped before the conv that makes relu, which is not computed yet.
    assert "stopped at breakpoint 1 (relu)" in out
    assert re.search(r"TPU INT8: before op #\d+ \(step \d+ of \d+\): tpu\.conv -> relu", out), out
    assert "error: 'relu' is not computed yet in TPU INT8" in out
    # After `next`: the conv's output as INT8 codes and as the real values they stand for.
    assert f"relu: shape [1, 4, 8, 8] {tpu['relu'].dtype} (TPU INT8)" in out
    assert stats_line(tpu["relu"]) in out
    with np.printoptions(precision=5, suppress=True):
        assert "relu[0,1,:3,0] = [" in out
    # compare: TOP's relu, its similarity to ONNX, and TPU's against TOP.
    assert stats_line(top["relu"]) in out
    assert re.search(r"vs ONNX: cosine 1\.0000\d\d .* ok", out), out
    assert re.search(r"vs TOP: cosine 0\.9\d+ .* ok", out), out
    assert "TPU INT8: finished" in out


def corrupt_weight(tpu_mlir: Path, folder: Path, conv: int = 0) -> tuple[Path, str]:
    """A copy of a TPU module in `folder` whose `conv`-th tpu.conv has its filter negated (as
    a lowering bug might do); and the tensor that conv makes."""
    mlir = folder / tpu_mlir.name
    shutil.copy(tpu_mlir, mlir)
    weights_file = tpu_mlir.with_name(f"{tpu_mlir.stem}_weights.npz")
    with np.load(weights_file) as npz:
        weights = {k: npz[k] for k in npz.files}
    module = read_module(mlir)
    op = [op for op in module.walk() if op.name == "tpu.conv"][conv]
    filter_op = op.operands[1].owner
    while filter_op.name == "tpu.load":  # inside a layer group: loaded from the weight
        filter_op = filter_op.operands[0].owner
    key = filter_op.attributes["names"].data[0].data
    weights[key] = (-weights[key].astype(np.int16)).clip(-127, 127).astype(weights[key].dtype)
    write_npz_atomic(folder / weights_file.name, weights)
    return mlir, op.attributes["names"].data[0].data


def test_a_corrupted_weight_is_the_first_diverging_tensor(compiled, tmp_path, capsys):  # noqa: F811
    # The healthy module runs to the end without diverging.
    code, out, err = session(capsys, tmp_path, compiled, ("top", "tpu"), "break diverge\nrun\ndiff\n",
                             "--tolerance", LOOSE)
    assert code == 0, out + err
    assert "TPU INT8: finished" in out, out
    assert "below tolerance" not in out and "stopped:" not in out, out

    bad = tmp_path / "bad"
    bad.mkdir()
    mlir, victim = corrupt_weight(compiled.mlir, bad)
    script = tmp_path / "find.tdb"
    script.write_text("break diverge\nrun\nwhere\ndiff all\ncompare " + victim + "\n")
    code, out, err = run(capsys, "debug", compiled.folder / "m.mlir", mlir, "--input", compiled.x,
                         "--script", script, "--tolerance", LOOSE)
    assert code == 0, out + err
    assert f"stopped: '{victim}' diverges from TOP: cosine" in out, out
    assert f"first diverging tensor: {victim}, made by tpu.conv" in out, out
    # Stopped right after the conv: nothing after it ran.
    assert re.search(r"TPU INT8: before op #\d+ .*: tpu\.requant", out), out
    assert re.search(rf"{victim}\s.*FAIL", out)


def test_device_steps_instruction_by_instruction(compiled, tmp_path, capsys):  # noqa: F811
    from tpu_xdsl.device.model_file import load_model

    model = load_model(compiled.model)
    compute = next(i.id for i in model.instructions if i.engine == "compute")
    code, out, err = session(capsys, tmp_path, compiled, ("tpu", "device"), f"""
        break {compute}
        run
        step 2
        where
        info
        delete 1
        break DmaStore
        continue
        continue
        continue
        continue
        continue
        continue
        diff all
    """, "--tolerance", LOOSE)
    assert code == 0, out + err
    assert f"device bm1684x: before instruction #{compute} (step" in out
    steps = [int(m) for m in re.findall(r"\(step (\d+) of \d+\)", out)]
    assert steps[1] == steps[0] + 2, steps
    assert "chip bm1684x, mode INT8" in out and "memory map (DDR):" in out
    assert "stopped at breakpoint 1 (DmaStore)" in out
    assert "device bm1684x: finished" in out
    # The device against the TPU interpreter: every tensor in DDR equal.
    device = dump(capsys, tmp_path, compiled.model, compiled.x)
    assert f"all {len(device)} within tolerance" in out, out


def test_a_script_with_a_bad_command_exits_2(compiled, tmp_path, capsys):  # noqa: F811
    code, out, err = session(capsys, tmp_path, compiled, ("top", "tpu"), "print nosuch\nbreak relux\nfrobnicate\n")
    assert code == 2
    assert "error: no tensor 'nosuch' in TPU INT8" in out
    assert "error: break relux: no tensor, op type or index of TPU INT8 is 'relux'; did you mean 'relu'?" in out
    assert "error: unknown command 'frobnicate'" in out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tpu-xdsl: error: --script ") and "3 command(s) failed" in lines[0]


@pytest.mark.parametrize(
    "case", ["missing", "suffix", "two_tops", "onnx_only", "stage", "script", "input", "shape", "corrupt", "tolerance"]
)
def test_bad_input_is_one_line(compiled, tmp_path, capsys, case):  # noqa: F811
    top, tpu, onnx_file = stages(compiled, "top", "tpu", "onnx")
    odd = tmp_path / "model.txt"
    odd.write_text("hello")
    wrong_input = tmp_path / "wrong.npz"
    np.savez(wrong_input, a=np.zeros((1, 3, 8, 8), np.float32), b=np.zeros((1, 3, 8, 8), np.float32))
    small = tmp_path / "small.npz"
    np.savez(small, image=np.zeros((1, 3, 4, 4), np.float32))
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"PK\x03\x04 not really a zip file")
    cases = {
        "missing": ([tmp_path / "nope.mlir", "--input", compiled.x], ["nope.mlir: no such file"]),
        "suffix": ([odd, "--input", compiled.x], ["model.txt: unknown stage file"]),
        "two_tops": ([top, top, "--input", compiled.x], ["are both TOP stages"]),
        "onnx_only": ([onnx_file, "--input", compiled.x], ["debug steps a TOP or TPU .mlir or a .tpumodel"]),
        "stage": ([top, tpu, "--stage", "device", "--input", compiled.x], ["--stage device: no device stage"]),
        "script": ([top, "--input", compiled.x, "--script", tmp_path / "none.tdb"], ["--script", "no such file"]),
        "input": ([top, "--input", wrong_input], ["wrong.npz"]),
        "shape": ([onnx_file, top, "--input", small], ["small.npz: input 'image' has shape [1, 3, 4, 4]",
                                                     "expects [1, 3, 8, 8]"]),
        "corrupt": ([top, "--input", corrupt], ["corrupt.npz: cannot read inputs"]),
        "tolerance": ([top, "--input", compiled.x, "--tolerance", "2,1"], ["--tolerance '2,1'"]),
    }
    args, fragments = cases[case]
    assert_fails_cleanly(capsys, (tmp_path, compiled.folder), ["debug", *args], *fragments)


# --- a real terminal ---------------------------------------------------------------------------


def read_until(fd: int, pattern: bytes, seen: bytearray, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while pattern not in seen:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise AssertionError(f"no {pattern!r} from the debugger; it printed {bytes(seen[-3000:])!r}")
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            raise AssertionError(f"the debugger ended before {pattern!r}; it printed {bytes(seen[-3000:])!r}")
        seen += chunk


def test_a_terminal_session_with_completion_and_history(compiled, tmp_path):  # noqa: F811
    """The acceptance session typed at a terminal: Tab completes a tensor name, the
    breakpoint stops, print and compare show the tensor, and diff names the tensor of the
    deliberately corrupted filter as the first diverging one."""
    import pty

    bad = tmp_path / "bad"
    bad.mkdir()
    corrupted, victim = corrupt_weight(compiled.mlir, bad)
    history = tmp_path / "history"
    env = {**os.environ, "TPU_XDSL_HISTORY": str(history), "TERM": "dumb", "INPUTRC": os.devnull}
    argv = [sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", "debug", str(compiled.folder / "m.mlir"),
            str(corrupted), "--input", str(compiled.x), "--tolerance", LOOSE]
    pid, fd = pty.fork()
    if pid == 0:  # the child: the debugger on the pseudo-terminal
        os.execvpe(argv[0], argv, env)
    seen = bytearray()
    try:
        read_until(fd, b"(tdb) ", seen)
        os.write(fd, b"break relu_p\t")  # Tab completes the tensor name
        read_until(fd, b"relu_per_tensor", seen)
        os.write(fd, b"\n")
        read_until(fd, b"breakpoint 1: relu_per_tensor", seen)
        os.write(fd, b"run\n")
        read_until(fd, b"stopped at breakpoint 1 (relu_per_tensor)", seen)
        os.write(fd, f"print {victim}\n".encode())
        read_until(fd, f"{victim}: shape [1, 4, 8, 8]".encode(), seen)
        os.write(fd, f"compare {victim}\n".encode())
        read_until(fd, b"vs TOP: cosine", seen)
        os.write(fd, b"diff\n")
        read_until(fd, f"first diverging tensor: {victim}, made by tpu.conv".encode(), seen)
        os.write(fd, b"quit\n")
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, bytes(seen)
    assert re.search(r"vs TOP: cosine -?0\.\d+ .* FAIL", bytes(seen).decode()), bytes(seen)
    assert "break relu_per_tensor" in history.read_text().splitlines(), history.read_text()


def test_history_is_read_back(compiled, tmp_path):  # noqa: F811
    """Commands typed in one terminal session come back with Up in the next."""
    import pty

    history = tmp_path / "history"
    history.write_text("print relu\n")
    env = {**os.environ, "TPU_XDSL_HISTORY": str(history), "TERM": "dumb", "INPUTRC": os.devnull}
    argv = [sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", "debug", *stages(compiled, "tpu"),
            "--input", str(compiled.x)]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(argv[0], argv, env)
    seen = bytearray()
    try:
        read_until(fd, b"(tdb) ", seen)
        os.write(fd, b"\x1b[A\n")  # Up, Enter: the last command of the history file
        read_until(fd, b"not computed yet", seen)
        os.write(fd, b"quit\n")
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0


def test_piped_commands_work_without_a_terminal(compiled):  # noqa: F811
    result = subprocess.run(
        [sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", "debug", *stages(compiled, "tpu"), "--input",
         str(compiled.x)],
        input="help\nstep 3\nwhere\nwhre\n", capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "compare TENSOR" in result.stdout and "break [TENSOR | OP-TYPE | INDEX | diverge] (b)" in result.stdout
    assert "(step 4 of" in result.stdout
    assert "error: unknown command 'whre'; did you mean 'where'?" in result.stdout


def test_ctrl_c_stops_a_long_continue_and_the_session_goes_on(compiled, monkeypatch):  # noqa: F811
    """Ctrl-C while `continue` runs: 'interrupted', the cursor where the op that was running
    finished, and the next command works."""
    import io

    from tpu_xdsl.inspect import debug
    from tpu_xdsl.inspect.stages import load_stages, read_feeds

    stages_ = load_stages(stages(compiled, "tpu"))
    feeds = read_feeds(str(compiled.x), stages_)
    session_ = debug.Session(stages_, feeds, stages_[0])
    out = io.StringIO()
    debugger = debug.Debugger(session_, stdin=io.StringIO(), stdout=out)
    real_advance = debug.InterpreterCursor.advance
    calls = []

    def advance(self):
        calls.append(self.position)
        done = real_advance(self)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return done

    monkeypatch.setattr(debug.InterpreterCursor, "advance", advance)
    debugger.onecmd("continue")
    assert "interrupted" in out.getvalue()
    assert "(step 4 of" in out.getvalue()  # three ops ran
    debugger.onecmd("continue")
    assert "TPU INT8: finished" in out.getvalue()
    session_.close()


def test_next_runs_a_layer_group_and_step_goes_into_it(compiled, tmp_path, capsys):  # noqa: F811
    code, out, err = session(capsys, tmp_path, compiled, ("tpu",), "next\nnext\nbreak 0\nrun\nstep 2\n")
    assert code == 0, out + err
    wheres = re.findall(r"TPU INT8: before op #\d+ \(step \d+ of \d+\): (\S+)", out)
    # next: the input, then the whole group at once, to the reshape after it; from the start
    # again, step 2 goes into the group
    assert wheres == ["tpu.group", "tpu.reshape", "top.input", "tpu.load"], wheres


def test_completion_offers_each_name_once(compiled):  # noqa: F811
    import io

    from tpu_xdsl.inspect import debug
    from tpu_xdsl.inspect.stages import load_stages, read_feeds

    stages_ = load_stages(stages(compiled, "top", "tpu"))
    session_ = debug.Session(stages_, read_feeds(str(compiled.x), stages_), stages_[1])
    debugger = debug.Debugger(session_, stdin=io.StringIO(), stdout=io.StringIO())
    # 'relu' is a tensor of the TPU module; tensor names, op types and words each come once
    found = debugger.completedefault("re", "break re", 6, 8)
    assert "relu" in found and "relu_per_tensor" in found and "requant" in found
    assert len(found) == len(set(found))
    assert debugger.completenames("st") == ["step", "stage"]
    assert debugger.complete_info("m") == ["memory"]
    assert debugger.complete_stage("") == ["top", "tpu"]
    session_.close()
