"""What the report's page is built from: each stage compared with its reference
(`StagePair`), the device stage's schedule and profile (`DeviceRun`), and the `Page`
that holds them with the layer graph, the input and the tensors' shapes."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tpu_xdsl.device.runtime import profile_rows
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.inspect.layer_graph import LayerGraph, layer_graph
from tpu_xdsl.inspect.stages import Stage, default_tolerance, reference_of
from tpu_xdsl.interp.compare import TensorComparison, Tolerance, compare_all, summarize


class ReportError(TpuXdslError):
    """A `report` argument is unusable: the output path, or stages that do not compare."""


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
    """Each stage against its reference, by tensor name, to `tolerance` or the pair's default."""
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


@dataclass
class DeviceRun:
    """The device stage's schedule: the model, its timeline, profile rows and chip."""

    model: Any  # TpuModel
    timeline: Any  # Timeline
    rows: list  # ProfileRow
    chip: Any  # ChipConfig


def device_run(stage: Stage) -> DeviceRun:
    """The compiled model's schedule (the same on every input) and its profile rows."""
    loaded = stage.loaded
    return DeviceRun(stage.handle, loaded.timeline, profile_rows(stage.handle, loaded.timeline), loaded.chip)


def default_pair(pairs: Sequence[StagePair]) -> int:
    """The pair the graph shows first: the one with the lowest cosine."""
    if not pairs:
        return 0

    def lowest(pair: StagePair) -> float:
        return min((-math.inf if r.problem else r.cosine for r in pair.rows.values()), default=1.0)

    return min(range(len(pairs)), key=lambda i: (lowest(pairs[i]), -i))


@dataclass
class Page:
    """What the page is built from."""

    model_name: str
    stages: list[Stage]
    input_path: str
    feeds: Mapping[str, np.ndarray]
    pairs: list[StagePair]
    graph: LayerGraph
    shapes: dict[str, tuple[int, ...]]
    device: DeviceRun | None
    shown_pair: int = 0

    def tensor_names(self) -> list[str]:
        """Every tensor of the graph and of a comparison, in program order."""
        names = [n for layer in self.graph.layers for n in layer.names]
        seen = set(names)
        for pair in self.pairs:
            for name in pair.rows:
                if name not in seen:
                    seen.add(name)
                    names.append(name)
        return names


def model_name(stages: Sequence[Stage]) -> str:
    for stage in stages:
        if stage.kind in ("top", "tpu", "tosa"):
            name = stage.handle.attributes.get("module.name")
            if name is not None:
                return name.data
        if stage.kind == "device":
            return stage.handle.name
    return stages[0].path.stem


def chip_and_mode(stages: Sequence[Stage]) -> tuple[str, str]:
    for stage in reversed(stages):
        if stage.kind == "device":
            return stage.handle.chip, stage.handle.mode
        if stage.kind == "tpu":
            chip = stage.handle.attributes.get("module.chip")
            return getattr(chip, "data", "?"), stage.mode or "?"
    return "none (no TPU stage)", "F32"


def build_page(
    stages: Sequence[Stage],
    input_path: str,
    feeds: Mapping[str, np.ndarray],
    results: Mapping[str, Mapping[str, np.ndarray]],
    tolerance: Tolerance | None,
) -> Page:
    """The page of `stages` run on one input (`results`: every tensor by stage kind), each
    stage compared with its reference; the graph shows the worst pair first."""
    pairs = compare_stages(stages, results, tolerance)
    device = next((device_run(s) for s in stages if s.kind == "device"), None)
    shapes = {}
    for stage in reversed(stages):  # the earliest stage's shape wins: the reference's
        shapes.update({name: tuple(np.shape(value)) for name, value in results[stage.kind].items()})
    graph = layer_graph(stages, results)
    page = Page(model_name(stages), list(stages), input_path, feeds, pairs, graph, shapes, device)
    page.shown_pair = default_pair(pairs)
    return page
