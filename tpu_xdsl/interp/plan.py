"""An execution plan of @main: each op bound once to its kernel, parsed attributes,
result specs and operand slots (weights read once), run many times without xDSL's
interpreter dispatch.

A plan computes what `Interpreter.call_op("main", ...)` with the interpreter functions
of `runner.ModuleRunner` computes, with the same kernels on the same arrays, and calls
listeners the way the interpreter does: `will_interpret_op(op, args)` and
`did_interpret_op(op, results)` for every op (a `tpu.group` around its region's ops,
`func.return` with no results). Modules with ops it does not know (calls, control
flow) get no plan (`ExecutionPlan.build` returns None) and run in the interpreter.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.interpreter import Interpreter
from xdsl.ir import Block, Operation, SSAValue

from tpu_xdsl.dialects.attr_values import op_attrs
from tpu_xdsl.interp.top_interpreter import (
    ModelRounding,
    TopFunctions,
    checked_outputs,
    result_specs,
)
from tpu_xdsl.kernels import Kernel, load_all
from tpu_xdsl.kernels.tpu import TPU_KERNELS

_TOP_KERNELS = load_all()
_PASS_THROUGH = ("tpu.load", "tpu.store")

# A step's computation: its operands' values -> its results' values.
Compute = Callable[[tuple[Any, ...]], tuple[Any, ...]]


@dataclass
class _Step:
    op: Operation
    compute: Compute | None  # None: a tpu.group, whose region runs as `body`
    operands: tuple[int, ...]
    results: tuple[int, ...]
    body: list[_Step] | None = None
    returned: tuple[int, ...] = ()  # a group's yielded slots
    is_kernel: bool = False


def _kernel_of(op: Operation) -> Kernel | None:
    dialect, _, kind = op.name.partition(".")
    if dialect == "top":
        return _TOP_KERNELS.get(kind)
    if dialect == "tpu":
        return TPU_KERNELS.get(kind)
    return None


def _bind_kernel(kernel: Kernel, op: Operation, rounding: ModelRounding | None) -> Compute:
    """`kernel` on `op`'s attributes and result specs, parsed once; as the interpreter
    function of `op` computes it (`top_interpreter.make_functions`)."""
    attrs = op_attrs(op)
    specs = result_specs(op)

    if rounding is None:

        def compute(args: tuple[Any, ...]) -> tuple[Any, ...]:
            return checked_outputs(op, specs, kernel(list(args), attrs, specs))

        return compute

    def compute_rounded(args: tuple[Any, ...]) -> tuple[Any, ...]:
        outputs = checked_outputs(op, specs, kernel(list(rounding(op, args)), attrs, specs))
        return rounding.returned(op, outputs)

    return compute_rounded


class ExecutionPlan:
    """@main's ops as bound steps over numbered value slots."""

    def __init__(self, steps: list[_Step], slot_count: int, args: tuple[int, ...], returned: tuple[int, ...],
                 return_op: Operation):
        self.steps = steps
        self.slot_count = slot_count
        self.args = args
        self.returned = returned
        self.return_op = return_op
        self.op_count = _count(steps) + 1

    @staticmethod
    def build(block: Block, top: TopFunctions) -> ExecutionPlan | None:
        """The plan of @main's `block`, weights read from `top` once; None when an op is
        not one the plan runs."""
        slots: dict[SSAValue, int] = {}

        def slot(value: SSAValue) -> int:
            return slots.setdefault(value, len(slots))

        args = tuple(slot(a) for a in block.args)
        rounding = top.model_rounding

        def steps_of(ops: Sequence[Operation]) -> list[_Step] | None:
            steps = []
            for op in ops:
                step = step_of(op)
                if step is None:
                    return None
                steps.append(step)
            return steps

        def step_of(op: Operation) -> _Step | None:
            operands = tuple(slot(v) for v in op.operands)
            if op.name == "tpu.group":
                body = list(op.regions[0].block.ops) if len(op.regions) == 1 and op.regions[0].blocks else []
                if not body or body[-1].name != "tpu.yield" or op.regions[0].block.args:
                    return None
                inner = steps_of(body[:-1])
                if inner is None:
                    return None
                returned = tuple(slot(v) for v in body[-1].operands)
                results = tuple(slot(r) for r in op.results)
                return _Step(op, None, operands, results, inner, returned)
            if op.regions:
                return None
            results = tuple(slot(r) for r in op.results)
            if op.name == "top.weight":
                value = top.weight_value(op)
                return _Step(op, lambda _args, value=value: (value,), operands, results)
            if op.name == "top.none":
                return _Step(op, lambda _args: (None,), operands, results)
            if op.name == "top.input":
                dtype = result_specs(op)[0].dtype
                return _Step(op, lambda a, dtype=dtype: (np.asarray(a[0]).astype(dtype, copy=False),),
                             operands, results)
            if op.name in _PASS_THROUGH:
                return _Step(op, lambda a: tuple(a), operands, results)
            kernel = _kernel_of(op)
            if kernel is None:
                return None
            return _Step(op, _bind_kernel(kernel, op, rounding if op.name.startswith("top.") else None),
                         operands, results, is_kernel=True)

        ops = list(block.ops)
        if not ops or ops[-1].name != "func.return":
            return None
        steps = steps_of(ops[:-1])
        if steps is None:
            return None
        returned = tuple(slot(v) for v in ops[-1].operands)
        return ExecutionPlan(steps, len(slots), args, returned, ops[-1])

    def run(self, args: Sequence[Any], listeners: Sequence[Interpreter.Listener] = ()) -> tuple[Any, ...]:
        """@main's results on `args` (arrays in argument order)."""
        values: list[Any] = [None] * self.slot_count
        for index, value in zip(self.args, args, strict=True):
            values[index] = value
        if listeners:
            _run_listened(self.steps, values, tuple(listeners))
            for listener in listeners:
                listener.will_interpret_op(self.return_op, tuple(values[i] for i in self.returned))
                listener.did_interpret_op(self.return_op, ())
        else:
            _run(self.steps, values)
        return tuple(values[i] for i in self.returned)

    def timed_run(self, args: Sequence[Any]) -> tuple[float, float]:
        """One run on `args`: (its seconds, the seconds spent in kernels); the rest is the
        per-op overhead of the plan."""
        values: list[Any] = [None] * self.slot_count
        for index, value in zip(self.args, args, strict=True):
            values[index] = value
        start = time.perf_counter()
        in_kernels = _run_timed(self.steps, values)
        return time.perf_counter() - start, in_kernels


