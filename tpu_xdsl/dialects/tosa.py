"""The TOSA dialect the export writes: the ops of irdl/tosa.irdl with the verify hooks of
`tosa_rules`, plus the Python attributes of `tosa_attrs`. Built on first import, apart from
TOP and TPU, so that only the export and the TOSA stage pay for it. It replaces xDSL's own
`tosa` dialect in the project's contexts (tpu-opt, `ir_io`): xDSL 0.74's lacks most of the
ops and prints a form IREE does not read."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.ir import Dialect
from xdsl.irdl import IRDLOperation

from tpu_xdsl.dialects import _load
from tpu_xdsl.dialects.tosa_attrs import TOSA_ATTRIBUTES
from tpu_xdsl.dialects.tosa_rules import VERIFY_HOOKS


def _build() -> Dialect:
    context = Context()
    context.load_dialect(Builtin)
    for attribute in TOSA_ATTRIBUTES:
        context.load_attr_or_type(attribute)
    loaded = _load("tosa.irdl", context, VERIFY_HOOKS, {})
    return Dialect("tosa", list(loaded.operations), [*loaded.attributes, *TOSA_ATTRIBUTES])


Tosa = _build()
OPS: dict[str, type[IRDLOperation]] = {
    op.name.removeprefix("tosa."): op for op in Tosa.operations if issubclass(op, IRDLOperation)
}


def op_class(name: str) -> type[IRDLOperation]:
    """The class of a TOSA op by its short name ("conv2d")."""
    return OPS[name]


__all__ = ["OPS", "Tosa", "op_class"]
