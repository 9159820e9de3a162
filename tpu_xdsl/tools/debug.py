"""`tpu-xdsl debug`: step through a model's stages side by side (in the spirit of TPU-MLIR's tdb).

    tpu-xdsl debug STAGE_FILE... --input FILE [--stage KIND] [--script FILE] [--tolerance C,E]

The stage files are any of the model's: the `.onnx`, the TOP `.mlir` (transform), the TPU
`.mlir` (deploy) and the `.tpumodel` (deploy -o x.tpumodel). One of them is *stepped*, by
default the last in the flow: a TOP or TPU module op by op on the xDSL interpreter (a
listener holds the interpreter before each op), a `.tpumodel` instruction by instruction
on the device model (its program's steps, in simulated time). The other stages run whole
the first time a command needs them, and serve as references: each stage is checked
against the nearest loaded stage before it (ONNX < TOP < TPU < device).

Commands (`help CMD` says more): run, step [n], next, continue, break, delete, where, list,
print, compare, diff, info, stage, quit. Tab completes commands and tensor names; the
history is kept in ~/.tpu_xdsl_history (or $TPU_XDSL_HISTORY). `--script FILE` runs the
commands in FILE, echoing each, for tests and bug reports; a command that fails makes the
exit code 2.
"""

from __future__ import annotations

import argparse
import cmd
import difflib
import os
import queue
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.inspect.stages import (
    SILENT_OPS,
    Stage,
    align_feeds,
    check_feeds,
    default_tolerance,
    load_stages,
    read_feeds,
    reference_of,
)
from tpu_xdsl.interp.compare import (
    Tolerance,
    compare_all,
    compare_tensors,
    format_table,
)

PROMPT = "(tdb) "
# The commands in the order 'help' lists them; the one-letter aliases are not listed.
COMMANDS = ("run", "step", "next", "continue", "break", "delete", "where", "list", "print", "compare", "diff",
            "info", "stage", "help", "quit")
HISTORY_ENV = "TPU_XDSL_HISTORY"


class DebugError(TpuXdslError):
    """A debugger command that cannot be done; the session goes on."""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "debug", help="step through a model's stages (ONNX, TOP, TPU, .tpumodel) and compare tensors as they appear"
    )
    p.add_argument("stages", nargs="+", metavar="STAGE_FILE",
                   help="the model's .onnx, TOP .mlir, TPU .mlir and/or .tpumodel, any subset")
    p.add_argument("--input", required=True, help="the input: .npz by input name, .npy, or an image")
    p.add_argument("--stage", choices=("top", "tpu", "device"),
                   help="the stage to step (default: the last loaded in the flow)")
    p.add_argument("--script", metavar="FILE", help="run the commands in FILE instead of reading the terminal")
    p.add_argument("--tolerance", help="min cosine,euclidean for every stage pair (default: deploy's for each pair)")
    p.set_defaults(func=debug)


# --- where a stepped stage can stop ---------------------------------------------------


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


class _Abort(BaseException):
    """Unwinds a stepped interpreter thread that the session no longer needs."""


