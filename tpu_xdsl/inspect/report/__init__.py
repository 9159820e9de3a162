"""The page behind `tpu-xdsl report`: one self-contained HTML file (inline CSS, SVG and a
little JavaScript, nothing from the network) of a model's stages run on one input.

- `model`: the stages compared pair by pair, the device's schedule, the `Page`;
- `format`: colors by cosine and by layer group, numbers as text and sort keys;
- `svg`: the layer graph (placed by `inspect.layered_layout`) and its legend;
- `tables`: the header, every tensor per pair, the device's layer-group profile;
- `timeline`: the DMA and compute engines over simulated time;
- `assets`: the inline style sheet and script;
- `render`: the sections put together, with the data the script reads.
"""

from tpu_xdsl.inspect.report.format import (
    COSINE_BINS,
    MISMATCH,
    NOT_COMPARED,
    cosine_color,
)
from tpu_xdsl.inspect.report.model import (
    DeviceRun,
    Page,
    ReportError,
    StagePair,
    build_page,
    compare_stages,
    default_pair,
    device_run,
    model_name,
)
from tpu_xdsl.inspect.report.render import render_page

__all__ = [
    "COSINE_BINS",
    "MISMATCH",
    "NOT_COMPARED",
    "DeviceRun",
    "Page",
    "ReportError",
    "StagePair",
    "build_page",
    "compare_stages",
    "cosine_color",
    "default_pair",
    "device_run",
    "model_name",
    "render_page",
]
