"""`tpu-xdsl run`: a TOP/TPU .mlir on the interpreter, a .tpumodel on the device model, a
.tosa.mlir compiled (cached) and run by IREE."""

from __future__ import annotations

import argparse
from pathlib import Path

from tpu_xdsl.errors import UsageError
from tpu_xdsl.frontend.preprocess import load_device_inputs, load_inputs
from tpu_xdsl.outputs import check_output_path, check_paths, module_inputs, named, writes_outputs


def add_parser(sub) -> None:
    r = sub.add_parser("run", help="run a TOP/TPU .mlir with the interpreter, a .tpumodel on the device model, "
                                   "or a .tosa.mlir with IREE")
    r.add_argument("model", help="a .mlir, .tpumodel or .tosa.mlir file")
    r.add_argument("--input", required=True, help=".npz/.npy inputs or an image")
    r.add_argument("--output", required=True, help="where to write the outputs (.npz)")
    r.add_argument("--dump-all", action="store_true",
                   help="also write every named intermediate tensor (not for a .tosa.mlir)")
    r.add_argument("--profile", action="store_true",
                   help="per layer group and layer: cycles, MACs, utilization, DMA bytes, engine busy; the roofline "
                        "(.tpumodel)")
    r.add_argument("--trace", metavar="FILE.json",
                   help="write the simulated timeline as a Chrome trace-event file for Perfetto (.tpumodel)")
    r.add_argument("--chip", help="the device to run on (.tpumodel; default: the model's chip)")
    r.set_defaults(func=run)


@writes_outputs
def run(args: argparse.Namespace) -> int:
    if Path(args.model).suffix == ".tpumodel":
        return run_device(args)
    if args.profile or args.chip or args.trace:
        raise UsageError("--profile, --trace and --chip are for a .tpumodel run on the device model; this is a .mlir")
    from tpu_xdsl.export.iree import is_tosa_file

    if is_tosa_file(args.model):
        return run_tosa(args)
    from tpu_xdsl.interp.runner import TensorCapture, run_module
    from tpu_xdsl.ir_io import read_module
    from tpu_xdsl.weights import attach_weights, write_npz_atomic

    module = read_module(args.model)
    check_paths([*module_inputs("the model", args.model, module), *named("--input", args.input)],
                named("--output", args.output))
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


def check_trace_path(path: str) -> None:
    """Fail before the run, not after it, when the trace cannot go where --trace says."""
    trace = Path(path)
    if trace.is_dir():
        raise UsageError(f"--trace {path} is a folder; give a file name, e.g. {trace / 'trace.json'}")
    check_output_path("--trace", path)


def run_device(args: argparse.Namespace) -> int:
    from tpu_xdsl.device.model_file import load_model
    from tpu_xdsl.device.runtime import profile_lines, run_model
    from tpu_xdsl.device.trace import write_trace
    from tpu_xdsl.weights import write_npz_atomic

    if args.trace:
        check_trace_path(args.trace)
    check_paths(named("the model", args.model) + named("--input", args.input),
                named("--output", args.output) + named("--trace", args.trace))
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


def run_tosa(args: argparse.Namespace) -> int:
    """A TOSA module compiled by IREE (cached by content) and run: its final outputs by name."""
    from tpu_xdsl.export.iree import compile_tosa_file, load_vmfb, require
    from tpu_xdsl.inspect.stages import load_tosa_inputs
    from tpu_xdsl.ir_io import read_module
    from tpu_xdsl.weights import write_npz_atomic

    if args.dump_all:
        raise UsageError(f"--dump-all: IREE gives the final outputs of {args.model} only; run the TOP or TPU .mlir "
                         "it was exported from to dump every tensor")
    require()
    check_paths(named("the model", args.model) + named("--input", args.input), named("--output", args.output))
    module = read_module(args.model)
    inputs = load_tosa_inputs(args.input, module)
    outputs = load_vmfb(compile_tosa_file(args.model), source=args.model).run(inputs)
    write_npz_atomic(Path(args.output), outputs)
    for name, value in outputs.items():
        print(f"{name}: shape {list(value.shape)} {value.dtype}")
    print(f"wrote {args.output} ({len(outputs)} tensors)")
    return 0