class InterpreterCursor:
    """A TOP or TPU module run on the xDSL interpreter in a thread of its own; a listener
    stops the thread before each op until the session says go. Not a second executor:
    the same ModuleRunner as `run`, with one more listener."""

    def __init__(self, stage: Stage, feeds: Mapping[str, np.ndarray], ops: list, points: list[Point]):
        self.stage = stage
        self.ops, self.points = ops, points
        self._index = {id(op): i for i, op in enumerate(self.ops)}
        self.tensors: dict[str, np.ndarray] = {}
        self.order: list[str] = []
        self.position = 0
        self.finished = False
        self.error: BaseException | None = None
        self._go = threading.Semaphore(0)
        self._events: queue.Queue = queue.Queue()
        self._abort = False
        self._feeds = feeds
        self._thread = threading.Thread(target=self._work, daemon=True)
        self._thread.start()
        self._wait()

    # The interpreter's thread.
    def _work(self) -> None:
        from xdsl.interpreter import Interpreter

        from tpu_xdsl.dialects.module import tensor_names
        from tpu_xdsl.interp.runner import ModuleRunner

        cursor = self

        class Hold(Interpreter.Listener):
            def will_interpret_op(self, op, args) -> None:
                index = cursor._index.get(id(op))
                if index is None:
                    return
                cursor._events.put(("before", index))
                cursor._go.acquire()
                if cursor._abort:
                    raise _Abort

            def did_interpret_op(self, op, results) -> None:
                if id(op) not in cursor._index:
                    return
                for name, value in zip(tensor_names(op), results):
                    if value is not None:
                        if name not in cursor.tensors:
                            cursor.order.append(name)
                        cursor.tensors[name] = np.asarray(value)

        try:
            outputs = ModuleRunner(self.stage.handle, self.stage.weights).run(self._feeds, [Hold()])
            for name, value in outputs.items():
                if name not in self.tensors:
                    self.order.append(name)
                self.tensors[name] = value
            self._events.put(("done", None))
        except _Abort:
            self._events.put(("aborted", None))
        except Exception as e:  # noqa: BLE001 (an op that fails: the session reports it and stays usable)
            self._events.put(("error", e))

    def _wait(self) -> None:
        event, value = self._events.get()
        if event == "before":
            self.position = value
        else:
            self.finished = True
            self.position = len(self.points)
            self.error = value if event == "error" else None

    def advance(self) -> list[str]:
        """Run the op the cursor is before; the names of the tensors it completed."""
        before = len(self.order)
        self._go.release()
        try:
            self._wait()
        except KeyboardInterrupt:
            self._wait()  # Ctrl-C during an op: let the op finish, so the cursor stays in step
            raise
        return self.order[before:]

    def close(self) -> None:
        if not self.finished:
            self._abort = True
            self._go.release()
            self._thread.join(timeout=10)
            self.finished = True

    def current_detail(self) -> list[str]:
        if self.finished:
            return []
        op = self.ops[self.position]
        text = str(op)
        return [line for line in text.splitlines()[:3]] if "\n" in text else [text[:400]]


def _op_text(op, names: Sequence[str]) -> str:
    shapes = []
    for result in op.results:
        get_shape = getattr(result.type, "get_shape", None)
        element = getattr(result.type, "element_type", None)
        if get_shape is not None:
            shapes.append("x".join(map(str, get_shape())) + (f" {element}" if element is not None else ""))
    produced = ", ".join(names) if names else "-"
    return f"{op.name} -> {produced}" + (f"  [{'; '.join(shapes)}]" if shapes else "")


class DeviceCursor:
    """A .tpumodel on the device model, one instruction at a time: the program's own
    steps (`Program.steps`), in the order the instructions finish in simulated time."""

    def __init__(self, stage: Stage, feeds: Mapping[str, np.ndarray], points: list[Point]):
        self.stage = stage
        self.loaded = stage.loaded
        self._completes = self.loaded.completed_by()
        self.points = points
        self.instructions = {i.id: i for i in stage.handle.instructions}
        self.tensors: dict[str, np.ndarray] = {}
        self.order: list[str] = []
        self.position = 0
        self.finished = False
        self.error: BaseException | None = None
        self.loaded.start(feeds)
        self._steps = self.loaded.program.steps()
        self._next()

    def _next(self) -> None:
        try:
            index = next(self._steps)
        except KeyboardInterrupt:
            # The program stopped inside an instruction: it cannot go on from there.
            self.finished, self.position = True, len(self.points)
            self.error = DebugError("interrupted inside an instruction; 'run' starts again")
            raise
        except StopIteration:
            self.finished = True
            self.position = len(self.points)
            for desc in self.stage.handle.outputs:
                if desc.name not in self.tensors:
                    self.order.append(desc.name)
                    self.tensors[desc.name] = self.loaded.read(desc)
            return
        assert self.points[self.position].index == index, "the program's steps follow the schedule"

    def advance(self) -> list[str]:
        point = self.points[self.position]
        self.position += 1
        self._next()  # resuming the generator does this instruction's write
        done = []
        for desc in self._completes.get(point.index, ()):
            self.tensors[desc.name] = self.loaded.read(desc)
            if desc.name not in self.order:
                self.order.append(desc.name)
            done.append(desc.name)
        return done

    def close(self) -> None:
        self._steps.close()
        self.finished = True

    def current_detail(self) -> list[str]:
        if self.finished:
            return []
        instruction = self.instructions[self.points[self.position].index]
        lines = [f"engine {instruction.engine}, waits for {list(instruction.deps) or 'nothing'}"]
        if hasattr(instruction, "macs"):
            lines.append(f"MACs {instruction.macs}, attrs {instruction.attrs}")
        for field_name in ("src", "dst"):
            value = getattr(instruction, field_name, None)
            if value is not None:
                lines.append(f"{field_name}: {value}")
        for field_name in ("inputs", "outputs"):
            for k, value in enumerate(getattr(instruction, field_name, ()) or ()):
                lines.append(f"{field_name}[{k}]: {value}")
        return lines


