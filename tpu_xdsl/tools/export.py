"""`tpu-xdsl export`: a TOP or TPU .mlir to upstream MLIR (TOSA 1.0, the form IREE reads)."""

from __future__ import annotations

import argparse
from io import StringIO
from pathlib import Path

from tpu_xdsl.errors import UsageError
from tpu_xdsl.outputs import check_paths, module_inputs, named, writes_outputs


def add_parser(sub) -> None:
    e = sub.add_parser("export", help="write a TOP or TPU .mlir as TOSA for upstream MLIR tools and IREE")
    e.add_argument("model", help="a TOP .mlir (from transform) or TPU .mlir (from deploy)")
    e.add_argument("--to", required=True, choices=["tosa"], help="the upstream dialect (tosa)")
    e.add_argument("-o", "--output", required=True, help="the .tosa.mlir to write")
    e.add_argument("--check", metavar="INPUT",
                   help="also run the export with IREE and the source with the interpreter on this input "
                        "(.npz or image) and compare their final outputs (needs pip install -e '.[tosa]')")
    e.set_defaults(func=export)


@writes_outputs
def export(args: argparse.Namespace) -> int:
    from tpu_xdsl.ir_io import read_module, write_atomic, write_module
    from tpu_xdsl.weights import attach_weights

    if not args.output.endswith(".mlir"):
        raise UsageError(f"-o {args.output}: give a .tosa.mlir file name")
    if args.check:
        from tpu_xdsl.export.iree import require

        require()
    module = read_module(args.model)
    check_paths([*module_inputs("the model", args.model, module), *named("--check", args.check)],
                named("-o", args.output))
    weights = attach_weights(module, base_dir=Path(args.model).parent)
    exported = export_module(module, weights)
    text = StringIO()
    write_module(exported, text)
    write_atomic(Path(args.output), lambda f: f.write(text.getvalue()))
    count = sum(1 for op in exported.walk() if op.name.startswith("tosa."))
    state = exported.attributes["module.state"]
    print(f"wrote {args.output}: {getattr(state, 'data', state)}, {count} TOSA ops")
    if args.check:
        return check_export(args.model, exported, text.getvalue(), args.check)
    return 0


def export_module(module, weights):
    """The TOSA form of a TOP module, or of a TPU module (float modes and INT8)."""
    from xdsl.dialects.builtin import StringAttr

    state = module.attributes.get("module.state")
    text = state.data if isinstance(state, StringAttr) else ""
    if text.startswith("TOP"):
        from tpu_xdsl.export.convert_top_to_tosa import export_tosa

        return export_tosa(module, weights)
    if text.startswith("TPU"):
        from tpu_xdsl.export.convert_tpu_to_tosa import export_tpu_tosa

        return export_tpu_tosa(module, weights)
    raise UsageError(f"module.state is {text or 'missing'}; give a TOP .mlir from transform or a TPU .mlir from deploy")


def check_export(source: str, exported, text: str, feed: str) -> int:
    """Run the source on the interpreter and the export (compiled from `text`) on IREE, and
    compare their final outputs with the TOSA stage's tolerance for its mode: 0 when every
    output is within it, 1 when not."""
    from xdsl.dialects.builtin import StringAttr

    from tpu_xdsl.inspect.stages import load_stages, read_feeds

    (reference,) = load_stages([source])
    feeds = read_feeds(feed, [reference])
    state = exported.attributes["module.state"]
    mode = state.data.removeprefix("TOSA_") if isinstance(state, StringAttr) else "F32"
    passed = check_tosa_run(text, source, feeds, reference.run(feeds), mode,
                            f"TOSA {mode} (IREE) vs {reference.label}: final outputs")
    return 0 if passed else 1


def check_tosa_run(text: str, source: str, feeds, expected, mode: str, title: str,
                   exact: frozenset[str] | set[str] = frozenset()) -> bool:
    """Compile `text` with IREE, run it on `feeds` and compare its final outputs with
    `expected` at the TOSA tolerance of `mode`, printing the table; the outputs named in
    `exact` (INT8 ones rounded half up, as TOSA's rescale rounds) must be equal."""
    from tpu_xdsl.export.iree import compile_tosa, load_vmfb
    from tpu_xdsl.interp.compare import TOSA_TOLERANCE, Tolerance, compare_all, format_table, summarize

    tolerance = Tolerance.parse(TOSA_TOLERANCE.get(mode, TOSA_TOLERANCE["F32"]))
    rows = compare_all(expected, load_vmfb(compile_tosa(text, source)).run(feeds))
    print(format_table(rows, tolerance, title))
    passed, line = summarize(rows, tolerance)
    print(line)
    checked = [r for r in rows if r.name in exact]
    if checked:
        differ = [r.name for r in checked if r.problem or r.max_abs_diff != 0]
        print(f"INT8 rounding half up: {len(checked) - len(differ)} of {len(checked)} INT8 outputs equal bit for bit"
              + (f"; differ: {', '.join(differ)}" if differ else ""))
        passed = passed and not differ
    return passed
