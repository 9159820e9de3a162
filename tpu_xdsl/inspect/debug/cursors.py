"""Cursors: a stage run one op (TOP/TPU, on the xDSL interpreter) or one instruction
(.tpumodel, on the device model) at a time, the tensors it completed kept by name."""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping

import numpy as np

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.inspect.debug.points import Point
from tpu_xdsl.inspect.stages import Stage


class DebugError(TpuXdslError):
    """A debugger command that cannot be done; the session goes on."""


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

        # delays the dialects and the xDSL interpreter: device sessions run no IR
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
        # steps() is a generator: close() stops it mid-program.
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