def _count(steps: list[_Step]) -> int:
    return sum(1 + (_count(s.body) + 1 if s.body is not None else 0) for s in steps)


def _run(steps: list[_Step], values: list[Any]) -> None:
    for step in steps:
        if step.compute is None:
            assert step.body is not None
            _run(step.body, values)
            outputs = tuple(values[i] for i in step.returned)
        else:
            outputs = step.compute(tuple(values[i] for i in step.operands))
        for index, value in zip(step.results, outputs, strict=True):
            values[index] = value


def _run_listened(steps: list[_Step], values: list[Any], listeners: tuple[Interpreter.Listener, ...]) -> None:
    for step in steps:
        args = tuple(values[i] for i in step.operands)
        for listener in listeners:
            listener.will_interpret_op(step.op, args)
        if step.compute is None:
            assert step.body is not None
            _run_listened(step.body, values, listeners)
            returned = tuple(values[i] for i in step.returned)
            yield_op = step.op.regions[0].block.last_op
            assert yield_op is not None
            for listener in listeners:
                listener.will_interpret_op(yield_op, returned)
                listener.did_interpret_op(yield_op, ())
            outputs = returned
        else:
            outputs = step.compute(args)
        for index, value in zip(step.results, outputs, strict=True):
            values[index] = value
        for listener in listeners:
            listener.did_interpret_op(step.op, outputs)


def _run_timed(steps: list[_Step], values: list[Any]) -> float:
    spent = 0.0
    for step in steps:
        if step.compute is None:
            assert step.body is not None
            spent += _run_timed(step.body, values)
            outputs = tuple(values[i] for i in step.returned)
        else:
            args = tuple(values[i] for i in step.operands)
            start = time.perf_counter()
            outputs = step.compute(args)
            if step.is_kernel:
                spent += time.perf_counter() - start
        for index, value in zip(step.results, outputs, strict=True):
            values[index] = value
    return spent
