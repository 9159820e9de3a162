"""Where a stepped stage can stop: a TOP/TPU module's ops in execution order (a layer
group's member ops included) or a .tpumodel's instructions in the order their writes happen
in simulated time. Breakpoints match these points by tensor, op type or index."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tpu_xdsl.inspect.stages import SILENT_OPS


@dataclass(frozen=True)
class Point:
    """A place a stepped stage stops before: an op (TOP/TPU) or an instruction (device).
    `index` is the op's position in execution order, or the instruction's id; `kind` the op
    name ("tpu.conv") or the instruction ("Compute conv", "DmaLoad"); `names` the tensors
    it completes; `text` one line for `where` and `list`."""

    index: int
    kind: str
    names: tuple[str, ...]
    text: str
    marks: tuple[str, ...] = ()
    after: int | None = None  # for a tpu.group: the index just past its member ops

    def stops_for(self, spec: str) -> bool:
        """A breakpoint `spec` (tensor, op type or index) holds before this point."""
        return (spec in self.names or spec in self.marks or self.matches_type(spec)
                or (spec.isdigit() and int(spec) == self.index))

    def matches_type(self, word: str) -> bool:
        word = word.lower()
        kinds = {self.kind.lower(), *self.kind.lower().split()}
        kinds |= {k.split(".", 1)[1] for k in list(kinds) if "." in k}
        return word in kinds


def module_points(module) -> tuple[list, list[Point]]:
    """The ops of @main that run, nested ones (layer groups) included, in execution order."""
    # delays xDSL and the dialects: device sessions read no IR
    from tpu_xdsl.dialects.module import main_func, tensor_names

    ops = [op for op in main_func(module).walk() if op.name not in SILENT_OPS]
    index = {id(op): i for i, op in enumerate(ops)}
    points = []
    for i, op in enumerate(ops):
        names = tuple(tensor_names(op))
        if op.name != "tpu.group":
            points.append(Point(i, op.name, names, _op_text(op, names)))
            continue
        # A layer group yields tensors its member ops make: a tensor breakpoint stops at the
        # member; `next` runs the whole group.
        members = [index[id(inner)] for inner in op.walk() if id(inner) in index and inner is not op]
        points.append(Point(i, op.name, (), _op_text(op, names) + f"  ({len(members)} ops)",
                            after=max(members, default=i) + 1))
    return ops, points


def device_points(model, timeline, completes) -> list[Point]:
    """The instructions in the order their writes happen in simulated time. A tensor
    breakpoint stops before the write that completes the tensor in DDR or, for a tensor a
    layer group keeps in local memory, before its layer's first instruction."""
    in_ddr = {d.name for d in (*model.tensors, *model.outputs)}
    seen: set[str] = set()
    points = []
    for item in sorted(timeline.scheduled, key=lambda s: (s.finish, s.instruction.id)):
        instruction = item.instruction
        kind = type(instruction).__name__ + (f" {instruction.kind}" if hasattr(instruction, "kind") else "")
        names = tuple(d.name for d in completes.get(instruction.id, ()))
        marks = ()
        if instruction.layer and instruction.layer not in in_ddr and instruction.layer not in seen:
            marks = (instruction.layer,)
        seen.add(instruction.layer)
        where = f" group {instruction.group}" if instruction.group >= 0 else ""
        done = f" -> {', '.join(names)}" if names else ""
        text = (f"{kind} ({instruction.engine}, cycles {item.start}-{item.finish}) layer {instruction.layer}"
                f"{where}{done}")
        points.append(Point(instruction.id, kind, names, text, marks))
    return points


def _op_text(op, names: Sequence[str]) -> str:
    shapes = []
    for result in op.results:
        get_shape = getattr(result.type, "get_shape", None)
        element = getattr(result.type, "element_type", None)
        if get_shape is not None:
            shapes.append("x".join(map(str, get_shape())) + (f" {element}" if element is not None else ""))
    produced = ", ".join(names) if names else "-"
    return f"{op.name} -> {produced}" + (f"  [{'; '.join(shapes)}]" if shapes else "")
