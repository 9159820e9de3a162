"""`tpu-xdsl report`: one self-contained HTML page of a model's stages run on one input.

    tpu-xdsl report STAGE_FILE... --input FILE -o report.html [--tolerance C,E]

STAGE_FILE is any of the model's stages (`.onnx`, TOP `.mlir`, TPU `.mlir`,
`.tpumodel`, `.tosa.mlir`: final outputs only, run by IREE; `inspect.stages` loads and
runs them). The page shows:

- a header: model, chip, mode, input, the stages, one summary line per pair of
  neighbouring stages, the simulated cycles against the roofline;
- the layer graph (TOP ops if loaded, else TPU ops, else ONNX nodes, else the device's
  named tensors), each layer filled by its cosine between a pair of stages (a menu
  picks the pair), layer-group members outlined in their group's color;
- every tensor with cosine, euclidean similarity, SQNR, max |d| and pass/fail per pair,
  worst first, sortable by any column;
- with a `.tpumodel`: cycles, engine busy, MACs and DMA bytes per layer group and per
  layer outside groups, and the timeline of the DMA and compute engines.

`tpu_xdsl.inspect` builds the page: `layer_graph` finds the layers, `layered_layout`
places them, `inspect.report` writes the page. Everything is inline (CSS, SVG, a little
JavaScript): the file opens offline and can be mailed. Exit code 0 when every pair passes
its tolerance, 1 when a tensor fails, 2 for unusable input (nothing is written then).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tpu_xdsl.inspect.report import ReportError, build_page, render_page
from tpu_xdsl.inspect.stages import (
    Stage,
    align_feeds,
    check_feeds,
    load_stages,
    read_feeds,
)
from tpu_xdsl.interp.compare import Tolerance
from tpu_xdsl.outputs import check_output_path, check_paths, module_inputs, named, writes_outputs


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "report",
        help="one self-contained HTML page: layer graph colored by similarity between stages, "
             "every tensor compared, layer-group cycles and the engine timeline",
    )
    p.add_argument("stages", nargs="+", metavar="STAGE_FILE",
                   help="the model's stages, any of: .onnx, TOP .mlir, TPU .mlir, .tpumodel, .tosa.mlir")
    p.add_argument("--input", required=True, help="an .npz/.npy input or an image")
    p.add_argument("-o", "--output", required=True, help="the page to write (.html)")
    p.add_argument("--tolerance",
                   help="min cosine,euclidean for every pair of stages (default: per pair, what transform "
                        "and deploy check: TOP 0.99,0.99; TPU by mode, INT8 0.95,0.85; the device against TPU "
                        "to cosine 0.99999; a TOSA export against its source by mode, F32 0.99999,0.999)")
    p.set_defaults(func=report)
    return p


def check_output(path: str) -> Path:
    output = Path(path)
    check_output_path("-o", path)
    if output.suffix.lower() not in (".html", ".htm"):
        raise ReportError(f"-o {path}: the report is an HTML page; name it {output.stem or 'report'}.html")
    return output


def run_stages(stages: Sequence[Stage], feeds) -> dict[str, dict[str, np.ndarray]]:
    """Every tensor of each stage run on the input, by stage kind, with a progress bar."""
    from tqdm import tqdm

    results = {}
    with tqdm(total=len(stages), desc="report", disable=None, leave=False, file=sys.stderr) as bar:
        for stage in stages:
            bar.set_postfix_str(stage.label)
            results[stage.kind] = stage.run(align_feeds(feeds, stage))
            bar.update()
    return results


@writes_outputs
def report(args: argparse.Namespace) -> int:
    from tpu_xdsl.files import write_atomic

    tolerance = Tolerance.parse(args.tolerance) if args.tolerance is not None else None
    output = check_output(args.output)
    stage_files = [role for stage in args.stages for role in (
        module_inputs("STAGE_FILE", stage) if Path(stage).suffix == ".mlir" else named("STAGE_FILE", stage))]
    check_paths([*stage_files, *named("--input", args.input)], named("-o", args.output))
    stages = load_stages(args.stages)
    feeds = read_feeds(args.input, stages)
    check_feeds(feeds, stages, args.input)
    results = run_stages(stages, feeds)
    page = build_page(stages, args.input, feeds, results, tolerance)
    pairs = page.pairs
    text = render_page(page)
    try:
        write_atomic(output, lambda f: f.write(text.encode("utf-8")), binary=True)
    except OSError as err:
        raise ReportError(f"-o {output}: cannot write ({err.strerror}); check that its folder is writable") from err
    for pair in pairs:
        print(f"{pair.title}: {pair.summary}")
    print(f"wrote {output} ({len(page.tensor_names())} tensors, {len(page.graph.layers)} layers)")
    return 0 if all(p.ok for p in pairs) else 1
