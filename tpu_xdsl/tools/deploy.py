"""`tpu-xdsl deploy`: lower a TOP module to the TPU dialect and check it against TOP results
(TPU-MLIR's model_deploy).

    tpu-xdsl deploy N.mlir --quantize F32|F16|BF16|INT8 [--asymmetric] --chip bm1684x \\
        [--calibration-table N_cali_table] [--quantize-table Q] [--quant-input] [--quant-output] \\
        [--per-tensor-activations] [--round-mode half_up] \\
        --test-input x.npz --test-reference N_top_outputs.npz [--tolerance C,E] -o N_int8.mlir

It attaches the calibration table (`import-calibration`), lowers
(`lower-top-to-tpu`), writes the TPU `.mlir` and its weights, runs the TPU
interpreter on the test input, compares every tensor name present in both
stages (INT8 tensors by the real values they stand for), prints the table,
names the first tensor below tolerance and exits with code 1 then, with the
`search-qtable` command (on the user's own files) that finds the ops to keep in a
more precise mode. Every input is checked before anything is written.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.interp.compare import DEFAULT_TOLERANCE, DEVICE_FLOAT_COSINE
from tpu_xdsl.outputs import (
    Role,
    check_output_path,
    check_paths,
    module_inputs,
    module_outputs,
    named,
    writes_outputs,
)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("deploy", help="TOP .mlir -> TPU .mlir in a mode, checked against TOP results")
    p.add_argument("model", help="the TOP .mlir (from transform)")
    p.add_argument("--quantize", required=True, help="F32, F16, BF16 or INT8")
    p.add_argument("--chip", default="bm1684x", help="bm1684x (default) or cv183x")
    p.add_argument("--asymmetric", action="store_true", help="INT8 activations as uint8 with zero points")
    p.add_argument(
        "--per-tensor-activations", action="store_true",
        help="INT8 activations with one scale per tensor, as TPU-MLIR (default: per channel where it helps)",
    )
    p.add_argument(
        "--round-mode", default="",
        help="how INT8 rounds: half_away_from_zero (default) or half_up (TOSA's rescale: an export to TOSA "
             "computes the same codes)",
    )
    p.add_argument("--calibration-table", help="the calibration table (from tpu-xdsl calibrate); INT8 needs it")
    p.add_argument("--quantize-table", help="per-op modes for mixed precision: lines 'op_name MODE'")
    p.add_argument("--quant-input", action="store_true", help="INT8 model inputs (no float cast at the inputs)")
    p.add_argument("--quant-output", action="store_true", help="INT8 model outputs (no float cast at the outputs)")
    p.add_argument("--test-input", help=".npz/.npy input or image to compare on")
    p.add_argument("--test-reference", help="TOP tensors (.npz written by transform --test-result)")
    p.add_argument(
        "--disable-layer-group", action="store_true",
        help="run every op alone out of DDR (default: tpu-layer-group keeps runs of ops in local memory)",
    )
    p.add_argument(
        "--opt", default="2",
        help="how tpu-layer-group chooses groups: 1 greedy, 2 dynamic programming over a cycle cost model (default)",
    )
    p.add_argument(
        "--export-tosa", action="store_true",
        help="also write the TPU module as TOSA (N.tosa.mlir beside the output) and, with --test-input, run it "
             "in IREE against the TPU interpreter (needs pip install -e '.[tosa]')",
    )
    p.add_argument("--tolerance", help="min cosine,euclidean (default by mode: F32 "
                                       "0.99,0.99; F16/BF16 0.99,0.95; INT8 0.95,0.85)")
    p.add_argument(
        "-o", "--output", required=True,
        help="the TPU .mlir to write, or a .tpumodel (compiled for "
             "the device model; its TPU .mlir is written beside it)",
    )
    p.set_defaults(func=deploy)


def _check_round_mode(round_mode: str, int8: bool, mode: str) -> None:
    from tpu_xdsl.errors import UsageError
    from tpu_xdsl.transforms.lower_top_to_tpu import LOWERING_ROUND_MODES

    if round_mode and round_mode not in LOWERING_ROUND_MODES:
        raise UsageError(
            f"--round-mode {round_mode}: use {' or '.join(LOWERING_ROUND_MODES)} "
            "(half_up rounds as TOSA's rescale does)"
        )
    if round_mode and not int8:
        raise UsageError(f"--round-mode sets how INT8 rounds and --quantize {mode} has no INT8; drop it")


def _needs_int8(mode: str, qtable: str | None) -> bool:
    """INT8 in the module's mode or in a line of the quantize table (read leniently here;
    lowering checks the table)."""
    if mode == "INT8":
        return True
    if not qtable:
        return False
    try:
        lines = Path(qtable).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    return any(line.split("#", 1)[0].split()[1:2] == ["INT8"] for line in lines if line.split("#", 1)[0].split())


def _read_top_module(path: str):
    """The TOP module at `path`; a missing file is a one-line error (read_module reports the rest)."""
    from tpu_xdsl.errors import UsageError
    from tpu_xdsl.ir_io import check_inputs, read_module

    if not Path(path).is_file():
        raise UsageError(f"{path}: no such file; give the TOP .mlir that tpu-xdsl transform wrote")
    module = read_module(path)
    check_inputs(module, path, direct_reads=True)  # lowering binds model inputs through top.input
    return module


def _as_the_model_holds(module, reference: dict, asymmetric: bool, quant_input: bool) -> dict:
    """TOP's tensors of a pre-quantized model rounded to the model's own scales where it
    quantizes them, the reference its INT8 stage is compared with. Inputs stay float on
    the TPU (and so in the reference) unless --quant-input makes them INT8."""
    from tpu_xdsl.dialects.module import main_func, tensor_names
    from tpu_xdsl.interp.top_interpreter import ModelRounding

    rounding = ModelRounding(asymmetric)
    held = dict(reference)
    for op in main_func(module).body.block.ops:
        if op.name == "top.input" and not quant_input:
            continue
        for name, result in zip(tensor_names(op), op.results):
            if name in held:
                held[name] = rounding.held(result, held[name])
    return held


def _read_reference(path: str, tensor_names: set[str]) -> dict:
    """The TOP tensors of `transform --test-result`; they must name tensors of this module."""
    from tpu_xdsl.errors import UsageError
    from tpu_xdsl.npz import read_npz

    what = "give the .npz that 'tpu-xdsl transform --test-result' wrote for this model"
    reference = read_npz(path, what, where=f"--test-reference {path}")
    if not set(reference) & tensor_names:
        shown = ", ".join(sorted(reference)[:3]) or "none"
        raise UsageError(
            f"--test-reference {path}: none of its {len(reference)} "
            f"tensor(s) ({shown}) is a tensor of the module; {what}"
        )
    return reference


@writes_outputs
def deploy(args: argparse.Namespace) -> int:
    from tpu_xdsl.calibration.model_scales import is_model_calibrated
    from tpu_xdsl.calibration.table import read_table
    from tpu_xdsl.device.chip import check_mode, chip_config
    from tpu_xdsl.dialects.module import input_names, main_func, tensor_names
    from tpu_xdsl.errors import UsageError
    from tpu_xdsl.frontend.preprocess import load_inputs
    from tpu_xdsl.interp.compare import Tolerance, compare_all, format_table, summarize
    from tpu_xdsl.interp.runner import (
        InputMismatchError,
        ModuleRunner,
        TensorCapture,
        arrange_inputs,
        real_values,
    )
    from tpu_xdsl.ir_io import save_module
    from tpu_xdsl.transforms.import_calibration import (
        CALIBRATED_STATE,
        import_calibration,
    )
    from tpu_xdsl.transforms.lower_top_to_tpu import (
        LoweringError,
        lower_top_to_tpu,
    )
    from tpu_xdsl.weights import attach_weights, weights_of

    chip = chip_config(args.chip)
    mode = check_mode(chip, args.quantize)
    tolerance = Tolerance.parse(args.tolerance or DEFAULT_TOLERANCE[mode])
    output = Path(args.output)
    check_output_path("-o", args.output)
    if output.suffix not in (".mlir", ".tpumodel"):
        raise UsageError(
            f"-o {args.output}: write the TPU module as {output.stem}.mlir, or compile it to {output.stem}.tpumodel"
        )
    compiled = output.suffix == ".tpumodel"
    if args.opt not in ("1", "2"):
        raise UsageError(f"--opt {args.opt}: use 1 (greedy) or 2 (dynamic programming over the cycle cost model)")
    if args.disable_layer_group and args.opt != "2":
        raise UsageError(f"--opt {args.opt} chooses layer groups and --disable-layer-group turns them off: give one")
    mlir_output = output.with_suffix(".mlir")
    if mlir_output.resolve() == Path(args.model).resolve():
        raise UsageError(f"-o {args.output}: would overwrite the TOP module "
                         f"deploy reads; name it {output.stem}_{mode.lower()}.mlir")
    if bool(args.test_input) != bool(args.test_reference):
        raise UsageError("--test-input and --test-reference go together: give both or neither")
    int8 = _needs_int8(mode, args.quantize_table)
    _check_round_mode(args.round_mode, int8, mode)
    for flag, given in (("--quant-input", args.quant_input), ("--quant-output", args.quant_output)):
        if given and not int8:
            raise UsageError(
                f"{flag} keeps INT8 tensors at the model's boundary and --quantize {mode} has none; "
                f"drop {flag} or deploy with --quantize INT8"
            )
    tosa_output = output.with_name(f"{output.stem}.tosa.mlir") if args.export_tosa else None
    if tosa_output is not None and args.test_input:
        from tpu_xdsl.export.iree import require

        require()
    module = _read_top_module(args.model)
    written = ([*named("-o", args.output), *module_outputs("-o", mlir_output, args.output)] if compiled
               else module_outputs("-o", args.output))
    if tosa_output is not None:
        written.append(Role("-o", tosa_output, args.output, "the TOSA export"))
    check_paths(
        [*module_inputs("the model", args.model, module), *named("--calibration-table", args.calibration_table),
         *named("--quantize-table", args.quantize_table), *named("--test-input", args.test_input),
         *named("--test-reference", args.test_reference)],
        written,
    )
    state = module.attributes.get("module.state")
    if state is None or not str(state).strip('"').startswith("TOP"):
        raise TpuXdslError(f"{args.model}: module.state is {state}; deploy takes a TOP module from transform")
    calibrated = str(state).strip('"') == CALIBRATED_STATE
    table = read_table(args.calibration_table) if args.calibration_table else None
    if args.quantize_table:  # a line it cannot use is said before what INT8 needs
        from tpu_xdsl.transforms.lower_top_to_tpu import check_quantize_table

        check_quantize_table(module, args.quantize_table, chip.name)
    if table is None and not calibrated and int8:
        stem = Path(args.model).stem
        raise UsageError(
            f"INT8 needs a calibration table: give --calibration-table {stem}_cali_table, made by "
            f"'tpu-xdsl calibrate {args.model} --dataset DIR -o {stem}_cali_table' "
            "(there is no silent max-abs fallback)"
        )
    attach_weights(module, base_dir=Path(args.model).parent)
    reference = None
    feeds = None
    if args.test_input:
        try:
            feeds = dict(zip(input_names(module), arrange_inputs(module, load_inputs(args.test_input, module))))
        except InputMismatchError as e:
            raise UsageError(f"--test-input {args.test_input}: {e}; give "
                             "the input the TOP module was checked on") from e
        names = {n for op in main_func(module).body.block.ops for n in tensor_names(op)}
        reference = _read_reference(args.test_reference, names)
    asymmetric = args.asymmetric
    if int8 and is_model_calibrated(module):
        asymmetric = _model_scales_notes(module, args.calibration_table, asymmetric)
    if int8 and reference is not None and is_model_calibrated(module):
        # INT8 stores a pre-quantized model's tensors as the model does (rounded to its
        # scales); TOP keeps the float value each has before its QuantizeLinear.
        reference = _as_the_model_holds(module, reference, asymmetric, args.quant_input)
    imported = None
    if table is not None:
        imported = import_calibration(module, table, args.calibration_table)
        missing_inputs = [n for n in input_names(module) if n in imported.missing]
        if args.quant_input and missing_inputs:
            raise UsageError(
                f"--quant-input: calibration table {args.calibration_table} has no row for input "
                f"'{missing_inputs[0]}'; use the table tpu-xdsl calibrate made for this model"
            )
    try:
        report = lower_top_to_tpu(
            module, mode, chip.name, asymmetric, args.quantize_table, args.quant_input, args.quant_output,
            args.per_tensor_activations, args.round_mode,
        )
    except LoweringError as e:
        if imported is None or not (imported.missing and imported.unused):
            raise
        # Tensors without a row and rows naming no tensor: most likely another model's table.
        raise LoweringError(
            f"{e} (calibration table {args.calibration_table} also has {len(imported.unused)} row(s) naming "
            f"no tensor of this module, e.g. '{imported.unused[0]}': was it made for another model?)"
        ) from e
    # Warnings only once lowering succeeded: on an error the user sees one line that says it all.
    for line in imported.warnings(args.calibration_table) if imported else []:
        print(f"tpu-xdsl: warning: {line}", file=sys.stderr)
    for line in report.lines():
        print(f"note: {line}")
    tosa_text = _export_tosa(module, tosa_output) if tosa_output is not None else None
    model = _compile(module, not args.disable_layer_group, int(args.opt)) if compiled else None
    save_module(module, mlir_output, dict(weights_of(module)))
    from xdsl.dialects.builtin import StringAttr

    scheme = module.attributes.get("module.quantization")
    asym = f" {scheme.data}" if isinstance(scheme, StringAttr) else ""
    print(f"wrote {mlir_output} and {mlir_output.stem}_weights.npz ({mode}{asym}, {chip.name})")
    if model is not None:
        from tpu_xdsl.device.model_file import save_model

        save_model(model, output)
        print(f"wrote {output} ({len(model.instructions)} instructions, {model.ddr_bytes} bytes of DDR)")
    if feeds is None or reference is None:
        return 0
    capture = TensorCapture()
    outputs = ModuleRunner(module, weights_of(module)).run(feeds, [capture])
    tpu_tensors = {**capture.tensors, **outputs}
    rows = compare_all(reference, real_values(module, tpu_tensors))
    print(format_table(rows, tolerance, f"TOP (reference) vs TPU interpreter {mode}{asym}, by tensor name"))
    ok, summary = summarize(rows, tolerance)
    print(summary)
    if not ok and mode != "F32":
        print(_search_hint(args, mode, chip.name, tolerance.cosine))
    if model is not None:
        ok = _check_device(model, feeds, tpu_tensors) and ok
    if tosa_text is not None:
        exact = _int8_outputs(module) if int8 and args.round_mode == "half_up" else set()
        from tpu_xdsl.tools.export import check_tosa_run

        ok = check_tosa_run(tosa_text, str(tosa_output), feeds, outputs, mode,
                            f"TPU interpreter {mode} (reference) vs TOSA (IREE), final outputs", exact) and ok
    return 0 if ok else 1


def _search_hint(args: argparse.Namespace, mode: str, chip: str, cosine: float) -> str:
    """The `search-qtable` command, on the user's own files, that finds the ops a mode below
    F32 loses the tolerance in and keeps the fewest of them in a more precise mode; it aims
    at the tolerance's `cosine` where that is stricter than its default target."""
    from tpu_xdsl.tools.search_qtable import DEFAULT_TARGET_COSINE

    model = Path(args.model)
    qtable = str(model.with_name(f"{model.stem}_qtable"))
    if args.quantize_table and Path(args.quantize_table).resolve() == Path(qtable).resolve():
        qtable = str(model.with_name(f"{model.stem}_qtable_more"))  # never the table this deploy read
    flags = [args.model]
    if mode != "INT8":
        flags += ["--mode", mode]
    elif args.calibration_table:
        flags += ["--calibration-table", args.calibration_table]
    if args.asymmetric:
        flags.append("--asymmetric")
    if cosine > DEFAULT_TARGET_COSINE:  # the default would be met by a model this deploy found below tolerance
        flags += ["--target-cosine", str(cosine)]
    command = " ".join(["tpu-xdsl search-qtable", *map(shlex.quote, flags),
                        "--dataset DIR --input-num 24 --hardest-of 100 --chip", chip, "-o", shlex.quote(qtable)])
    if args.quantize_table:
        return (f"hint: {mode} misses the tolerance with the ops of --quantize-table {args.quantize_table} in "
                f"float; a search on more samples like --test-input, or with a higher --target-cosine, keeps more "
                f"of them: {command}")
    return (f"hint: {mode} misses the tolerance; search-qtable ranks the ops by what they lose and finds the fewest "
            f"to keep in a more precise mode: {command} (DIR: samples like --test-input, the search runs on the 24 "
            f"of the first 100 where {mode} does worst), then deploy again with "
            f"--quantize-table {shlex.quote(qtable)}")


