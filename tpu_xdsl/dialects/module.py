"""Queries of a TOP or TPU module, the one home every layer asks: the @main function, its
input ops and the names of its inputs and outputs, the tensor names an op's `names`
attribute gives its results, and absent operands."""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import Operation, OpResult, SSAValue

from tpu_xdsl.errors import TpuXdslError


def main_func(module: ModuleOp) -> func.FuncOp:
    """The module's `func.func @main`."""
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == "main":
            return op
    raise TpuXdslError("the module has no func.func @main")


def input_ops(module: ModuleOp) -> list[Operation]:
    """The `top.input` ops in argument order."""
    main = main_func(module)
    by_arg = {}
    for op in main.body.block.ops:
        if op.name == "top.input":
            by_arg[main.body.block.args.index(op.operands[0])] = op
    return [by_arg[i] for i in sorted(by_arg)]


def input_names(module: ModuleOp) -> list[str]:
    """@main's inputs by name, in argument order (`inputN` where a `top.input` names none)."""
    main = main_func(module)
    names = {}
    for op in input_ops(module):
        arg = main.body.block.args.index(op.operands[0])
        names[arg] = (tensor_names(op) or [f"input{arg}"])[0]
    return [names.get(i, f"input{i}") for i in range(len(main.body.block.args))]


def output_names(module: ModuleOp) -> list[str]:
    """The names of the values @main returns, in order (`outputN` for an unnamed one)."""
    main = main_func(module)
    ret = main.body.block.last_op
    assert ret is not None
    names = []
    for i, value in enumerate(ret.operands):
        # An op's result is named by its op; a returned block argument is not named.
        owned, index = [], 0
        if isinstance(value, OpResult):
            owned, index = tensor_names(value.owner), value.index
        names.append(owned[index] if index < len(owned) else f"output{i}")
    return names


def names_of(op: Operation) -> ArrayAttr | None:
    """The op's `names` attribute (the tensor names of its results), None without one."""
    names = op.attributes.get("names")
    return names if isinstance(names, ArrayAttr) else None


def tensor_names(op: Operation) -> list[str]:
    """The tensor names of an op's results, or [] when unnamed."""
    names = names_of(op)
    return [] if names is None else [n.data for n in names.data if isinstance(n, StringAttr)]


def rename_result(value: SSAValue, name: str) -> None:
    """Give the result `value` of its op the tensor name `name` (other results keep theirs)."""
    owner = value.owner
    assert isinstance(owner, Operation)
    names = tensor_names(owner)
    index = owner.results.index(value)
    names += [f"{name}_unnamed{k}" for k in range(len(names), index + 1)]
    names[index] = name
    owner.attributes["names"] = ArrayAttr([StringAttr(n) for n in names])


def tensor_name(op: Operation, fallback: str = "tensor") -> str:
    """The tensor name of the op's first result (the base of names derived from it)."""
    names = tensor_names(op)
    return names[0] if names else fallback


def is_none(value: SSAValue) -> bool:
    """Whether `value` is an absent operand (the result of a `top.none`)."""
    owner = value.owner
    return isinstance(owner, Operation) and owner.name == "top.none"
