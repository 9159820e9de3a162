"""A debugging session: the loaded stages, the input, the stepped stage's cursor, the
breakpoints and the whole runs of the reference stages (each run once)."""

from __future__ import annotations

import numpy as np

from tpu_xdsl.inspect.debug.cursors import DeviceCursor, InterpreterCursor
from tpu_xdsl.inspect.debug.points import device_points, module_points
from tpu_xdsl.inspect.stages import Stage, align_feeds, default_tolerance, reference_of
from tpu_xdsl.interp.compare import Tolerance


class Session:
    """The stages, the input, the stepped stage's cursor, breakpoints and the references."""

    def __init__(self, stages: list[Stage], feeds: dict[str, np.ndarray], stepped: Stage,
                 tolerance: Tolerance | None = None):
        self.stages = stages
        self.feeds = feeds
        self.tolerance_override = tolerance
        self.cursor: InterpreterCursor | DeviceCursor | None = None
        self.breakpoints: list[str] = []
        self.full_runs: dict[str, dict[str, np.ndarray]] = {}
        self.step(stepped)

    def step(self, stage: Stage) -> None:
        """Step `stage` from now on (not started): its ops or instructions in the order they run."""
        self.close()
        self.cursor = None
        self.stepped = stage
        if stage.kind == "device":
            self.ops: list = []
            self.points = device_points(stage.handle, stage.loaded.timeline, stage.loaded.completed_by())
        else:
            self.ops, self.points = module_points(stage.handle)

    def tensor_names(self) -> list[str]:
        names: dict[str, None] = {}
        for point in self.points:
            names.update(dict.fromkeys((*point.names, *point.marks)))
        for values in self.full_runs.values():
            names.update(dict.fromkeys(values))
        return list(names)

    def op_types(self) -> list[str]:
        kinds: dict[str, None] = {}
        for point in self.points:
            kinds[point.kind.split()[-1].split(".")[-1]] = None
        return list(kinds)

    def local_only(self, stage: Stage, name: str) -> str | None:
        """Why a device tensor is never in DDR (a layer group keeps it in local memory)."""
        if stage.kind != "device" or any(d.name == name for d in (*stage.handle.tensors, *stage.handle.outputs)):
            return None
        for index, group in enumerate(stage.handle.groups):
            if name in group.ops:
                return f"layer group {index} keeps '{name}' in local memory; it is never in DDR"
        return None

    def reference(self) -> Stage | None:
        """What the stepped stage is checked against: the stage before it in the flow, else
        a loaded TOSA export (its final outputs only)."""
        return reference_of(self.stages, self.stepped) or self._tosa_reference(self.stepped)

    def _tosa_reference(self, stage: Stage) -> Stage | None:
        return next((s for s in self.stages if s.kind == "tosa" and s is not stage and stage.kind != "tosa"), None)

    def tolerance(self, stage: Stage) -> Tolerance:
        if self.tolerance_override:
            return self.tolerance_override
        reference = reference_of(self.stages, stage)
        if reference is not None:
            return default_tolerance(reference, stage)
        tosa = self._tosa_reference(stage)
        if tosa is not None:  # the pair's tolerance, whichever way round it is checked
            return default_tolerance(stage, tosa)
        return Tolerance.parse("0.99,0.99")

    def full_run(self, stage: Stage) -> dict[str, np.ndarray]:
        """Every tensor of a whole run of `stage` (real values), run once per session."""
        if stage.label not in self.full_runs:
            self.full_runs[stage.label] = stage.run(align_feeds(self.feeds, stage))
        return self.full_runs[stage.label]

    def restart(self) -> None:
        if self.cursor is not None:
            self.cursor.close()
        feeds = align_feeds(self.feeds, self.stepped)
        if self.stepped.kind == "device":
            self.cursor = DeviceCursor(self.stepped, feeds, self.points)
        else:
            self.cursor = InterpreterCursor(self.stepped, feeds, self.ops, self.points)

    def so_far(self) -> dict[str, np.ndarray]:
        """The stepped stage's tensors computed so far, as real values, in execution order."""
        if self.cursor is None:
            return {}
        return self.stepped.real_values({name: self.cursor.tensors[name] for name in self.cursor.order})

    def close(self) -> None:
        if self.cursor is not None:
            self.cursor.close()