def _export_tosa(module, path: Path) -> str:
    """Write the lowered module's TOSA form (before layer groups change it); its text."""
    from io import StringIO

    from tpu_xdsl.ir_io import write_atomic, write_module
    from tpu_xdsl.tools.export import export_module
    from tpu_xdsl.weights import weights_of

    exported = export_module(module, weights_of(module))
    text = StringIO()
    write_module(exported, text)
    write_atomic(path, lambda f: f.write(text.getvalue()))
    count = sum(1 for op in exported.walk() if op.name.startswith("tosa."))
    print(f"wrote {path} ({count} TOSA ops)")
    return text.getvalue()


def _int8_outputs(module) -> set[str]:
    """The final outputs an INT8 op computes: integer codes, or codes a last `tpu.cast`
    turns into floats (outputs of float fallbacks are not among them)."""
    from xdsl.dialects.builtin import IntegerType, TensorType
    from xdsl.ir import OpResult

    from tpu_xdsl.dialects.module import main_func, output_names

    ret = main_func(module).body.block.last_op
    assert ret is not None
    found = set()
    for name, value in zip(output_names(module), ret.operands, strict=True):
        if isinstance(value, OpResult) and value.owner.name == "tpu.cast":
            value = value.owner.operands[0]
        kind = value.type
        if isinstance(kind, TensorType) and isinstance(kind.element_type, IntegerType):
            found.add(name)
    return found


