"""A model's stages, loaded from their files, run on one input, compared by tensor name.

The four stages of the flow and the TOSA export, each run by its own engine:

- ONNX (`.onnx`): onnxruntime, every intermediate tensor kept;
- TOP (`.mlir`, module.state TOP...): the xDSL interpreter;
- TPU (`.mlir`, module.state TPU...): the xDSL interpreter, INT8 codes dequantized;
- device (`.tpumodel`): the device model, every named tensor copied out when it is complete;
- TOSA (`.tosa.mlir`, module.state TOSA...): compiled and run by IREE (the `tosa` extra),
  final outputs only. It branches off the flow: it is checked against the stage it was
  exported from (the TPU module when it records a module.mode, else TOP, else ONNX) and is
  never the reference of another stage.

Every stage names its tensors by the ONNX tensor names, so tensors of two stages pair up by
name. `debug`, `report` and `compare` are built on this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from tpu_xdsl.device.model_file import load_model
from tpu_xdsl.device.runtime import LoadedModel, real_value
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.feeds import read_input_file
from tpu_xdsl.interp.compare import DEFAULT_TOLERANCE, DEVICE_FLOAT_COSINE, TOSA_TOLERANCE, Tolerance

# Stages in the order of the flow: a stage's reference is the nearest loaded one before it.
# TOSA comes last: an export out of the flow, checked against its source (`reference_of`).
KINDS = ("onnx", "top", "tpu", "device", "tosa")
# Stages that run whole, final outputs only or not op by op: never stepped by `debug`.
WHOLE_RUN_KINDS = ("onnx", "tosa")


class StageError(TpuXdslError):
    """A stage file that cannot be loaded, or stages that do not belong together."""


@dataclass
class Stage:
    """One loaded stage. `label` names it to the user ("ONNX", "TOP", "TPU INT8",
    "device bm1684x"); `handle` is the ONNX ModelProto, the xDSL module or the TpuModel."""

    kind: str
    label: str
    path: Path
    handle: Any
    weights: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def mode(self) -> str | None:
        """The quantization mode (INT8, F16, ...) of a TPU, device or TOSA stage; None before."""
        if self.kind == "device":
            return self.handle.mode
        if self.kind == "tosa":
            state = _string_attribute(self.handle, "module.state") or ""
            return state.removeprefix("TOSA").lstrip("_") or "F32"
        if self.kind == "tpu":
            from xdsl.dialects.builtin import StringAttr

            mode = self.handle.attributes.get("module.mode")
            return mode.data if isinstance(mode, StringAttr) else None
        return None

    @property
    def from_tpu(self) -> bool:
        """Whether a TOSA stage was exported from a TPU module (it keeps its module.mode)."""
        return self.kind == "tosa" and _string_attribute(self.handle, "module.mode") is not None

    @cached_property
    def compiled(self):
        """A TOSA stage compiled by IREE (cached on disk by content) and loaded, once."""
        from tpu_xdsl.export.iree import compile_tosa_file, load_vmfb

        return load_vmfb(compile_tosa_file(self.path), source=str(self.path))

    @cached_property
    def loaded(self):
        """A device stage's model loaded on the device model (checked, scheduled, bound),
        once: whole runs, the debugger's steps and the report's profile share it."""
        return LoadedModel(self.handle)

    def input_names(self) -> list[str]:
        if self.kind == "onnx":
            # delays onnx: only ONNX stages need it
            from tpu_xdsl.frontend.onnx_model import model_inputs

            return [i.name for i in model_inputs(self.handle)]
        if self.kind == "device":
            return [d.name for d in self.handle.inputs]
        if self.kind == "tosa":
            return tosa_input_names(self.handle)
        # delays xDSL and the dialects: device sessions read no IR
        from tpu_xdsl.dialects.module import input_names

        return input_names(self.handle)

    def input_shapes(self) -> dict[str, tuple[int | None, ...]]:
        """The shape the stage declares for each input, None for a dynamic dimension."""
        if self.kind == "onnx":
            # delays onnx: only ONNX stages need it
            from tpu_xdsl.frontend.onnx_model import model_inputs

            return {
                i.name: tuple(d.dim_value if d.HasField("dim_value") else None for d in i.type.tensor_type.shape.dim)
                for i in model_inputs(self.handle)
            }
        if self.kind == "device":
            return {d.name: tuple(d.shape) for d in self.handle.inputs}
        # delays xDSL and the dialects: device sessions read no IR
        from tpu_xdsl.dialects.module import main_func

        types = main_func(self.handle).function_type.inputs.data
        return {
            name: tuple(d if d >= 0 else None for d in t.get_shape())  # type: ignore[attr-defined]
            for name, t in zip(self.input_names(), types, strict=True)
        }

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every named tensor of one run, as real values (INT8 dequantized)."""
        if self.kind == "onnx":
            # delays onnx: only ONNX stages need it
            from tpu_xdsl.frontend.reference import run_reference

            wanted = {name: np.asarray(feeds[name], dtype=np.float32) for name in self.input_names()}
            return run_reference(self.handle, wanted)[0]
        if self.kind == "device":
            result = self.loaded.run(feeds, dump_all=True)
            return self.real_values({**result.tensors, **result.outputs})
        if self.kind == "tosa":
            return self.compiled.run(feeds)
        # delays the xDSL interpreter: device sessions run no IR
        from tpu_xdsl.interp.runner import TensorCapture, run_module

        capture = TensorCapture()
        outputs = run_module(self.handle, feeds, self.weights, [capture])
        return self.real_values({**capture.tensors, **outputs})

    def real_values(self, tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Raw tensors of this stage (INT8 codes) as the real values they stand for."""
        if self.kind == "device":
            descs = {d.name: d for d in (*self.handle.tensors, *self.handle.inputs, *self.handle.outputs)}
            return {
                name: real_value(descs[name], value) if name in descs and value.dtype.kind in "iu" else value
                for name, value in tensors.items()
            }
        if self.kind == "tpu":
            # delays the xDSL interpreter: device sessions run no IR
            from tpu_xdsl.interp.runner import real_values

            return real_values(self.handle, tensors)
        return dict(tensors)

    def describe(self) -> str:
        """One line: what the stage is and where it came from."""
        if self.kind == "device":
            model = self.handle
            return (f"{self.label}: {self.path.name} ({model.mode}, {len(model.instructions)} instructions, "
                    f"{len(model.groups)} layer groups)")
        if self.kind == "onnx":
            return f"{self.label}: {self.path.name} ({len(self.handle.graph.node)} nodes, run by onnxruntime)"
        # delays xDSL and the dialects: device sessions read no IR
        from tpu_xdsl.dialects.module import main_func

        ops = sum(1 for op in main_func(self.handle).walk() if op.name not in SILENT_OPS)
        if self.kind == "tosa":
            return f"{self.label}: {self.path.name} ({ops} ops, run by IREE, final outputs only)"
        return f"{self.label}: {self.path.name} ({ops} ops, run by the xDSL interpreter)"


# Ops that hold data or end a block: nothing to step through or compare.
SILENT_OPS = frozenset({"func.func", "func.return", "top.weight", "top.none", "tosa.const", "tosa.const_shape"})


def _string_attribute(module, name: str) -> str | None:
    from xdsl.dialects.builtin import StringAttr

    attr = module.attributes.get(name)
    return attr.data if isinstance(attr, StringAttr) else None


def _module_kind(module, path: Path) -> str:
    text = _string_attribute(module, "module.state") or ""
    if text.startswith(("TOP", "TPU")):
        return text[:3].lower()
    if text.startswith("TOSA") or (not text and path.name.endswith(".tosa.mlir")):
        return "tosa"
    raise StageError(
        f"{path}: module.state is {text or 'missing'}; give a TOP .mlir from transform, a TPU .mlir from deploy "
        "or a .tosa.mlir from export"
    )


def tosa_input_names(module) -> list[str]:
    """A TOSA module's inputs by name: the `tpu.name` of @main's arguments (`inputN` for one
    without), the names IREE's reflection reports too."""
    from xdsl.dialects.builtin import StringAttr

    from tpu_xdsl.dialects.module import main_func

    main = main_func(module)
    attrs = main.arg_attrs.data if main.arg_attrs is not None else ()
    names = [f"input{i}" for i in range(len(main.body.block.args))]
    for index, entry in enumerate(attrs):
        name = entry.data.get("tpu.name")
        if isinstance(name, StringAttr):
            names[index] = name.data
    return names


def load_tosa_inputs(path: str, module) -> dict[str, np.ndarray]:
    """A TOSA module's inputs from an .npz, an .npy or an image (through the preprocessing the
    module keeps from the module it was exported from)."""
    from tpu_xdsl.dialects.module import main_func
    from tpu_xdsl.frontend.preprocess import Preprocess

    def image(file: Path):
        shape = main_func(module).function_type.inputs.data[0].get_shape()  # type: ignore[attr-defined]
        return (Preprocess.from_module(module) or Preprocess()).load_image(file, shape)

    return read_input_file(path, tosa_input_names(module), image)


def load_stage(path: str | Path) -> Stage:
    """A stage from its file, by suffix: .onnx, .mlir (TOP or TPU by module.state), .tpumodel."""
    file = Path(path)
    if not file.is_file():
        raise StageError(f"{path}: no such file; give the model's .onnx, TOP or TPU .mlir, or .tpumodel")
    if file.suffix == ".onnx":
        import onnx

        try:
            model = onnx.load(str(file))
        except Exception as e:  # onnx raises DecodeError and friends
            raise StageError(f"{path}: cannot read as ONNX ({type(e).__name__}); is it an .onnx model file?") from e
        return Stage("onnx", "ONNX", file, model)
    if file.suffix == ".tpumodel":
        model = load_model(file)
        return Stage("device", f"device {model.chip}", file, model)
    if file.suffix == ".mlir":
        # delays xDSL and the dialects: device sessions read no IR
        from tpu_xdsl.ir_io import read_module
        from tpu_xdsl.weights import attach_weights

        module = read_module(file)
        kind = _module_kind(module, file)
        if kind == "tosa":
            # IREE runs it: without the extra, one line saying how to install, before any run
            from tpu_xdsl.export.iree import require

            require()
            stage = Stage(kind, "TOSA", file, module)
            stage.label = f"TOSA {stage.mode}"
            return stage
        stage = Stage(kind, kind.upper(), file, module, attach_weights(module, base_dir=file.parent))
        if stage.mode is not None:
            stage.label = f"TPU {stage.mode}"
        return stage
    raise StageError(f"{path}: unknown stage file; give an .onnx, a TOP or TPU .mlir, a .tosa.mlir or a .tpumodel")


def load_stages(paths: Sequence[str | Path]) -> list[Stage]:
    """Stages in flow order; at most one of each kind."""
    if not paths:
        raise StageError("give at least one stage file (.onnx, TOP or TPU .mlir, .tpumodel)")
    stages: dict[str, Stage] = {}
    for path in paths:
        stage = load_stage(path)
        if stage.kind in stages:
            raise StageError(
                f"{path} and {stages[stage.kind].path} are both {stage.label} stages; give one file per stage"
            )
        stages[stage.kind] = stage
    return [stages[kind] for kind in KINDS if kind in stages]


def reference_of(stages: Sequence[Stage], stage: Stage) -> Stage | None:
    """The stage `stage` is checked against: the nearest loaded one before it in the flow; for
    a TOSA export, the stage it was exported from (a TPU module, else the device model of
    one, else TOP, else ONNX for one from a TPU module; TOP, else ONNX for one from TOP)."""
    by_kind = {s.kind: s for s in stages}
    if stage.kind == "tosa":
        order = ("tpu", "device", "top", "onnx") if stage.from_tpu else ("top", "onnx")
        return next((by_kind[kind] for kind in order if kind in by_kind), None)
    before = [s for s in stages if KINDS.index(s.kind) < KINDS.index(stage.kind)]
    return before[-1] if before else None


def read_feeds(path: str, stages: Sequence[Stage]) -> dict[str, np.ndarray]:
    """The input of a session from an .npz, .npy or image, read through the first stage
    that knows the model's preprocessing (a .mlir or .tpumodel), else by ONNX input name."""
    # delays xDSL and the dialects (preprocess reads them): device feeds need neither
    from tpu_xdsl.frontend.preprocess import load_device_inputs, load_inputs

    for stage in stages:
        if stage.kind in ("top", "tpu"):
            return load_inputs(path, stage.handle)
    for stage in stages:
        if stage.kind == "device":
            return load_device_inputs(path, stage.handle)
    for stage in stages:
        if stage.kind == "tosa":
            return load_tosa_inputs(path, stage.handle)

    def no_image(file: Path):
        raise StageError(f"{file}: an image needs the preprocessing a .mlir or .tpumodel records; give an .npz")

    return read_input_file(path, stages[0].input_names(), no_image)


def check_feeds(feeds: Mapping[str, np.ndarray], stages: Sequence[Stage], path: str) -> None:
    """Every stage finds its inputs among the feeds (names match across stages) in the shape
    it declares, before any stage runs (an engine such as onnxruntime would fail with a page
    of text)."""
    for stage in stages:
        names = stage.input_names()
        if not (len(names) == 1 and len(feeds) == 1):
            missing = [n for n in names if n not in feeds]
            if missing:
                raise StageError(
                    f"{path}: has no input '{missing[0]}' of the "
                    f"{stage.label} stage (it has {', '.join(sorted(feeds))})"
                )
        aligned = align_feeds(feeds, stage)
        for name, wanted in stage.input_shapes().items():
            got = tuple(np.shape(aligned[name]))
            if len(got) != len(wanted) or any(w is not None and w != g for w, g in zip(wanted, got)):
                expected = ", ".join("?" if w is None else str(w) for w in wanted)
                raise StageError(
                    f"{path}: input '{name}' has shape {list(got)}; the {stage.label} stage ({stage.path.name}) "
                    f"expects [{expected}]"
                )


def align_feeds(feeds: Mapping[str, np.ndarray], stage: Stage) -> dict[str, np.ndarray]:
    """The feeds under the stage's own input names (a single input matches whatever its key)."""
    names = stage.input_names()
    if len(names) == 1 and len(feeds) == 1:
        return {names[0]: next(iter(feeds.values()))}
    return {n: feeds[n] for n in names}


def default_tolerance(reference: Stage, stage: Stage) -> Tolerance:
    """What `stage` must reach against `reference`: TOP against ONNX and the TPU interpreter
    against TOP as transform and deploy check them; the device against the TPU interpreter
    as deploy checks it (integer tensors equal, floats to 0.99999); the device against a
    float stage (no TPU stage loaded) as the TPU interpreter would be, by its mode. A TOSA
    export against the stage it came from (`TOSA_TOLERANCE`, by its mode); one from a TPU
    module against a float stage as the TPU module would be."""
    if stage.kind == "device" and reference.kind == "tpu":
        return Tolerance(DEVICE_FLOAT_COSINE, -1.0)
    if stage.kind == "tosa" and (reference.kind in ("tpu", "device") or not stage.from_tpu):
        mode = stage.mode or "F32"
        return Tolerance.parse(TOSA_TOLERANCE.get(mode, TOSA_TOLERANCE["F32"]))
    return Tolerance.parse(DEFAULT_TOLERANCE.get(stage.mode or "F32", DEFAULT_TOLERANCE["F32"]))
