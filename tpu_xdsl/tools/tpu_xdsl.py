"""`tpu-xdsl`: the end-to-end tool (transform, run, check; calibrate, deploy, compare, debug follow).

Errors a user causes print one line and exit with code 2 (`--debug` shows
the traceback); a comparison below tolerance exits with code 1; a fault of
tpu-xdsl itself (any other exception) prints one line asking for a report and
exits with code 3, so a script never mistakes a crash for a tolerance failure.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Sequence
from pathlib import Path

from tpu_xdsl.errors import EXIT_INTERNAL, TpuXdslError, internal_error_line


class UsageError(TpuXdslError):
    """A flag value is malformed."""


# -- helpers shared by subcommands --------------------------------------------------


def parse_input_shapes(text: str | None) -> list[list[int]] | None:
    """`[[1,3,224,224]]` or `[1,3,224,224]` -> list of shapes."""
    if text is None:
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError) as e:
        raise UsageError(f"--input-shapes {text!r}: write a list of shapes, e.g. [[1,3,224,224]]") from e
    if isinstance(value, list | tuple) and value and all(isinstance(v, int) for v in value):
        value = [value]
    if not (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(s, list | tuple) and all(isinstance(d, int) for d in s) for s in value)
    ):
        raise UsageError(f"--input-shapes {text!r}: write a list of shapes, e.g. [[1,3,224,224]]")
    return [list(s) for s in value]


def load_inputs(path: str, module, preprocess=None) -> dict:
    """Model inputs from an .npz (by input name), an .npy (single input), or an image
    (through `preprocess`, or the one the module records)."""
    from tpu_xdsl.dialects.module import input_names, main_func
    from tpu_xdsl.frontend.preprocess import Preprocess

    def image(file: Path):
        pre = preprocess or Preprocess.from_module(module) or Preprocess()
        shape = main_func(module).function_type.inputs.data[0].get_shape()  # type: ignore[attr-defined]
        return pre.load_image(file, shape)

    return read_input_file(path, input_names(module), image)


def read_input_file(path: str, names: list[str], image) -> dict:
    """Arrays by input name from an .npz, an .npy (the first input), or an image file that
    `image(file)` turns into the single input."""
    import zipfile

    import numpy as np

    from tpu_xdsl.frontend.preprocess import is_image

    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: no such input file")
    if is_image(file):
        if len(names) != 1:
            raise UsageError(f"{path}: an image can feed a single-input model; this one has {len(names)} inputs")
        return {names[0]: image(file)}
    try:
        if file.suffix == ".npy":
            return {names[0]: np.load(file, allow_pickle=False)}
        with np.load(file, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise UsageError(f"{path}: cannot read inputs ({e}); give an .npz, .npy or image file") from e


def _progress(total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, disable=None, leave=False, file=sys.stderr)


# -- transform ------------------------------------------------------------------------


def _transform(args: argparse.Namespace) -> int:

    from tpu_xdsl.frontend.constant_inputs import parse_constant_inputs
    from tpu_xdsl.frontend.onnx_importer import import_onnx, load_model
    from tpu_xdsl.frontend.preprocess import Preprocess, parse_floats, parse_ints
    from tpu_xdsl.frontend.reference import run_reference
    from tpu_xdsl.interp.compare import Tolerance, compare_all, format_table, summarize
    from tpu_xdsl.interp.runner import TensorCapture, run_module
    from tpu_xdsl.ir_io import save_module
    from tpu_xdsl.transforms.pipelines import canonicalize
    from tpu_xdsl.weights import weights_of, write_npz_atomic

    tolerance = Tolerance.parse(args.tolerance)
    preprocess = Preprocess(
        mean=parse_floats(args.mean, "--mean") or [0.0],
        scale=parse_floats(args.scale, "--scale") or [1.0],
        pixel_format=args.pixel_format,
        channel_format=args.channel_format,
        resize_dims=parse_ints(args.resize_dims, "--resize-dims"),
        keep_aspect_ratio=args.keep_aspect_ratio,
    )
    output = Path(args.output)
    if output.suffix != ".mlir":
        raise UsageError(f"-o {args.output}: the TOP module is written as .mlir; name it {output.stem}.mlir")
    if not output.parent.is_dir():
        raise UsageError(f"-o {args.output}: folder {output.parent} does not exist")
    shapes = parse_input_shapes(args.input_shapes)
    constants = parse_constant_inputs(args.constant_inputs) if args.constant_inputs else {}
    steps = 3 + (3 if args.test_input else 0)
    with _progress(steps, "transform") as bar:
        bar.set_postfix_str("load")
        model = load_model(args.model_def)
        bar.set_postfix_str("import")
        # An .npz test input may bind inputs that only steer shapes or branches.
        steering = _npz_test_input(args.test_input, model)
        result = import_onnx(model, args.model_name, shapes, constants, steering)
        preprocess.record(result.module)
        bar.update()
        bar.set_postfix_str("canonicalize")
        from tpu_xdsl.weights import attach_weights

        attach_weights(result.module, result.weights)
        canonicalize(result.module)
        weights = dict(weights_of(result.module))
        bar.update()
        feeds = None
        if args.test_input:
            # Read and check the test input before writing anything.
            from tpu_xdsl.interp.runner import arrange_inputs

            given = load_inputs(args.test_input, result.module, preprocess)
            feeds = dict(zip(result.input_names, arrange_inputs(result.module, given)))
        save_module(result.module, output, weights)
        bar.update()
        for note in result.notes:
            print(f"note: {note}")
        if feeds is None:
            print(f"wrote {output} and {output.stem}_weights.npz")
            return 0
        bar.set_postfix_str("reference")
        # The reference runs the model as given: inputs bound at import take their values.
        reference, engine = run_reference(model, {**feeds, **result.constant_inputs})
        bar.update()
        bar.set_postfix_str("TOP interpreter")
        capture = TensorCapture()
        outputs = run_module(result.module, feeds, weights_of(result.module), [capture])
        bar.update()
        bar.set_postfix_str("compare")
        rows = compare_all(reference, {**capture.tensors, **outputs})
        bar.update()
    print(format_table(rows, tolerance, f"{engine} (reference) vs TOP interpreter, by tensor name"))
    ok, summary = summarize(rows, tolerance)
    print(summary)
    if args.test_result:
        write_npz_atomic(Path(args.test_result), {**capture.tensors, **outputs})
        print(f"wrote {args.test_result} ({len(capture.tensors)} tensors)")
    print(f"wrote {output} and {output.stem}_weights.npz")
    return 0 if ok else 1


def _npz_test_input(path: str | None, model) -> dict | None:
    """The arrays of an .npz test input by name (None for no test input or an image)."""
    from tpu_xdsl.frontend.onnx_importer import model_inputs
    from tpu_xdsl.frontend.preprocess import is_image

    if path is None or is_image(Path(path)):
        return None
    names = [v.name for v in model_inputs(model)]
    return read_input_file(path, names, lambda file: None)


# -- run ---------------------------------------------------------------------------------


def _run(args: argparse.Namespace) -> int:
    if Path(args.model).suffix == ".tpumodel":
        return _run_device(args)
    if args.profile or args.chip or args.trace:
        raise UsageError("--profile, --trace and --chip are for a .tpumodel run on the device model; this is a .mlir")
    from tpu_xdsl.interp.runner import TensorCapture, run_module
    from tpu_xdsl.ir_io import read_module
    from tpu_xdsl.weights import attach_weights, write_npz_atomic

    module = read_module(args.model)
    weights = attach_weights(module, base_dir=Path(args.model).parent)
    inputs = load_inputs(args.input, module)
    capture = TensorCapture()
    outputs = run_module(module, inputs, weights, [capture] if args.dump_all else [])
    tensors = {**capture.tensors, **outputs} if args.dump_all else outputs
    write_npz_atomic(Path(args.output), tensors)
    for name, value in outputs.items():
        print(f"{name}: shape {list(value.shape)} {value.dtype}")
    print(f"wrote {args.output} ({len(tensors)} tensors)")
    return 0


def load_device_inputs(path: str, model) -> dict:
    """Inputs of a compiled model from an .npz, an .npy or an image (through the
    preprocessing the model recorded)."""
    from tpu_xdsl.frontend.preprocess import Preprocess

    def image(file: Path):
        pre = Preprocess.from_dict(model.preprocess) if model.preprocess else Preprocess()
        return pre.load_image(file, model.inputs[0].shape)

    return read_input_file(path, [d.name for d in model.inputs], image)


def check_trace_path(path: str) -> None:
    """Fail before the run, not after it, when the trace cannot go where --trace says."""
    trace = Path(path)
    if trace.is_dir():
        raise UsageError(f"--trace {path} is a folder; give a file name, e.g. {trace / 'trace.json'}")
    if not trace.parent.is_dir():
        raise UsageError(f"--trace {path}: folder {trace.parent} does not exist")


def _run_device(args: argparse.Namespace) -> int:
    from tpu_xdsl.device.model_file import load_model
    from tpu_xdsl.device.runtime import profile_lines, run_model
    from tpu_xdsl.device.trace import write_trace
    from tpu_xdsl.weights import write_npz_atomic

    if args.trace:
        check_trace_path(args.trace)
    if args.chip:
        from tpu_xdsl.device.chip import chip_config

        chip_config(args.chip)
    model = load_model(args.model, chip=args.chip)
    inputs = load_device_inputs(args.input, model)
    result = run_model(model, inputs, dump_all=args.dump_all)
    tensors = {**result.tensors, **result.outputs} if args.dump_all else result.outputs
    write_npz_atomic(Path(args.output), tensors)
    if args.profile:
        for line in profile_lines(model, result.timeline):
            print(line)
    for name, value in result.outputs.items():
        print(f"{name}: shape {list(value.shape)} {value.dtype}")
    from tpu_xdsl.device.chip import chip_config

    chip = chip_config(model.chip)
    print(f"{model.chip}: {result.timeline.total_cycles} cycles = "
          f"{chip.cycles_to_seconds(result.timeline.total_cycles) * 1e3:.3f} ms")
    print(f"wrote {args.output} ({len(tensors)} tensors)")
    if args.trace:
        write_trace(args.trace, model, result.timeline, chip)
        print(f"wrote {args.trace} ({len(result.timeline.scheduled)} events; open it in https://ui.perfetto.dev)")
    return 0


def _info(args: argparse.Namespace) -> int:
    from tpu_xdsl.device.model_file import (
        instruction_lines,
        load_model,
        memory_map_lines,
        model_summary,
    )

    model = load_model(args.model)
    lines = [*model_summary(model), *memory_map_lines(model)]
    if args.instructions:
        lines += ["instructions:", *instruction_lines(model)]
    print("\n".join(lines))
    return 0


def _check(args: argparse.Namespace) -> int:
    """Parse and verify a TOP/TPU `.mlir` file and print it back."""
    from tpu_xdsl.ir_io import read_module, write_module

    module = read_module(args.file)
    write_module(module, sys.stdout, generic=args.generic)
    return 0


def _list_ops(args: argparse.Namespace) -> int:
    from tpu_xdsl.frontend.registry import RULES, load_all

    load_all()
    for op_type in sorted(RULES):
        ranges = ", ".join(f"{e.since}-{e.until or ''}" for e in RULES[op_type])
        print(f"{op_type:<28} opsets {ranges}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tpu-xdsl", description="Deploy ONNX models to a TPU, checking every stage.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)

    t = sub.add_parser("transform", help="ONNX -> TOP .mlir + weights, checked against onnxruntime")
    t.add_argument("--model-def", required=True, help="the ONNX model")
    t.add_argument("--model-name", required=True, help="name recorded in the module")
    t.add_argument("--input-shapes", help="static input shapes, e.g. [[1,3,224,224]]")
    t.add_argument("--mean", help="per-channel mean, e.g. 123.675,116.28,103.53")
    t.add_argument("--scale", help="per-channel scale: y = (x - mean) * scale")
    t.add_argument("--pixel-format", default="bgr", help="rgb, bgr or gray (default bgr)")
    t.add_argument("--channel-format", default="nchw", help="nchw or nhwc (default nchw)")
    t.add_argument("--resize-dims", help="resize images to height,width before the center crop")
    t.add_argument("--keep-aspect-ratio", action="store_true", help="resize keeping the aspect ratio, pad with 0")
    t.add_argument("--constant-inputs", metavar="NAME=VALUE[,...]|FILE.npz",
                   help="bind model inputs (a sample rate, a mode flag) to constants; they leave the TOP "
                        "module's inputs. Inputs that only steer shapes or branches may also take the "
                        "test input's values")
    t.add_argument("--test-input", help="an .npz/.npy input or an image to compare stages on")
    t.add_argument("--test-result", help="write the TOP interpreter's tensors here (.npz)")
    t.add_argument("--tolerance", default="0.99,0.99", help="min cosine,euclidean (default 0.99,0.99)")
    t.add_argument("-o", "--output", required=True, help="the TOP .mlir to write")
    t.set_defaults(func=_transform)

    r = sub.add_parser("run", help="run a TOP/TPU .mlir with the interpreter, or a .tpumodel on the device model")
    r.add_argument("model", help="a .mlir or .tpumodel file")
    r.add_argument("--input", required=True, help=".npz/.npy inputs or an image")
    r.add_argument("--output", required=True, help="where to write the outputs (.npz)")
    r.add_argument("--dump-all", action="store_true", help="also write every named intermediate tensor")
    r.add_argument("--profile", action="store_true",
                   help="per layer group and layer: cycles, MACs, utilization, DMA bytes, engine busy; the roofline "
                        "(.tpumodel)")
    r.add_argument("--trace", metavar="FILE.json",
                   help="write the simulated timeline as a Chrome trace-event file for Perfetto (.tpumodel)")
    r.add_argument("--chip", help="the device to run on (.tpumodel; default: the model's chip)")
    r.set_defaults(func=_run)

    info = sub.add_parser("info", help="what a .tpumodel holds: chip, mode, I/O, instructions, memory map")
    info.add_argument("model", help="a .tpumodel file")
    info.add_argument("--instructions", action="store_true",
                      help="also list every instruction with its operands, and the coefficients' SHA-256")
    info.set_defaults(func=_info)

    check = sub.add_parser("check", help="parse, verify and print a .mlir file")
    check.add_argument("file", help="a TOP or TPU .mlir file")
    check.add_argument("--generic", action="store_true", help="print generic form")
    check.set_defaults(func=_check)

    from tpu_xdsl.tools import (
        calibrate,
        compare,
        debug,
        demo,
        deploy,
        report,
        search_qtable,
    )

    calibrate.add_parser(sub)
    search_qtable.add_parser(sub)
    deploy.add_parser(sub)
    compare.add_parser(sub)
    demo.add_parser(sub)
    report.add_parser(sub)
    debug.add_parser(sub)

    ops = sub.add_parser("list-ops", help="ONNX op types the importer supports, with opset ranges")
    ops.set_defaults(func=_list_ops)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except TpuXdslError as e:
        if args.debug:
            raise
        print(f"tpu-xdsl: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tpu-xdsl: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of our output went away (| head): not an error
        sys.stderr.close()
        return 0
    except Exception as e:
        if args.debug:
            raise
        print(internal_error_line(f"tpu-xdsl {args.command}", e), file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
