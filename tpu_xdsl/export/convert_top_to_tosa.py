"""`convert-top-to-tosa`: a TOP module (F32) becomes a TOSA 1.0 module that upstream MLIR
tools and IREE read.

- @main keeps the model's interface: its inputs and outputs in the source layout (NCHW) and
  element types, each named by a `tpu.name` argument or result attribute (the tensor names
  every stage's results are keyed by).
- Weights become `tosa.const` ops with their exact bytes (hex in the printed text).
- Convolutions and pools work channels-last; transposes appear only where a value changes
  layout (see `tosa_builder`), so a conv chain holds none between its convs.
- The module keeps the source's `module.*` attributes (name, preprocessing), with
  module.state TOSA_<mode> and module.source_state the state it came from.
- Every op that cannot be exported is named, all at once, in one line (`ExportError`): the
  kinds without a rule, else every op a rule refuses (with its reason) that does not
  depend on another refused op.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from xdsl.context import Context as XdslContext
from xdsl.dialects import func
from xdsl.dialects.builtin import DictionaryAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass

from tpu_xdsl.dialects.attr_values import op_attrs
from tpu_xdsl.dialects.module import input_names, main_func, output_names, tensor_names
from tpu_xdsl.export.rules import RULES, Context, ExportError, Rule
from tpu_xdsl.export.tosa_builder import Builder, Val, numpy_dtype
from tpu_xdsl.weights import in_element_type, weights_of

# Ops that only carry a value through: the model's inputs and absent operands.
_PASSTHROUGH = {"input", "none"}


def unsupported_ops(module: ModuleOp, rules: Mapping[str, Rule] = RULES) -> list[str]:
    """The kinds of @main's ops the export has no rule for, in order of first use."""
    missing: list[str] = []
    for op in main_func(module).body.block.ops:
        dialect, _, kind = op.name.partition(".")
        known = kind in rules or kind in _PASSTHROUGH or kind == "weight"
        if dialect in ("top", "tpu") and not known and op.name not in missing:
            missing.append(op.name)
    return missing


def export_tosa(
    module: ModuleOp, weights: Mapping[str, np.ndarray] | None = None, rules: Mapping[str, Rule] = RULES
) -> ModuleOp:
    """A new TOSA module computing what `module`'s @main computes, each op by the rule of its
    kind in `rules` (convert-tpu-to-tosa passes the TPU dialect's own)."""
    missing = unsupported_ops(module, rules)
    if missing:
        raise ExportError(
            f"cannot export to TOSA: no TOSA form for {', '.join(missing)}; docs/tosa.md lists what exports"
        )
    store = weights if weights is not None else weights_of(module)
    main = main_func(module)
    arg_types = list(main.function_type.inputs.data)
    block = Block(arg_types=arg_types)
    builder = Builder(block)
    ctx = Context(builder)
    values: dict[SSAValue, Val] = {}
    # Ops a rule refuses (one-line reasons), all named at once; their results, and what is
    # computed from them, are not exported further.
    reasons: list[str] = []
    refused: set[SSAValue] = set()
    for arg, new in zip(main.body.block.args, block.args, strict=True):
        kind = arg.type
        assert isinstance(kind, TensorType)
        values[arg] = Val(tuple(kind.get_shape()), kind.element_type, value=new)
    ret = main.body.block.last_op
    assert ret is not None
    for op in main.body.block.ops:
        if op is ret:
            break
        kind = op.name.partition(".")[2]
        if kind == "input":
            values[op.results[0]] = values[op.operands[0]]
            continue
        if kind == "none":
            values[op.results[0]] = Val((), op.results[0].type)
            continue
        if kind == "weight":
            result = op.results[0].type
            assert isinstance(result, TensorType)
            array = np.asarray(store[_weight_name(op)])
            values[op.results[0]] = Val(tuple(result.get_shape()), result.element_type,
                                        const=in_element_type(array, numpy_dtype(result.element_type)))
            continue
        if any(v in refused for v in op.operands):  # downstream of a refused op: not checked
            refused.update(op.results)
            continue
        inputs = [values[v] for v in op.operands]
        try:
            outs = rules[kind](ctx, op, inputs, op_attrs(op))
        except ExportError as e:
            named = tensor_names(op)
            reasons.append(f"{e} (at {named[0]})" if named else str(e))
            refused.update(op.results)
            continue
        for result, val in zip(op.results, outs, strict=True):
            values[result] = val
    if reasons:
        raise ExportError("; ".join(reasons) if len(reasons) == 1 else f"cannot export to TOSA: {'; '.join(reasons)}")
    returned = [builder.logical(values[v]) for v in ret.operands]
    block.add_op(func.ReturnOp(*returned))
    result_types = [v.type for v in returned]
    new_main = func.FuncOp("main", (arg_types, result_types), Region(block))
    new_main.arg_attrs = _names_attr(input_names(module))  # pyright: ignore[reportAttributeAccessIssue]
    new_main.res_attrs = _names_attr(output_names(module))  # pyright: ignore[reportAttributeAccessIssue]
    out = ModuleOp([new_main])
    for name, attr in module.attributes.items():
        if name.startswith("module.") and name not in ("module.weight_file",):
            out.attributes[name] = attr
    state = module.attributes.get("module.state")
    source = state.data if isinstance(state, StringAttr) else "TOP_F32"
    out.attributes["module.source_state"] = StringAttr(source)
    out.attributes["module.state"] = StringAttr(f"TOSA_{_mode(module, source)}")
    return out


def _mode(module: ModuleOp, state: str) -> str:
    mode = module.attributes.get("module.mode")
    if isinstance(mode, StringAttr):
        return mode.data
    return state.rpartition("_")[2] if "_" in state else "F32"


def _weight_name(op) -> str:
    from tpu_xdsl.weights import weight_name

    return weight_name(op)


def _names_attr(names: list[str]):
    from xdsl.dialects.builtin import ArrayAttr

    return ArrayAttr([DictionaryAttr({"tpu.name": StringAttr(name)}) for name in names])


class ConvertTopToTosa(ModulePass):
    """Replace the TOP @main by its TOSA form (weights from the module's weight file)."""

    name = "convert-top-to-tosa"

    def apply(self, ctx: XdslContext, op: ModuleOp) -> None:
        replace_module(op, export_tosa(op))


def replace_module(module: ModuleOp, exported: ModuleOp) -> None:
    """Give `module` the body and `module.*` attributes of its export (a pass rewrites in place)."""
    for child in list(module.body.block.ops):
        child.detach()
        child.erase(safe_erase=False)
    for child in list(exported.body.block.ops):
        child.detach()
        module.body.block.add_op(child)
    for name in list(module.attributes):
        if name.startswith("module."):
            del module.attributes[name]
    module.attributes.update(exported.attributes)