# --- the session -----------------------------------------------------------------------


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
        return reference_of(self.stages, self.stepped)

    def tolerance(self, stage: Stage) -> Tolerance:
        reference = reference_of(self.stages, stage)
        if self.tolerance_override or reference is None:
            return self.tolerance_override or Tolerance.parse("0.99,0.99")
        return default_tolerance(reference, stage)

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


def _parse_index(text: str) -> tuple:
    """A numpy index like `0,:3,2,1:5` (brackets optional); ints and slices only."""
    text = text.strip().removeprefix("[").removesuffix("]")
    parts = []
    for part in text.split(","):
        part = part.strip()
        try:
            if ":" in part:
                bounds = [int(b) if b.strip() else None for b in part.split(":")]
                if len(bounds) > 3:
                    raise ValueError
                parts.append(slice(*bounds))
            elif part == "...":
                parts.append(Ellipsis)
            else:
                parts.append(int(part))
        except ValueError:
            raise DebugError(f"index [{text}]: give ints and slices, e.g. print NAME 0,:4,0,0") from None
    return tuple(parts)


def _stats(value: np.ndarray) -> str:
    if value.size == 0:
        return "empty"
    v = value.astype(np.float64)
    return f"min {v.min():.6g}  max {v.max():.6g}  mean {v.mean():.6g}  std {v.std():.6g}"


def _similarity(row) -> str:
    if row.problem:
        return row.problem
    if row.exact is not None:
        return "equal" if row.exact else f"differ (max |d| {row.max_abs_diff:.3g})"
    sqnr = "inf" if row.sqnr_db == float("inf") else f"{row.sqnr_db:.2f}"
    return f"cosine {row.cosine:.6f}  euclid {row.euclidean:.6f}  sqnr {sqnr} dB  max|d| {row.max_abs_diff:.3g}"


