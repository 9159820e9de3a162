"""ONNX's model conformance data: the 9 light models and the pytorch-converted,
pytorch-operator and simple cases shipped under onnx/backend/test/data."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import numpy_helper

from tests.conformance.expected_failures import reason_for
from tests.conformance.harness import run_case

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"

LIGHT_TOLERANCES = {"densenet121": 2e-3}


def _light_cases():
    for path in sorted((DATA / "light").glob("light_*.onnx")):
        name = path.stem.removeprefix("light_")
        yield pytest.param(name, path, id=f"test_{name}")


def _data_dir_cases(kind: str):
    for case_dir in sorted((DATA / kind).iterdir()):
        if not (case_dir / "model.onnx").is_file():
            continue
        name = case_dir.name
        reason = reason_for(name)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        yield pytest.param(case_dir, id=name, marks=marks)


def _load_data_set(folder: Path) -> tuple[list, list]:
    def load(prefix: str) -> list:
        files = sorted(folder.glob(f"{prefix}_*.pb"), key=lambda p: int(p.stem.split("_")[-1]))
        tensors = []
        for f in files:
            t = onnx.TensorProto()
            t.ParseFromString(f.read_bytes())
            tensors.append(numpy_helper.to_array(t))
        return tensors

    return load("input"), load("output")


@pytest.mark.conformance
@pytest.mark.parametrize(("name", "path"), list(_light_cases()))
def test_light_model(name, path):
    """Inputs as ONNX's runner makes them (dummy data, seed 0); outputs shipped beside the model."""
    from onnx.backend.test.runner import Runner

    model = onnx.load(str(path))
    initializers = {i.name for i in model.graph.initializer}
    inputs = [
        Runner.generate_dummy_data(x, seed=0, name=name, random=False)
        for x in model.graph.input
        if x.name not in initializers
    ]
    expected = []
    for i in range(len(model.graph.output)):
        t = onnx.TensorProto()
        t.ParseFromString((path.parent / f"{path.stem}_output_{i}.pb").read_bytes())
        expected.append(numpy_helper.to_array(t))
    run_case(model, [(inputs, expected)], LIGHT_TOLERANCES.get(name, 1e-3), 1e-7)


@pytest.mark.conformance
@pytest.mark.parametrize(
    "case_dir",
    [*_data_dir_cases("pytorch-converted"), *_data_dir_cases("pytorch-operator"), *_data_dir_cases("simple")],
)
def test_data_case(case_dir):
    model = onnx.load(str(case_dir / "model.onnx"))
    data_sets = [_load_data_set(d) for d in sorted(case_dir.glob("test_data_set_*"))]
    run_case(model, data_sets, 1e-3, 1e-7)


def test_all_nine_light_models_are_collected():
    names = sorted(p.values[0] for p in _light_cases())
    assert names == [
        "bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
        "shufflenet", "squeezenet", "vgg19", "zfnet512",
    ]
