"""Exit codes of the commands: 2 for bad input, 3 (not Python's 1) for a fault of tpu-xdsl."""

from __future__ import annotations

from tpu_xdsl.errors import EXIT_INTERNAL
from tpu_xdsl.tools import tpu_opt, tpu_xdsl


def _crash(_args):
    raise ValueError("Expected 2 operand, but got 1")


def test_internal_error_is_one_line_and_exit_3(monkeypatch, capsys):
    monkeypatch.setattr(tpu_xdsl, "_list_ops", _crash)  # the parser binds it when built
    assert tpu_xdsl.main(["list-ops"]) == EXIT_INTERNAL == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "tpu-xdsl list-ops: internal error: ValueError: Expected 2 operand" in err
    assert "Traceback" not in err


def test_internal_error_with_debug_shows_the_traceback_and_keeps_exit_3(monkeypatch, capsys):
    """--debug adds the traceback; the exit code stays 3, not the 1 of an uncaught exception,
    which means a comparison below tolerance."""
    monkeypatch.setattr(tpu_xdsl, "_list_ops", _crash)  # the parser binds it when built
    assert tpu_xdsl.main(["--debug", "list-ops"]) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "in _crash" in err
    assert err.rstrip().splitlines()[-1].startswith("tpu-xdsl list-ops: internal error: ValueError: Expected 2")


def test_user_error_with_debug_keeps_exit_2(tmp_path, capsys):
    assert tpu_xdsl.main(["--debug", "deploy", str(tmp_path / "missing.mlir"), "--quantize", "F32",
                          "-o", str(tmp_path / "out.mlir")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().splitlines()[-1].startswith("tpu-xdsl: error: ")


def test_tpu_opt_internal_error_exit_3(monkeypatch, capsys, tmp_path):
    def crash(self):
        raise RuntimeError("pass blew up")

    monkeypatch.setattr(tpu_opt.TpuOptMain, "run", crash)
    source = tmp_path / "m.mlir"
    source.write_text("builtin.module {}\n")
    assert tpu_opt.main([str(source)]) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.startswith("tpu-opt: internal error: RuntimeError: pass blew up")
    assert err.count("\n") == 1
