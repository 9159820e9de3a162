"""The constraints the generated classes verify with, beyond xDSL's own: `FieldConstraint`
(errors name the op, the field and the value) and `FirstOf` (IRDL's `any_of`), and the
readable descriptions of constraints their messages use."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import builtin
from xdsl.dialects.builtin import ArrayOfConstraint
from xdsl.ir import (
    Attribute,
)
from xdsl.irdl import (
    AnyAttr,
    AttrConstraint,
    BaseAttr,
    EqAttrConstraint,
    ParamAttrConstraint,
    VarConstraint,
)
from xdsl.irdl.constraints import (
    ConstraintContext,
    InferenceContext,
    VerificationContext,
)
from xdsl.utils.exceptions import VerifyException


@dataclass(frozen=True, init=False)
class FieldConstraint(AttrConstraint):
    """A constraint on one named field of an op; its errors name op, field, value."""

    constr: AttrConstraint
    op_name: str
    field_kind: str
    field_name: str

    def __init__(
        self, constr: AttrConstraint, op_name: str, field_kind: str, field_name: str
    ):
        object.__setattr__(self, "constr", constr)
        object.__setattr__(self, "op_name", op_name)
        object.__setattr__(self, "field_kind", field_kind)
        object.__setattr__(self, "field_name", field_name)

    def verify(self, attr: Attribute, constraint_context: ConstraintContext) -> None:
        try:
            self.constr.verify(attr, constraint_context)
        except VerifyException as e:
            where = f"'{self.op_name}' {self.field_kind} '{self.field_name}' has invalid value {attr}"
            if _satisfies_alone(self.constr, attr):
                # Fine on its own: it differs from another field bound to the same variable.
                raise VerifyException(f"{where}: {_variable_message(str(e.args[0]))}") from e
            raise VerifyException(f"{where}: expected {_describe(self.constr)}") from e

    def variables(self) -> set[str]:
        return self.constr.variables()

    def get_bases(self) -> set[type[Attribute]] | None:
        return self.constr.get_bases()

    def can_infer(self, var_constraint_names: Any) -> bool:
        return self.constr.can_infer(var_constraint_names)

    def infer(self, context: InferenceContext) -> Attribute:
        return self.constr.infer(context)

    def mapping_type_vars(self, type_var_mapping: Any) -> FieldConstraint:
        return FieldConstraint(
            self.constr.mapping_type_vars(type_var_mapping),
            self.op_name,
            self.field_kind,
            self.field_name,
        )


@dataclass(frozen=True, init=False)
class FirstOf(AttrConstraint):
    """IRDL's `any_of`: the first alternative that verifies.

    xDSL's `AnyOf` requires alternatives with distinct base classes, which rules
    out the everyday `any_of(i8, i32)`. Alternatives run on a copy of the
    constraint variables so a failed branch binds nothing.
    """

    alternatives: tuple[AttrConstraint, ...]

    def __init__(self, alternatives: Sequence[AttrConstraint]):
        object.__setattr__(self, "alternatives", tuple(alternatives))

    def verify(self, attr: Attribute, constraint_context: VerificationContext) -> None:
        for alternative in self.alternatives:
            trial = _copy_context(constraint_context)
            try:
                alternative.verify(attr, trial)
            except VerifyException:
                continue
            _merge_context(constraint_context, trial)
            return
        raise VerifyException(
            f"{attr} satisfies none of {', '.join(map(_describe, self.alternatives))}"
        )

    def variables(self) -> set[str]:
        common = [a.variables() for a in self.alternatives]
        return set.intersection(*common) if common else set()

    def get_bases(self) -> set[type[Attribute]] | None:
        bases: set[type[Attribute]] = set()
        for alternative in self.alternatives:
            b = alternative.get_bases()
            if b is None:
                return None
            bases |= b
        return bases

    def mapping_type_vars(self, type_var_mapping: Any) -> FirstOf:
        return FirstOf([a.mapping_type_vars(type_var_mapping) for a in self.alternatives])


def _copy_context(context: VerificationContext) -> VerificationContext:
    # VerificationContext has no public copy; its three maps are its whole state.
    return VerificationContext(
        dict(context._variables),  # pyright: ignore[reportPrivateUsage]
        dict(context._range_variables),  # pyright: ignore[reportPrivateUsage]
        dict(context._int_variables),  # pyright: ignore[reportPrivateUsage]
    )


def _merge_context(context: VerificationContext, trial: VerificationContext) -> None:
    for key in trial.attr_variables - context.attr_variables:
        context.set_attr_variable(key, trial.get_variable(key))  # type: ignore[arg-type]
    for key in trial.range_variables - context.range_variables:
        context.set_range_variable(key, trial.get_range_variable(key))  # type: ignore[arg-type]
    for key in trial.int_variables - context.int_variables:
        context.set_int_variable(key, trial.get_int_variable(key))  # type: ignore[arg-type]


def _variable_message(message: str) -> str:
    """Reword xDSL's "attribute A expected from variable 'V3', but got B"."""
    import re

    match = re.search(r"attribute (.+) expected from variable '[^']*', but got (.+)", message)
    if match is None:
        return message
    return (
        f"{match.group(2)} differs from {match.group(1)}, which another field already "
        "bound to the same IRDL constraint (they must be equal)"
    )


def _satisfies_alone(constr: AttrConstraint, attr: Attribute) -> bool:
    """Whether `attr` satisfies `constr` with no constraint variables bound."""
    try:
        constr.verify(attr, VerificationContext())
    except VerifyException:
        return False
    return True


_BASE_WORDS: dict[type[Attribute], str] = {
    builtin.IntegerAttr: "an integer",
    builtin.FloatAttr: "a float",
    builtin.StringAttr: "a string",
    builtin.ArrayAttr: "an array",
    builtin.UnitAttr: "a unit attribute",
    builtin.TensorType: "a tensor",
    builtin.NoneType: "none",
    builtin.IntegerType: "an integer type",
    builtin.DictionaryAttr: "a dictionary",
}


def _describe(constr: AttrConstraint) -> str:
    """A short, readable form of a constraint for error messages."""
    match constr:
        case EqAttrConstraint():
            return str(constr.attr)
        case AnyAttr():
            return "anything"
        case BaseAttr():
            return _BASE_WORDS.get(constr.attr, f"a {constr.attr.name}")
        case VarConstraint():
            return _describe(constr.constraint)
        case FieldConstraint():
            return _describe(constr.constr)
        case FirstOf():
            return " or ".join(_describe(a) for a in constr.alternatives)
        case ArrayOfConstraint():
            inner = constr.elem_range_constraint
            element = getattr(inner, "constr", None)
            return f"an array whose elements are each {_describe(element)}" if element else "an array"
        case ParamAttrConstraint() if constr.base_attr is builtin.TensorType:
            return f"a tensor of {_describe(constr.param_constrs[1])}"
        case ParamAttrConstraint() if constr.base_attr is builtin.IntegerAttr:
            kind = constr.param_constrs[1]
            if isinstance(kind, EqAttrConstraint) and kind.attr == builtin.i1:
                return "a bool (true or false)"
            return f"an integer of type {_describe(kind)}"
        case ParamAttrConstraint():
            return f"{constr.base_attr.name}<{', '.join(_describe(c) for c in constr.param_constrs)}>"
        case _:
            return type(constr).__name__
