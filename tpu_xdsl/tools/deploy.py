"""`tpu-xdsl deploy`: lower a TOP module to the TPU dialect and check it against TOP results
(TPU-MLIR's model_deploy).

    tpu-xdsl deploy N.mlir --quantize F32|F16|BF16|INT8 [--asymmetric] --chip bm1684x \\
        [--calibration-table N_cali_table] [--quantize-table Q] [--quant-input] [--quant-output] \\
        --test-input x.npz --test-reference N_top_outputs.npz [--tolerance C,E] -o N_int8.mlir

It attaches the calibration table (`import-calibration`), lowers
(`lower-top-to-tpu`), writes the TPU `.mlir` and its weights, runs the TPU
interpreter on the test input, compares every tensor name present in both
stages (INT8 tensors by the real values they stand for), prints the table,
names the first tensor below tolerance and exits with code 1 then. Every
input is checked before anything is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tpu_xdsl.errors import TpuXdslError

# Stricter than TPU-MLIR's public defaults (0.99,0.90 and 0.90,0.80).
DEFAULT_TOLERANCE = {"F32": "0.99,0.99", "F16": "0.99,0.95", "BF16": "0.99,0.95", "INT8": "0.95,0.85"}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("deploy", help="TOP .mlir -> TPU .mlir in a mode, checked against TOP results")
    p.add_argument("model", help="the TOP .mlir (from transform)")
    p.add_argument("--quantize", required=True, help="F32, F16, BF16 or INT8")
    p.add_argument("--chip", default="bm1684x", help="bm1684x (default) or cv183x")
    p.add_argument("--asymmetric", action="store_true", help="INT8 activations as uint8 with zero points")
    p.add_argument("--calibration-table", help="the calibration table (from tpu-xdsl calibrate); INT8 needs it")
    p.add_argument("--quantize-table", help="per-op modes for mixed precision: lines 'op_name MODE'")
    p.add_argument("--quant-input", action="store_true", help="INT8 model inputs (no float cast at the inputs)")
    p.add_argument("--quant-output", action="store_true", help="INT8 model outputs (no float cast at the outputs)")
    p.add_argument("--test-input", help=".npz/.npy input or image to compare on")
    p.add_argument("--test-reference", help="TOP tensors (.npz written by transform --test-result)")
    p.add_argument("--tolerance", help="min cosine,euclidean (default by mode: F32 0.99,0.99; F16/BF16 0.99,0.95; INT8 0.95,0.85)")
    p.add_argument("-o", "--output", required=True, help="the TPU .mlir to write")
    p.set_defaults(func=deploy)


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


def deploy(args: argparse.Namespace) -> int:
    import numpy as np

    from tpu_xdsl.calibration.table import read_table
    from tpu_xdsl.device.chip import check_mode, chip_config
    from tpu_xdsl.interp.compare import Tolerance, compare_all, format_table, summarize
    from tpu_xdsl.interp.runner import ModuleRunner, TensorCapture, arrange_inputs, input_names, real_values
    from tpu_xdsl.ir_io import read_module
    from tpu_xdsl.tools.tpu_xdsl import UsageError, load_inputs, save_module
    from tpu_xdsl.transforms.import_calibration import CALIBRATED_STATE, import_calibration
    from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu, report_fallbacks
    from tpu_xdsl.weights import attach_weights, weights_of

    chip = chip_config(args.chip)
    mode = check_mode(chip, args.quantize)
    tolerance = Tolerance.parse(args.tolerance or DEFAULT_TOLERANCE[mode])
    output = Path(args.output)
    if output.suffix != ".mlir":
        raise UsageError(f"-o {args.output}: the TPU module is written as .mlir; name it {output.stem}.mlir")
    if not output.parent.is_dir():
        raise UsageError(f"-o {args.output}: folder {output.parent} does not exist")
    if bool(args.test_input) != bool(args.test_reference):
        raise UsageError("--test-input and --test-reference go together: give both or neither")
    module = read_module(args.model)
    state = module.attributes.get("module.state")
    if state is None or not str(state).strip('"').startswith("TOP"):
        raise TpuXdslError(f"{args.model}: module.state is {state}; deploy takes a TOP module from transform")
    calibrated = str(state).strip('"') == CALIBRATED_STATE
    table = read_table(args.calibration_table) if args.calibration_table else None
    if table is None and not calibrated and _needs_int8(mode, args.quantize_table):
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
        feeds = dict(zip(input_names(module), arrange_inputs(module, load_inputs(args.test_input, module))))
        try:
            with np.load(args.test_reference, allow_pickle=False) as npz:
                reference = {k: npz[k] for k in npz.files}
        except (OSError, ValueError) as e:
            raise UsageError(f"{args.test_reference}: cannot read reference tensors ({e})") from e
    if table is not None:
        imported = import_calibration(module, table, args.calibration_table)
        for line in imported.warnings(args.calibration_table):
            print(f"tpu-xdsl: warning: {line}", file=sys.stderr)
    fallbacks = lower_top_to_tpu(
        module, mode, chip.name, args.asymmetric, args.quantize_table, args.quant_input, args.quant_output
    )
    for line in report_fallbacks(fallbacks):
        print(f"note: {line}")
    save_module(module, output, dict(weights_of(module)))
    asym = " asymmetric" if args.asymmetric and mode == "INT8" else ""
    print(f"wrote {output} and {output.stem}_weights.npz ({mode}{asym}, {chip.name})")
    if feeds is None or reference is None:
        return 0
    capture = TensorCapture()
    outputs = ModuleRunner(module, weights_of(module)).run(feeds, [capture])
    rows = compare_all(reference, real_values(module, {**capture.tensors, **outputs}))
    print(format_table(rows, tolerance, f"TOP (reference) vs TPU interpreter {mode}{asym}, by tensor name"))
    ok, summary = summarize(rows, tolerance)
    print(summary)
    return 0 if ok else 1
