"""IRDL text -> a module of `irdl.dialect` ops.

xDSL's `irdl.attributes` does not parse the newer MLIR syntax for optional attributes
(`"name" = optional %c`), so files are parsed with `IRDL_EXTENDED`, a copy of the
IRDL dialect whose `irdl.attributes` is `AttributesOp`, plus `irdl.properties`
(`PropertiesOp`, the same syntax) for inherent attributes kept as properties."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.dialects.irdl import irdl
from xdsl.ir import (
    Dialect,
    SSAValue,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException

from tpu_xdsl.errors import IrdlLoadError


class _NamedConstraintsOp(IRDLOperation):
    """Named constraints, each single or optional: `{"a" = %0, "b" = optional %1}`."""

    attribute_values = var_operand_def(irdl.AttributeType())
    attribute_value_names = prop_def(ArrayAttr[StringAttr])
    variadicity = opt_prop_def(irdl.VariadicityArrayAttr)

    def __init__(
        self,
        attribute_values: Sequence[SSAValue],
        attribute_value_names: Sequence[str],
        optional_names: Iterable[str] = (),
    ):
        optional = set(optional_names)
        variadicity = irdl.VariadicityArrayAttr(
            ArrayAttr(
                irdl.VariadicityAttr(
                    irdl.VariadicityEnum.OPTIONAL
                    if n in optional
                    else irdl.VariadicityEnum.SINGLE
                )
                for n in attribute_value_names
            )
        )
        super().__init__(
            operands=(attribute_values,),
            properties={
                "attribute_value_names": ArrayAttr(
                    StringAttr(n) for n in attribute_value_names
                ),
                "variadicity": variadicity,
            },
        )

    @property
    def optional_names(self) -> set[str]:
        if self.variadicity is None:
            return set()
        return {
            name.data
            for name, var in zip(self.attribute_value_names, self.variadicity.value)
            if var.data == irdl.VariadicityEnum.OPTIONAL
        }

    @classmethod
    def parse(cls, parser: Parser) -> _NamedConstraintsOp:
        def parse_entry() -> tuple[str, bool, SSAValue]:
            key = parser.parse_str_literal()
            parser.parse_punctuation("=")
            optional = parser.parse_optional_keyword("optional") is not None
            if not optional:
                parser.parse_optional_keyword("single")
            return key, optional, parser.parse_operand(irdl.AttributeType())

        entries = parser.parse_optional_comma_separated_list(
            parser.Delimiter.BRACES, parse_entry
        )
        entries = entries or []
        return cls(
            [value for _, _, value in entries],
            [key for key, _, _ in entries],
            [key for key, optional, _ in entries if optional],
        )

    def print(self, printer: Printer) -> None:
        if not self.attribute_values:
            return
        optional = self.optional_names
        printer.print_string(" {")
        for i, (key, value) in enumerate(
            zip(self.attribute_value_names, self.attribute_values)
        ):
            printer.print_string(", " if i else "")
            printer.print_attribute(key)
            printer.print_string(" = ")
            if key.data in optional:
                printer.print_string("optional ")
            printer.print_operand(value)
        printer.print_string("}")

    def verify_(self) -> None:
        if len(self.attribute_values) != len(self.attribute_value_names):
            raise VerifyException(
                "the number of attribute names and their constraints must be the same"
            )
        if self.variadicity is not None and len(self.variadicity.value) != len(
            self.attribute_values
        ):
            raise VerifyException(
                "the number of attributes and their variadicities must be the same"
            )
        for var in self.variadicity.value if self.variadicity else ():
            if var.data == irdl.VariadicityEnum.VARIADIC:
                raise VerifyException("attributes cannot be variadic")


@irdl_op_definition
class AttributesOp(_NamedConstraintsOp):
    """`irdl.attributes` with per-attribute variadicity (single or optional).

    Syntax and property as in newer MLIR:
    `irdl.attributes {"a" = %0, "b" = optional %1}`.
    """

    name = "irdl.attributes"


@irdl_op_definition
class PropertiesOp(_NamedConstraintsOp):
    """`irdl.properties {"a" = %0, "b" = optional %1}`: inherent attributes kept as MLIR
    properties, printed in the generic form's `<{...}>` as upstream dialects print theirs
    (TOSA's). The syntax is `irdl.attributes`'s; the op is this loader's extension."""

    name = "irdl.properties"


IRDL_EXTENDED = Dialect(
    "irdl",
    [AttributesOp if op is irdl.AttributesOp else op for op in irdl.IRDL.operations] + [PropertiesOp],
    list(irdl.IRDL.attributes),
)


def parse_irdl(text: str, source: str = "<irdl>", verify: bool = True) -> ModuleOp:
    """Parse IRDL text into a module of `irdl.dialect` ops (verified unless told not to)."""
    context = Context()
    context.load_dialect(builtin.Builtin)
    context.load_dialect(IRDL_EXTENDED)
    try:
        module = Parser(context, text, source).parse_module()
        if verify:
            module.verify()
    except (ParseError, VerifyException) as e:
        raise IrdlLoadError(f"{source}: invalid IRDL: {e}") from e
    return module
