"""`tpu-xdsl transform`: ONNX -> TOP .mlir + weights; with a test input, every tensor of
the TOP interpreter compared with onnxruntime's."""

from __future__ import annotations

import argparse
import ast
import os
import sys
from pathlib import Path

from tpu_xdsl.errors import UsageError
from tpu_xdsl.feeds import read_input_file
from tpu_xdsl.frontend.preprocess import load_inputs
from tpu_xdsl.outputs import Role, check_output_path, check_paths, module_outputs, named, writes_outputs


def add_parser(sub) -> None:
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
    t.set_defaults(func=run)


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


def _progress(total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, disable=None, leave=False, file=sys.stderr)


@writes_outputs
def run(args: argparse.Namespace) -> int:

    from tpu_xdsl.frontend.constant_inputs import parse_constant_inputs
    from tpu_xdsl.frontend.onnx_importer import import_onnx
    from tpu_xdsl.frontend.onnx_model import load_model
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
    check_output_path("-o", args.output)
    if output.suffix != ".mlir":
        raise UsageError(f"-o {args.output}: the TOP module is written as .mlir; name it {output.stem}.mlir")
    constant_file = args.constant_inputs if args.constant_inputs and args.constant_inputs.endswith(".npz") else None
    outputs = [*module_outputs("-o", output), *named("--test-result", args.test_result)]
    check_paths(
        [*named("--model-def", args.model_def), *named("--test-input", args.test_input),
         *named("--constant-inputs", constant_file), *_external_data(args.model_def, outputs)],
        outputs,
    )
    shapes = parse_input_shapes(args.input_shapes)
    constants = parse_constant_inputs(args.constant_inputs) if args.constant_inputs else {}
    steps = 3 + (3 if args.test_input else 0)
    with _progress(steps, "transform") as bar:
        bar.set_postfix_str("load")
        model = load_model(args.model_def)
        bar.set_postfix_str("import")
        # An .npz test input may bind inputs that only steer shapes or branches.
        steering = _npz_test_input(args.test_input, model)
        result = import_onnx(model, args.model_name, shapes, constants, steering, validated=True)
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

            loaded = load_inputs(args.test_input, result.module, preprocess)
            feeds = dict(zip(result.input_names, arrange_inputs(result.module, loaded)))
            bar.set_postfix_str("reference")
            # The reference runs the model as given: inputs bound at import take their values.
            # It runs before anything is written: a model onnxruntime refuses leaves no files.
            reference, engine = run_reference(model, {**feeds, **result.constant_inputs})
            bar.update()
        save_module(result.module, output, weights)
        bar.update()
        for note in result.notes:
            print(f"note: {note}")
        if feeds is None:
            print(f"wrote {output} and {output.stem}_weights.npz")
            return 0
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


def _external_data(model_def: str, outputs: list[Role]) -> list[Role]:
    """The ONNX model's external data files an output could replace. The model is parsed for
    them only when an output already exists in the model's folder (else none can be one)."""
    folder = os.path.realpath(Path(model_def).parent)
    if not any(r.path.is_file() and os.path.dirname(os.path.realpath(r.path)) == folder for r in outputs):
        return []
    try:
        import onnx
        from onnx.external_data_helper import _get_all_tensors, uses_external_data

        model = onnx.load_model(model_def, load_external_data=False)
        locations = {entry.value for tensor in _get_all_tensors(model) if uses_external_data(tensor)
                     for entry in tensor.external_data
                     # bytes (not UTF-8) or a NUL: not a file name; load_model refuses it in one line
                     if entry.key == "location" and isinstance(entry.value, str) and entry.value.isprintable()}
    except Exception:  # noqa: BLE001 - a model onnx cannot parse: load_model reports it in one line
        return []
    return [Role("--model-def", Path(folder) / location, model_def, "external data") for location in sorted(locations)]


def _npz_test_input(path: str | None, model) -> dict | None:
    """The arrays of an .npz test input by name (None for no test input or an image)."""
    from tpu_xdsl.feeds import is_image
    from tpu_xdsl.frontend.onnx_model import model_inputs

    if path is None or is_image(Path(path)):
        return None
    names = [v.name for v in model_inputs(model)]
    return read_input_file(path, names, lambda file: None)