class Debugger(cmd.Cmd):
    """The command loop (the standard library's cmd: help, completion, history with readline)."""

    prompt = PROMPT
    intro = None

    def __init__(self, session: Session, stdin=None, stdout=None, echo: bool = False):
        super().__init__(stdin=stdin, stdout=stdout)
        self.session = session
        self.echo = echo
        self.failures: list[str] = []
        if stdin is not None:
            self.use_rawinput = False

    # cmd.Cmd plumbing ---------------------------------------------------------------------
    def say(self, text: str = "") -> None:
        self.stdout.write(text + "\n")

    def precmd(self, line: str) -> str:
        if self.echo and line.strip() and line != "EOF":
            self.say(f"{PROMPT}{line}")
        return line

    def onecmd(self, line: str) -> bool:
        try:
            return bool(super().onecmd(line))
        except TpuXdslError as e:
            message = str(e)
            self.failures.append(f"'{line.strip()}': {message}")
            self.say(f"error: {message}")
            return False

    def emptyline(self) -> bool:
        return False  # not gdb's "repeat the last command": a stray Enter must not step

    def default(self, line: str) -> bool:
        word = line.split()[0]
        if word == "EOF":
            self.say()
            return True
        known = list(COMMANDS)
        close = difflib.get_close_matches(word, known, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else "; 'help' lists the commands"
        raise DebugError(f"unknown command '{word}'{hint}")

    def completedefault(self, text, line, begidx, endidx) -> list[str]:
        words = dict.fromkeys([*self.session.tensor_names(), *self.session.op_types(), "diverge", "all"])
        return [w for w in words if w.startswith(text)]

    def complete_info(self, text, *ignored) -> list[str]:
        return [w for w in ("stages", "break", "memory") if w.startswith(text)]

    def complete_stage(self, text, *ignored) -> list[str]:
        return [s.kind for s in self.session.stages if s.kind != "onnx" and s.kind.startswith(text)]

    def completenames(self, text, *ignored) -> list[str]:
        return [n for n in COMMANDS if n.startswith(text)]

    def do_help(self, arg: str) -> None:
        """help [COMMAND]: the commands, or what one does."""
        if arg.strip():
            super().do_help(arg)
            return
        for name in COMMANDS:
            usage, _, text = " ".join((getattr(self, f"do_{name}").__doc__ or "").split()).partition(": ")
            self.say(f"  {usage:<48} {text.split('; ')[0].split(', or')[0].rstrip('.')}")
        self.say("Tab completes commands and tensor names; 'help COMMAND' says more.")

    def get_names(self) -> list[str]:
        return [n for n in super().get_names() if not n.startswith("do_") or n[3:] in COMMANDS]

    # helpers ------------------------------------------------------------------------------
    def _cursor(self):
        session = self.session
        if session.cursor is None:
            session.restart()
            self.say(f"started {session.stepped.label} on {len(session.points)} "
                     f"{'instructions' if session.stepped.kind == 'device' else 'ops'}")
        return session.cursor

    def _where_line(self) -> str:
        session = self.session
        cursor = session.cursor
        unit = "instruction" if session.stepped.kind == "device" else "op"
        if cursor is None:
            return f"{session.stepped.label}: not started; 'run' starts it, 'step' runs its first {unit}"
        if cursor.finished:
            if cursor.error is not None:
                return f"{session.stepped.label}: stopped by an error: {cursor.error}"
            return f"{session.stepped.label}: finished; {len(cursor.order)} tensors computed"
        point = cursor.points[cursor.position]
        return (f"{session.stepped.label}: before {unit} #{point.index} (step {cursor.position + 1} of "
                f"{len(cursor.points)}): {point.text}")

    def _breakpoint_hit(self, point: Point) -> str | None:
        for number, spec in enumerate(self.session.breakpoints, 1):
            if spec == "diverge":
                continue
            if point.stops_for(spec):
                return f"breakpoint {number} ({spec})"
        return None

    def _diverged(self, names: list[str]) -> str | None:
        if "diverge" not in self.session.breakpoints:
            return None
        reference_stage = self.session.reference()
        if reference_stage is None:
            return None
        reference = self.session.full_run(reference_stage)
        tolerance = self.session.tolerance(self.session.stepped)
        real = self.session.stepped.real_values({n: self.session.cursor.tensors[n] for n in names})
        for name in names:
            if name in reference:
                row = compare_tensors(name, reference[name], real[name])
                if not row.passes(tolerance):
                    return (f"'{name}' diverges from {reference_stage.label}: {_similarity(row)} "
                            f"(tolerance {tolerance.cosine}, {tolerance.euclidean})")
        return None

    def _go(self, count: int | None, until: int | None = None) -> None:
        """Run `count` ops/instructions, or (None) until a breakpoint, position `until` or the end."""
        cursor = self._cursor()
        ran = 0
        try:
            while not cursor.finished and (until is None or cursor.position < until):
                if count is None and ran and (hit := self._breakpoint_hit(cursor.points[cursor.position])):
                    self.say(f"stopped at {hit}")
                    break
                done = cursor.advance()
                ran += 1
                if (message := self._diverged(done)) is not None:
                    self.say(f"stopped: {message}")
                    break
                if count is not None and ran >= count:
                    break
        except KeyboardInterrupt:  # Ctrl-C stops a long 'continue' where it is, as in gdb
            self.say("interrupted")
        self.say(self._where_line())

    # commands -----------------------------------------------------------------------------
    def do_run(self, arg: str) -> None:
        """run: start the stepped stage again from its first op and go to a breakpoint or the end."""
        self.session.close()
        self.session.cursor = None
        self._cursor()
        cursor = self.session.cursor
        if cursor.points and not cursor.finished and (hit := self._breakpoint_hit(cursor.points[0])):
            self.say(f"stopped at {hit}")
            self.say(self._where_line())
            return
        self._go(None)

    def do_continue(self, arg: str) -> None:
        """continue (c): go on to the next breakpoint or the end."""
        self._go(None)

    do_c = do_continue

    def do_step(self, arg: str) -> None:
        """step [n] (s): run the next n ops (TOP/TPU) or instructions (device); default 1."""
        count = 1
        if arg.strip():
            try:
                count = int(arg)
            except ValueError:
                raise DebugError(f"step {arg}: give a number of steps, e.g. step 5") from None
            if count < 1:
                raise DebugError(f"step {arg}: give a positive number of steps")
        self._go(count)

    do_s = do_step

    def do_next(self, arg: str) -> None:
        """next (n): run the next op (TOP/TPU) or instruction (device); before a layer group,
        the whole group (stopping at a breakpoint inside it), where 'step' goes into it."""
        if arg.strip():
            raise DebugError("next takes no argument; 'step N' runs N")
        cursor = self._cursor()
        point = None if cursor.finished else cursor.points[cursor.position]
        if point is not None and point.after is not None:
            self._go(None, until=point.after)
        else:
            self._go(1)

    do_n = do_next

    def do_break(self, arg: str) -> None:
        """break [TENSOR | OP-TYPE | INDEX | diverge] (b): stop before the op or instruction that
        makes TENSOR, before every op of a type (conv, tpu.conv, DmaLoad), before instruction
        INDEX (device) or op INDEX (TOP/TPU, as 'list' numbers them from 0), or, with
        'diverge', after the first tensor that falls below the tolerance against the reference
        stage. Without an argument: the breakpoints."""
        spec = arg.strip()
        session = self.session
        if not spec:
            if not session.breakpoints:
                self.say("no breakpoints")
            for number, bp in enumerate(session.breakpoints, 1):
                self.say(f"{number}: {bp}")
            return
        points = session.points
        known = (
            spec == "diverge"
            or any(p.stops_for(spec) for p in points)
        )
        if not known:
            close = difflib.get_close_matches(spec, [*session.tensor_names(), *session.op_types()], n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise DebugError(f"break {spec}: no tensor, op type or index of {session.stepped.label} is '{spec}'{hint}")
        if spec == "diverge" and session.reference() is None:
            raise DebugError(f"break diverge: {session.stepped.label} has no reference stage; load one before it")
        if spec not in session.breakpoints:
            session.breakpoints.append(spec)
        self.say(f"breakpoint {session.breakpoints.index(spec) + 1}: {spec}")

    do_b = do_break

    def do_delete(self, arg: str) -> None:
        """delete [N | all]: remove breakpoint N (as 'break' numbers them), or all."""
        spec = arg.strip() or "all"
        if spec == "all":
            self.session.breakpoints.clear()
            self.say("deleted all breakpoints")
            return
        if not spec.isdigit() or not 1 <= int(spec) <= len(self.session.breakpoints):
            raise DebugError(f"delete {spec}: no breakpoint {spec}; 'break' lists them")
        removed = self.session.breakpoints.pop(int(spec) - 1)
        self.say(f"deleted breakpoint {spec} ({removed})")

    def do_where(self, arg: str) -> None:
        """where: the stepped stage and the op or instruction it stopped before."""
        self.say(self._where_line())

    def do_list(self, arg: str) -> None:
        """list [N | all]: the ops or instructions around the current one (N each side, default 5)."""
        session = self.session
        cursor = self._cursor()
        points = cursor.points
        if arg.strip() == "all":
            low, high = 0, len(points)
        else:
            try:
                span = int(arg) if arg.strip() else 5
            except ValueError:
                raise DebugError(f"list {arg}: give a number of lines each side, or 'all'") from None
            low, high = max(0, cursor.position - span), min(len(points), cursor.position + span + 1)
        for k in range(low, high):
            point = points[k]
            mark = "=>" if k == cursor.position else "  "
            stop = "*" if any(point.stops_for(b) for b in session.breakpoints if b != "diverge") else " "
            self.say(f"{mark}{stop} #{point.index:<5} {point.text}")
        if cursor.finished:
            self.say("=>  (end)")

    def _tensor(self, name: str) -> np.ndarray:
        session = self.session
        cursor = self._cursor()
        if name in cursor.tensors:
            return cursor.tensors[name]
        if (why := session.local_only(session.stepped, name)) is not None:
            raise DebugError(f"{why}; compare it in the TPU stage ('stage tpu')")
        maker = next((k for k, p in enumerate(cursor.points) if name in p.names), None)
        if maker is not None:
            raise DebugError(
                f"'{name}' is not computed yet in {session.stepped.label} (made by #{cursor.points[maker].index} "
                f"{cursor.points[maker].kind}); 'break {name}' and 'continue', then 'next'"
            )
        close = difflib.get_close_matches(name, session.tensor_names(), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else "; 'list all' shows the tensors"
        raise DebugError(f"no tensor '{name}' in {session.stepped.label}{hint}")

    def do_print(self, arg: str) -> None:
        """print TENSOR [INDEX] (p): shape, dtype, statistics and values of a tensor of the stepped
        stage (INT8 tensors also as the real values they stand for); INDEX is numpy's, e.g.
        0,:4,0,0."""
        parts = arg.split(None, 1)
        if not parts:
            raise DebugError("print TENSOR [INDEX]: name a tensor (Tab completes)")
        name = parts[0]
        raw = self._tensor(name)
        real = self.session.stepped.real_values({name: raw})[name]
        index = _parse_index(parts[1]) if len(parts) > 1 else None
        self.say(f"{name}: shape {list(raw.shape)} {raw.dtype} ({self.session.stepped.label})")
        self.say(f"  {_stats(raw)}")
        quantized = real is not raw and real.dtype != raw.dtype
        if quantized:
            self.say(f"  real values: {_stats(real)}")
        shown = real if quantized else raw
        try:
            part = shown[index] if index is not None else shown
        except IndexError as e:
            raise DebugError(f"print {name} {parts[1]}: {e}") from None
        with np.printoptions(threshold=64, edgeitems=3, precision=5, suppress=True, linewidth=100):
            label = f"[{parts[1].strip('[]')}]" if index is not None else ""
            self.say(f"  {name}{label} = {np.array2string(np.asarray(part), prefix='  ')}")

    do_p = do_print

    def do_compare(self, arg: str) -> None:
        """compare TENSOR: the tensor in every loaded stage side by side, each against the
        stage before it (the stepped stage as far as it has run)."""
        name = arg.strip()
        if not name:
            raise DebugError("compare TENSOR: name a tensor (Tab completes)")
        session = self.session
        values: dict[str, np.ndarray] = {}
        for stage in session.stages:
            if stage is session.stepped:
                so_far = session.so_far()
                if name in so_far:
                    values[stage.label] = so_far[name]
            else:
                run = session.full_run(stage)
                if name in run:
                    values[stage.label] = run[name]
        if not values:
            self._tensor(name)  # says why: not computed yet, or no such tensor
        self.say(f"{name}:")
        previous = None
        for stage in session.stages:
            if stage.label not in values:
                why = session.local_only(stage, name) or (
                    "not computed yet" if stage is session.stepped else "no such tensor in this stage")
                self.say(f"  {stage.label:<16} {why}")
                continue
            value = values[stage.label]
            line = f"  {stage.label:<16} {list(value.shape)!s:<18} {_stats(value)}"
            if previous is not None:
                row = compare_tensors(name, values[previous.label], value)
                verdict = "ok" if row.passes(session.tolerance(stage)) else "FAIL"
                line += f"\n  {'':<16} vs {previous.label}: {_similarity(row)}  {verdict}"
            self.say(line)
            previous = stage

    def do_diff(self, arg: str) -> None:
        """diff [N | all]: every tensor the stepped stage has computed so far against its
        reference stage, worst first (the N worst, default 10), and the first tensor in
        execution order that falls below the tolerance."""
        session = self.session
        reference_stage = session.reference()
        if reference_stage is None:
            raise DebugError(f"diff: {session.stepped.label} has no reference stage; load one before it in the flow")
        text = arg.strip()
        if text and text != "all" and not text.isdigit():
            raise DebugError(f"diff {text}: give a number of tensors, or 'all'")
        so_far = session.so_far()
        if not so_far:
            raise DebugError(f"diff: {session.stepped.label} has computed nothing yet; 'run' or 'step' first")
        rows = compare_all(session.full_run(reference_stage), so_far)
        if not rows:
            raise DebugError(f"diff: no tensor of {session.stepped.label} so far is in {reference_stage.label}")
        tolerance = session.tolerance(session.stepped)
        failing = [r for r in rows if not r.passes(tolerance)]

        def badness(row):
            if row.problem:
                return (0, 0.0)
            if row.exact is not None:
                return (1 if not row.exact else 3, 0.0)
            return (2, row.cosine)

        worst = sorted(rows, key=badness)
        shown = worst if text == "all" else worst[: int(text) if text else 10]
        title = (f"{reference_stage.label} (reference) vs {session.stepped.label}: {len(rows)} tensors so far, "
                 f"worst first")
        self.say(format_table(shown, tolerance, title))
        if failing:
            first = failing[0]
            maker = next((p for p in session.points if first.name in p.names), None)
            made = f", made by {maker.kind}" if maker else ""
            self.say(f"{len(failing)} below tolerance ({tolerance.cosine}, {tolerance.euclidean}); "
                     f"first diverging tensor: {first.name}{made}: {_similarity(first)}")
        else:
            self.say(f"all {len(rows)} within tolerance ({tolerance.cosine}, {tolerance.euclidean})")

    def do_info(self, arg: str) -> None:
        """info [stages | break | memory]: the stages, chip and mode, the current op or
        instruction; 'memory' the stepped .tpumodel's memory map."""
        session = self.session
        what = arg.strip()
        if what in ("break", "breakpoints"):
            self.do_break("")
            return
        if what not in ("", "stages", "memory"):
            raise DebugError(f"info {what}: give nothing, 'stages', 'break' or 'memory'")
        if what == "memory" and session.stepped.kind != "device":
            raise DebugError("info memory: only a .tpumodel has a memory map; step the device stage")
        if what in ("", "stages"):
            for stage in session.stages:
                mark = "stepped" if stage is session.stepped else "reference" if stage is session.reference() else ""
                self.say(f"{stage.describe()}{f'  [{mark}]' if mark else ''}")
            if what == "stages":
                return
        stage = session.stepped
        if stage.kind == "device":
            model = stage.handle
            self.say(f"chip {model.chip}, mode {model.mode}, {len(model.instructions)} instructions, "
                     f"DDR {model.ddr_bytes} bytes (coefficients {len(model.coefficients)})")
        else:
            from xdsl.dialects.builtin import StringAttr

            attrs = {k.removeprefix("module."): v.data for k, v in stage.handle.attributes.items()
                     if isinstance(v, StringAttr)}
            self.say(", ".join(f"{k} {v}" for k, v in attrs.items() if k in ("state", "chip", "mode", "quantization")))
        if stage.kind == "device" and what in ("", "memory"):
            from tpu_xdsl.device.model_file import memory_map_lines

            for line in memory_map_lines(stage.handle):
                self.say(line)
        if what == "":
            self.say(self._where_line())
            cursor = session.cursor
            if cursor is not None:
                for line in cursor.current_detail():
                    self.say(f"  {line}")

    def do_stage(self, arg: str) -> None:
        """stage [top | tpu | device]: step another loaded stage (from its start)."""
        session = self.session
        kind = arg.strip().lower()
        if not kind:
            self.say(f"stepping {session.stepped.label}")
            return
        choices = [s for s in session.stages if s.kind == kind and s.kind != "onnx"]
        if not choices:
            loaded = ", ".join(s.kind for s in session.stages if s.kind != "onnx")
            raise DebugError(f"stage {kind}: no such stage to step; loaded: {loaded}")
        session.step(choices[0])
        self.say(f"stepping {session.stepped.label}")

    def do_quit(self, arg: str) -> bool:
        """quit (q): leave the debugger."""
        return True

    do_q = do_quit
    do_exit = do_quit


def _history_file() -> Path:
    return Path(os.environ.get(HISTORY_ENV) or Path.home() / ".tpu_xdsl_history")


def _interactive(debugger: Debugger) -> None:
    """The loop on a terminal, with readline's history and completion."""
    try:
        import readline
    except ImportError:  # no readline on this Python: plain input()
        debugger.cmdloop()
        return
    readline.set_completer_delims(" \t\n")
    history = _history_file()
    try:
        readline.read_history_file(history)
    except OSError:
        pass
    readline.set_history_length(1000)
    try:
        debugger.cmdloop()
    finally:
        try:
            readline.write_history_file(history)
        except OSError:
            pass


def debug(args: argparse.Namespace) -> int:
    from tpu_xdsl.errors import UsageError

    stages = load_stages(args.stages)
    tolerance = Tolerance.parse(args.tolerance) if args.tolerance else None
    steppable = [s for s in stages if s.kind != "onnx"]
    if not steppable:
        raise UsageError("debug steps a TOP or TPU .mlir or a .tpumodel; give one besides the .onnx")
    if args.stage:
        chosen = [s for s in steppable if s.kind == args.stage]
        if not chosen:
            raise UsageError(f"--stage {args.stage}: no {args.stage} stage among the files given")
        stepped = chosen[0]
    else:
        stepped = steppable[-1]
    script = None
    if args.script:
        file = Path(args.script)
        if not file.is_file():
            raise UsageError(f"--script {args.script}: no such file; give a file of debugger commands, one a line")
        try:
            script = file.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--script {args.script}: cannot read it ({e})") from e
    feeds = read_feeds(args.input, stages)
    check_feeds(feeds, stages, args.input)
    session = Session(stages, feeds, stepped, tolerance)
    for stage in stages:
        print(stage.describe() + ("  [stepped]" if stage is stepped else ""))
    print(f"input {args.input}; 'help' lists the commands")
    try:
        if script is not None:
            debugger = Debugger(session, echo=True)
            for line in script:
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                if debugger.onecmd(debugger.precmd(line.strip())):
                    break
        else:
            debugger = Debugger(session)
            if sys.stdin.isatty():
                _interactive(debugger)
            else:
                debugger.cmdloop()
    finally:
        session.close()
    if script is not None and debugger.failures:
        raise UsageError(
            f"--script {args.script}: {len(debugger.failures)} command(s) failed; first {debugger.failures[0]}"
        )
    return 0
