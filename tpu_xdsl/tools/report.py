"""`tpu-xdsl report`: one self-contained HTML page of a model's stages run on one input.

    tpu-xdsl report STAGE_FILE... --input FILE -o report.html [--tolerance C,E]

STAGE_FILE is any of the model's stages (`.onnx`, TOP `.mlir`, TPU `.mlir`,
`.tpumodel`; `inspect.stages` loads and runs them). The page shows:

- a header: model, chip, mode, input, the stages, one summary line per pair of
  neighbouring stages, the simulated cycles against the roofline;
- the layer graph (TOP ops if loaded, else TPU ops, else ONNX nodes, else the device's
  named tensors), each layer filled by its cosine between a pair of stages (a menu
  picks the pair), layer-group members outlined in their group's color;
- every tensor with cosine, euclidean similarity, SQNR, max |d| and pass/fail per pair,
  worst first, sortable by any column;
- with a `.tpumodel`: cycles, engine busy, MACs and DMA bytes per layer group and per
  layer outside groups, and the timeline of the DMA and compute engines.

`layer_graph` finds the layers, `layered_layout` places them, `report_page` writes the
page. Everything is inline (CSS, SVG, a little JavaScript): the file opens offline and can
be mailed. Exit code 0 when every pair passes its tolerance, 1 when a tensor fails, 2 for
unusable input (nothing is written then).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.inspect.stages import Stage
from tpu_xdsl.interp.compare import TensorComparison, Tolerance
from tpu_xdsl.tools.report_page import DeviceRun


class ReportError(TpuXdslError):
    """A `report` argument is unusable: the output path, or stages that do not compare."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "report",
        help="one self-contained HTML page: layer graph colored by similarity between stages, "
             "every tensor compared, layer-group cycles and the engine timeline",
    )
    p.add_argument("stages", nargs="+", metavar="STAGE_FILE",
                   help="the model's stages, any of: .onnx, TOP .mlir, TPU .mlir, .tpumodel")
    p.add_argument("--input", required=True, help="an .npz/.npy input or an image")
    p.add_argument("-o", "--output", required=True, help="the page to write (.html)")
    p.add_argument("--tolerance",
                   help="min cosine,euclidean for every pair of stages (default: per pair, what transform "
                        "and deploy check: TOP 0.99,0.99; TPU by mode, INT8 0.95,0.85; the device against TPU "
                        "to cosine 0.99999)")
    p.set_defaults(func=report)
    return p


# -- comparing the stages -------------------------------------------------------------------


@dataclass
class StagePair:
    """A stage compared with its reference (the nearest loaded stage before it)."""

    reference: Stage
    actual: Stage
    tolerance: Tolerance
    rows: dict[str, TensorComparison]
    ok: bool
    summary: str

    @property
    def title(self) -> str:
        return f"{self.actual.label} vs {self.reference.label}"


def compare_stages(
    stages: Sequence[Stage], results: Mapping[str, Mapping[str, np.ndarray]], tolerance: Tolerance | None
) -> list[StagePair]:
    from tpu_xdsl.inspect.stages import default_tolerance, reference_of
    from tpu_xdsl.interp.compare import compare_all, summarize

    pairs = []
    for stage in stages:
        reference = reference_of(stages, stage)
        if reference is None:
            continue
        rows = compare_all(results[reference.kind], results[stage.kind])
        if not rows:
            raise ReportError(
                f"{reference.path} and {stage.path} have no tensor name in common: are they stages of the same model?"
            )
        tol = tolerance or default_tolerance(reference, stage)
        ok, summary = summarize(rows, tol)
        pairs.append(StagePair(reference, stage, tol, {r.name: r for r in rows}, ok, summary))
    return pairs


def device_run(stage: Stage) -> DeviceRun:
    """The compiled model's schedule (the same on every input) and its profile rows."""
    from tpu_xdsl.device.runtime import profile_rows

    loaded = stage.loaded
    return DeviceRun(stage.handle, loaded.timeline, profile_rows(stage.handle, loaded.timeline), loaded.chip)


# -- the command ----------------------------------------------------------------------------


def check_output(path: str) -> Path:
    output = Path(path)
    if output.suffix.lower() not in (".html", ".htm"):
        raise ReportError(f"-o {path}: the report is an HTML page; name it {output.stem or 'report'}.html")
    if not output.parent.is_dir():
        raise ReportError(f"-o {path}: folder {output.parent} does not exist")
    return output


def report(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from tpu_xdsl.files import write_atomic
    from tpu_xdsl.inspect.layer_graph import layer_graph
    from tpu_xdsl.inspect.stages import (
        align_feeds,
        check_feeds,
        load_stages,
        read_feeds,
    )
    from tpu_xdsl.tools.report_page import Page, default_pair, model_name, render_page

    tolerance = Tolerance.parse(args.tolerance) if args.tolerance is not None else None
    output = check_output(args.output)
    stages = load_stages(args.stages)
    feeds = read_feeds(args.input, stages)
    check_feeds(feeds, stages, args.input)
    results = {}
    with tqdm(total=len(stages), desc="report", disable=None, leave=False, file=sys.stderr) as bar:
        for stage in stages:
            bar.set_postfix_str(stage.label)
            results[stage.kind] = stage.run(align_feeds(feeds, stage))
            bar.update()
    pairs = compare_stages(stages, results, tolerance)
    device = next((device_run(s) for s in stages if s.kind == "device"), None)
    shapes = {}
    for stage in reversed(stages):  # the earliest stage's shape wins: the reference's
        shapes.update({name: tuple(np.shape(value)) for name, value in results[stage.kind].items()})
    page = Page(model_name(stages), stages, args.input, feeds, pairs, layer_graph(stages, results), shapes, device)
    page.shown_pair = default_pair(pairs)
    text = render_page(page)
    try:
        write_atomic(output, lambda f: f.write(text.encode("utf-8")), binary=True)
    except OSError as err:
        raise ReportError(f"-o {output}: cannot write ({err.strerror}); check that its folder is writable") from err
    for pair in pairs:
        print(f"{pair.title}: {pair.summary}")
    print(f"wrote {output} ({len(page.tensor_names())} tensors, {len(page.graph.layers)} layers)")
    return 0 if all(p.ok for p in pairs) else 1