def _model_scales_notes(module, table: str | None, asymmetric: bool) -> bool:
    """Say which scales a pre-quantized model's INT8 uses; the asymmetric mode to use (the
    model's zero points need it when some lie inside the codes)."""
    from tpu_xdsl.calibration.model_scales import SOURCE_ATTR, module_needs_asymmetric

    if table:
        del module.attributes[SOURCE_ATTR]  # the table's ranges are the calibration now
        print(f"note: --calibration-table {table} overrides the model's own scales and zero points")
        return asymmetric
    print(
        "note: INT8 uses the model's own scales and zero points (its QuantizeLinear and QLinear ops) "
        "as its calibration; --calibration-table would override them. TOP's tensors are compared "
        "as the model holds them, rounded to those scales"
    )
    if asymmetric or not module_needs_asymmetric(module):
        return asymmetric
    print("note: the model's zero points are not all 0: INT8 is asymmetric (uint8 with zero points), as --asymmetric")
    return True


def _compile(module, group: bool = True, opt: int = 2):
    """Layer groups (tpu-layer-group), addresses (tpu-assign-memory) and the device program
    (codegen) of a lowered module."""
    from tpu_xdsl.backend.codegen import codegen
    from tpu_xdsl.transforms.tpu_assign_memory import assign_memory
    from tpu_xdsl.transforms.tpu_layer_group import layer_group

    if group:
        print(f"note: {layer_group(module, opt).summary()}")
    plan = assign_memory(module)
    print(f"note: {plan.summary()}")
    return codegen(module)


def _check_device(model, feeds, tpu_tensors) -> bool:
    """Run the compiled model on the device model; compare every named tensor with the TPU
    interpreter's. Prints the table and the simulated latency; True when all agree."""
    from tpu_xdsl.device.chip import chip_config
    from tpu_xdsl.device.runtime import run_model
    from tpu_xdsl.interp.compare import Tolerance, compare_all, format_table, summarize

    result = run_model(model, feeds, dump_all=True)
    device = {**result.tensors, **result.outputs}
    rows = compare_all(tpu_tensors, device)
    tolerance = Tolerance(DEVICE_FLOAT_COSINE, -1.0)
    print(format_table(rows, tolerance, f"TPU interpreter (reference) vs device model {model.chip}, by tensor name"))
    ok, summary = summarize(rows, tolerance)
    print(summary.replace("; all pass", "; integer tensors equal, all pass"))
    chip = chip_config(model.chip)
    cycles = result.timeline.total_cycles
    print(f"device model {model.chip}: {cycles} cycles = {chip.cycles_to_seconds(cycles) * 1e3:.3f} ms at "
          f"{chip.clock_hz / 1e9:g} GHz")
    return ok
