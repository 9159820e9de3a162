"""What an import rule sees of one ONNX node (`NodeContext`): its inputs, constants,
attributes and shapes, and how it emits TOP ops; and what an import returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import helper
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import SSAValue

from tpu_xdsl.frontend.onnx_model import (
    F32,
    ImportRuleError,
    OnnxValue,
)

if TYPE_CHECKING:
    from tpu_xdsl.frontend.onnx_importer import OnnxImporter


@dataclass
class ImportResult:
    module: ModuleOp
    weights: dict[str, np.ndarray]
    input_names: list[str]
    output_names: list[str]
    # What the user should know about the import (inputs bound to constants, ...).
    notes: list[str] = field(default_factory=list)
    # Model inputs imported as constants, with their values.
    constant_inputs: dict[str, np.ndarray] = field(default_factory=dict)


class NodeContext:
    """What an import rule sees of one ONNX node, and how it emits TOP ops."""

    def __init__(self, importer: OnnxImporter, node: onnx.NodeProto, opset: int):
        self.importer = importer
        self.node = node
        self.opset = opset
        try:
            self._attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        except Exception as e:  # a type the model's validation let through: still the model's fault
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise ImportRuleError(f"{self.where}: an attribute cannot be read ({reason})") from e
        self._emitted = 0

    # -- reading the node ----------------------------------------------------------

    @property
    def op_type(self) -> str:
        return self.node.op_type

    @property
    def where(self) -> str:
        name = self.node.name or (self.node.output[0] if self.node.output else "?")
        return f"node '{name}' ({self.node.op_type}, opset {self.opset})"

    def error(self, message: str) -> ImportRuleError:
        return ImportRuleError(f"{self.where}: {message}")

    @property
    def num_inputs(self) -> int:
        return len(self.node.input)

    @property
    def num_outputs(self) -> int:
        return len(self.node.output)

    def has_input(self, i: int) -> bool:
        return i < len(self.node.input) and self.node.input[i] != ""

    def has_output(self, i: int) -> bool:
        return i < len(self.node.output) and self.node.output[i] != ""

    def value(self, i: int) -> OnnxValue:
        if not self.has_input(i):
            raise self.error(f"input {i} is required")
        return self.importer.values[self.node.input[i]]

    def const(self, i: int) -> np.ndarray | None:
        """The constant value of input i, or None when absent or computed at run time."""
        if not self.has_input(i):
            return None
        return self.importer.values[self.node.input[i]].const

    def require_const(self, i: int, what: str) -> np.ndarray:
        if not self.has_input(i):
            raise self.error(f"{what} (input {i}) is required")
        value = self.const(i)
        if value is None:
            raise self.importer.not_constant_error(self, self.node.input[i], f"{what} (input {i})")
        return value

    def shape(self, i: int) -> tuple[int, ...]:
        return self.value(i).shape

    def rank(self, i: int) -> int:
        return len(self.value(i).shape)

    def dtype(self, i: int) -> np.dtype:
        return self.value(i).dtype

    def attr(self, name: str, default: Any = None) -> Any:
        """Attribute `name`, or `default` when absent. With a default, the attribute must be of
        its kind (an int, a float, a string or a list): a rule never sees a list where it asked
        for an int (the ONNX schema check of `frontend.validate` covers ONNX's own ops; this
        covers the others)."""
        if name not in self._attrs:
            return default
        value = self._attrs[name]
        try:
            if isinstance(value, bytes):
                value = value.decode()
            elif isinstance(value, list) and value and isinstance(value[0], bytes):
                value = [v.decode() for v in value]
        except UnicodeDecodeError:
            raise self.error(f"attribute '{name}' is not valid UTF-8 text") from None
        if default is not None and not _same_kind(value, default):
            raise self.error(
                f"attribute '{name}' must be {_kind_name(default)}, the model gives {_kind_name(value)}"
            )
        return value

    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def output_name(self, i: int = 0) -> str:
        return self.node.output[i]

    # -- emitting ops ------------------------------------------------------------------

    def input(self, i: int, dtype: np.dtype | None = F32) -> SSAValue:
        """Input i as a TOP value (a `top.weight` for a constant, `top.none` when absent).

        With `dtype` set (f32 by default), a value of another dtype is converted:
        constants at import, run-time values by a `top.cast`.
        """
        if not self.has_input(i):
            return self.importer.none_value()
        return self.importer.ssa(self.node.input[i], dtype)

    def emit(
        self,
        kind: str,
        operands: Sequence[SSAValue | Sequence[SSAValue]],
        attrs: Mapping[str, Any] | None = None,
        *,
        shapes_: Sequence[Sequence[int]] | None = None,
        dtypes: Sequence[np.dtype] | None = None,
        name: str | None = None,
    ) -> list[SSAValue]:
        """Emit an intermediate `top.<kind>`; its tensors get derived names."""
        base = name or f"{self.output_name(0)}_{kind}"
        return self.importer.emit(kind, operands, attrs, shapes_, dtypes, None, base)

    def output(
        self,
        kind: str,
        operands: Sequence[SSAValue | Sequence[SSAValue]],
        attrs: Mapping[str, Any] | None = None,
        *,
        shapes_: Sequence[Sequence[int]] | None = None,
        dtypes: Sequence[np.dtype] | None = None,
    ) -> list[SSAValue]:
        """Emit `top.<kind>` whose results are this node's outputs, under the ONNX names."""
        names = list(self.node.output)
        results = self.importer.emit(kind, operands, attrs, shapes_, dtypes, names, None)
        for name, result in zip(names, results):
            if name and isinstance(result.type, TensorType):
                self.importer.define(name, result)
        return results

    def constant(self, array: np.ndarray, tag: str) -> SSAValue:
        """A `top.weight` for a constant the rule computes, under a fresh derived name."""
        array = np.asarray(array)
        name = self.importer.unique_name(f"{self.output_name(0)}_{tag}", reserve=False)
        return self.importer.weight(name, array)

    def set_output(self, i: int, value: SSAValue) -> None:
        """Make an already emitted value the node's output i (its name stays)."""
        self.importer.define(self.node.output[i], value)

    def set_const(self, i: int, value: np.ndarray) -> None:
        """Make output i a constant known at import."""
        self.importer.define_const(self.node.output[i], np.asarray(value))


def _kind(value: Any) -> str:
    if isinstance(value, bool | int | np.integer):
        return "int"
    if isinstance(value, float | np.floating):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__


def _same_kind(value: Any, default: Any) -> bool:
    kind, want = _kind(value), _kind(default)
    # An int where a float is asked for is a float of that value.
    return kind == want or (want == "float" and kind == "int")


def _kind_name(value: Any) -> str:
    kind = _kind(value)
    return {"int": "an int", "float": "a float", "string": "a string", "list": "a list"}.get(kind, kind)
