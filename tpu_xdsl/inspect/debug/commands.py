"""The debugger's commands (run, step, next, continue, break, delete, where, list, print,
compare, diff, info, stage, help, quit) on the standard library's cmd loop; `help CMD`
shows each command's docstring."""

from __future__ import annotations

import cmd
import difflib
from typing import Any

import numpy as np

from tpu_xdsl.device.model_file import memory_map_lines
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.inspect.debug.cursors import DebugError, DeviceCursor, InterpreterCursor
from tpu_xdsl.inspect.debug.points import Point
from tpu_xdsl.inspect.debug.session import Session
from tpu_xdsl.inspect.stages import WHOLE_RUN_KINDS, reference_of
from tpu_xdsl.interp.compare import compare_all, compare_tensors, format_table

PROMPT = "(tdb) "
# The commands in the order 'help' lists them; the one-letter aliases are not listed.
COMMANDS = ("run", "step", "next", "continue", "break", "delete", "where", "list", "print", "compare", "diff",
            "info", "stage", "help", "quit")


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

    # cmd.Cmd.onecmd returns default()'s result as its stop flag (True ends the loop at EOF);
    # typeshed declares default() -> None, so the override's bool is flagged.
    def default(self, line: str) -> bool:  # pyright: ignore[reportIncompatibleMethodOverride]
        word = line.split()[0]
        if word == "EOF":
            self.say()
            return True
        known = list(COMMANDS)
        close = difflib.get_close_matches(word, known, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else "; 'help' lists the commands"
        raise DebugError(f"unknown command '{word}'{hint}")

    def completedefault(self, *args: Any) -> list[str]:
        """Completes tensor names, op types, 'diverge' and 'all'; cmd passes (text, line, begidx, endidx)."""
        text = args[0]
        words = dict.fromkeys([*self.session.tensor_names(), *self.session.op_types(), "diverge", "all"])
        return [w for w in words if w.startswith(text)]

    def complete_info(self, text, *ignored) -> list[str]:
        return [w for w in ("stages", "break", "memory") if w.startswith(text)]

    def complete_stage(self, text, *ignored) -> list[str]:
        return [s.kind for s in self.session.stages if s.kind not in WHOLE_RUN_KINDS and s.kind.startswith(text)]

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
    def _cursor(self) -> InterpreterCursor | DeviceCursor:
        """The stepped stage's cursor, started (and announced) if it is not yet."""
        session = self.session
        if session.cursor is None:
            session.restart()
            self.say(f"started {session.stepped.label} on {len(session.points)} "
                     f"{'instructions' if session.stepped.kind == 'device' else 'ops'}")
        assert session.cursor is not None, "Session.restart always sets a cursor"
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
        cursor = self._cursor()
        real = self.session.stepped.real_values({n: cursor.tensors[n] for n in names})
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
        cursor = self._cursor()
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
        stage before it (a TOSA export against its source; the stepped stage as far as it
        has run)."""
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
            # a TOSA export against the stage it came from, the others against the one before
            reference = reference_of(session.stages, stage)
            base = reference if reference is not None and reference.label in values else previous
            if base is not None:
                row = compare_tensors(name, values[base.label], value)
                verdict = "ok" if row.passes(session.tolerance(stage)) else "FAIL"
                line += f"\n  {'':<16} vs {base.label}: {_similarity(row)}  {verdict}"
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
        choices = [s for s in session.stages if s.kind == kind and s.kind not in WHOLE_RUN_KINDS]
        if not choices:
            loaded = ", ".join(s.kind for s in session.stages if s.kind not in WHOLE_RUN_KINDS)
            raise DebugError(f"stage {kind}: no such stage to step; loaded: {loaded}")
        session.step(choices[0])
        self.say(f"stepping {session.stepped.label}")

    def do_quit(self, arg: str) -> bool:
        """quit (q): leave the debugger."""
        return True

    do_q = do_quit
    do_exit = do_quit
