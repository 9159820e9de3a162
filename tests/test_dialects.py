"""TOP and TPU as a user imports them: built from IRDL, complete, typed, printable."""

import subprocess
import sys

from xdsl.irdl import IRDLOperation

from tpu_xdsl.dialects import Top, Tpu
from tpu_xdsl.dialects.stubs import stub_paths, stub_text


def test_dialects_are_built_from_irdl():
    assert Top.name == "top" and Tpu.name == "tpu"
    assert len(Top.operations) >= 60
    assert all(issubclass(op, IRDLOperation) for op in (*Top.operations, *Tpu.operations))
    names = {op.name for op in Top.operations}
    for required in ("top.input", "top.weight", "top.none", "top.conv", "top.matmul"):
        assert required in names


def test_tpu_has_a_counterpart_for_every_computing_top_op():
    top = {op.name.split(".", 1)[1] for op in Top.operations}
    tpu = {op.name.split(".", 1)[1] for op in Tpu.operations}
    missing = top - tpu - {"input", "weight", "none"}
    assert not missing, f"TOP ops without a TPU counterpart: {sorted(missing)}"
    for extra in ("cast", "requant", "lut", "group", "yield", "load", "store"):
        assert extra in tpu


def test_irdl_files_verify():
    from tpu_xdsl.dialects import irdl_dir
    from tpu_xdsl.dialects.irdl_loader import parse_irdl

    for name in ("top.irdl", "tpu.irdl", "tosa.irdl"):
        parse_irdl((irdl_dir() / name).read_text(), name, verify=True)


def test_stubs_are_current():
    for dialect in (Top, Tpu):
        path = stub_paths()[dialect.name]
        assert path.read_text() == stub_text(dialect), (
            f"{path.name} is stale: run `python -m tpu_xdsl.dialects.stubs`"
        )


def test_typed_modules_export_the_classes():
    from tpu_xdsl.dialects import top, tpu

    assert top.ConvOp.name == "top.conv"
    assert tpu.CastOp.name == "tpu.cast"


def test_every_op_has_a_round_trip_filecheck_test():
    from pathlib import Path

    root = Path(__file__).parent / "filecheck" / "dialects"
    for dialect in (Top, Tpu):
        tested = {p.stem for p in (root / dialect.name).glob("*.mlir")}
        untested = {
            op.name.split(".", 1)[1] for op in dialect.operations
        } - tested
        assert not untested, f"{dialect.name} ops without a test file: {sorted(untested)}"


def test_tpu_xdsl_check_prints_and_rejects(tmp_path):
    good = subprocess.run(
        [sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", "check", "examples/resnet_block.top.mlir"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert good.returncode == 0, good.stderr
    assert '"top.softmax"' in good.stdout
    bad = tmp_path / "bad.mlir"
    bad.write_text('%0 = "top.not_an_op"() : () -> tensor<1xf32>\n')
    result = subprocess.run(
        [sys.executable, "-m", "tpu_xdsl.tools.tpu_xdsl", "check", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1
    assert "top.not_an_op" in result.stderr
