"""Turn IRDL text into full xDSL dialects: operations, attributes and types.

xDSL's bundled `make_dialect` interprets only part of IRDL. This loader covers
what real dialects need:

- `irdl.is`, `irdl.any`, `irdl.any_of`, `irdl.all_of`, `irdl.base` (by name,
  e.g. `"!builtin.tensor"`, or by reference to a type of the file),
  `irdl.parametric` (on types of the file, and on registered attributes through a
  nested reference such as `@builtin::@tensor<%shape, %elem, %enc>` or
  `@builtin::@array<%elem>` for arrays whose elements all satisfy `%elem`);
- a constraint value used more than once is a constraint variable: every use
  must be satisfied by the same attribute, as in MLIR's IRDL;
- single, optional and variadic operands and results; regions (with a block
  count of 1 giving a single-block region); attributes, single or optional.
  Optional attributes use the newer MLIR syntax `"name" = optional %c`, which
  xDSL's `irdl.attributes` does not parse yet, so the loader parses IRDL files
  with an extended copy of that op.

Verification failures name the operation, the field and the offending value.
What IRDL cannot express is added by the caller as a `verify` hook per op name.

The loader knows nothing of any particular dialect.
"""

from __future__ import annotations

import hashlib
import json
import keyword
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import ArrayAttr, ArrayOfConstraint, ModuleOp, StringAttr
from xdsl.dialects.irdl import irdl
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    ParametrizedAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    AllOf,
    AnyAttr,
    AttrConstraint,
    AttrSizedOperandSegments,
    AttrSizedResultSegments,
    BaseAttr,
    EqAttrConstraint,
    IRDLOperation,
    ParamAttrConstraint,
    RangeLengthConstraint,
    RangeOf,
    VarConstraint,
    attr_def,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    param_def,
    prop_def,
    region_def,
    result_def,
    var_operand_def,
    var_result_def,
)
from xdsl.irdl.constraints import (
    ConstraintContext,
    InferenceContext,
    VerificationContext,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, PyRDLError, VerifyException

from tpu_xdsl.errors import IrdlLoadError

VerifyHook = Callable[[Operation], None]


################################################################################
# irdl.attributes with optional attributes                                      #
################################################################################


@irdl_op_definition
class AttributesOp(IRDLOperation):
    """`irdl.attributes` with per-attribute variadicity (single or optional).

    Syntax and property as in newer MLIR:
    `irdl.attributes {"a" = %0, "b" = optional %1}`.
    """

    name = "irdl.attributes"

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
    def parse(cls, parser: Parser) -> AttributesOp:
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
        return AttributesOp(
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


IRDL_EXTENDED = Dialect(
    "irdl",
    [AttributesOp if op is irdl.AttributesOp else op for op in irdl.IRDL.operations],
    list(irdl.IRDL.attributes),
)


################################################################################
# Constraints                                                                   #
################################################################################


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


def _naming_op(verify: Callable[[Operation], None]) -> Callable[[Operation], None]:
    """Wrap an op's verifier so every message names the op, on one line."""

    def verify_(op: Operation) -> None:
        try:
            verify(op)
        except VerifyException as e:
            message = str(e.args[0]) if e.args else str(e)
            raise VerifyException(_one_line(op.name, message)) from e

    return verify_


def _one_line(op_name: str, message: str) -> str:
    """The most specific line of `message` that names the op, or the first line prefixed."""
    lines = [line for line in message.splitlines() if line.strip()]
    naming = [line for line in lines if f"'{op_name}'" in line]
    if naming:
        return naming[-1]
    return f"'{op_name}': {lines[0] if lines else message}"


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


# MLIR's names for builtin attributes and types, and the xDSL classes behind them.
_BUILTIN_BASES: dict[str, type[Attribute]] = {
    "#builtin.array": builtin.ArrayAttr,
    "#builtin.dense_array": builtin.DenseArrayBase,
    "#builtin.dense": builtin.DenseIntOrFPElementsAttr,
    "#builtin.dense_elements": builtin.DenseIntOrFPElementsAttr,
    "#builtin.dense_resource": builtin.DenseResourceAttr,
    "#builtin.dictionary": builtin.DictionaryAttr,
    "#builtin.float": builtin.FloatAttr,
    "#builtin.integer": builtin.IntegerAttr,
    "#builtin.string": builtin.StringAttr,
    "#builtin.symbol_ref": builtin.SymbolRefAttr,
    "#builtin.type": builtin.TypeAttribute,
    "#builtin.unit": builtin.UnitAttr,
    "!builtin.bf16": builtin.BFloat16Type,
    "!builtin.complex": builtin.ComplexType,
    "!builtin.f16": builtin.Float16Type,
    "!builtin.f32": builtin.Float32Type,
    "!builtin.f64": builtin.Float64Type,
    "!builtin.function": builtin.FunctionType,
    "!builtin.index": builtin.IndexType,
    "!builtin.integer": builtin.IntegerType,
    "!builtin.memref": builtin.MemRefType,
    "!builtin.none": builtin.NoneType,
    "!builtin.tensor": builtin.TensorType,
    "!builtin.tuple": builtin.TupleType,
    "!builtin.vector": builtin.VectorType,
}


# Class members of a generated op that IRDL field names must not replace.
_RESERVED = {"name", "traits", "irdl_options", "assembly_format", "custom_directives"}


class LoadedDialect(Dialect):
    """A dialect built from IRDL; its ops and attributes are tuples (`len()` works)."""

    @property
    def operations(self) -> tuple[type[Operation], ...]:  # type: ignore[override]
        return tuple(self._operations)  # pyright: ignore[reportPrivateUsage]

    @property
    def attributes(self) -> tuple[type[Attribute], ...]:  # type: ignore[override]
        return tuple(self._attributes)  # pyright: ignore[reportPrivateUsage]


def _python_name(name: str) -> str:
    """A Python identifier for an IRDL field name that avoids Operation members."""
    ident = "".join(c if c.isalnum() else "_" for c in name)
    if not ident or ident[0].isdigit():
        ident = "_" + ident
    if keyword.iskeyword(ident) or ident in _RESERVED or hasattr(IRDLOperation, ident):
        ident += "_"
    return ident


def _class_name(sym: str, suffix: str) -> str:
    parts = sym.replace(".", "_").split("_")
    return "".join(p[:1].upper() + p[1:] for p in parts) + suffix


# -- stage 1: IRDL module -> spec (plain data, cacheable) ---------------------------


def _owner_dialect(op: Operation) -> str:
    while not isinstance(op, irdl.DialectOp):
        parent = op.parent_op()
        if parent is None:
            return ""
        op = parent
    return op.sym_name.data


def _ref(ref: builtin.SymbolRefAttr) -> list[str]:
    return [ref.root_reference.data, *(r.data for r in ref.nested_references.data)]


def _entry_constraints(body: Block) -> tuple[dict[str, dict[str, Any]], dict[SSAValue, str]]:
    """The constraint ops of one definition as {id: node}, and value -> id."""
    ids: dict[SSAValue, str] = {}
    table: dict[str, dict[str, Any]] = {}
    for op in body.ops:
        if len(op.results) != 1:
            continue
        cid = str(len(ids))
        value = op.results[0]
        ids[value] = cid
        node: dict[str, Any]
        match op:
            case irdl.IsOp():
                node = {"k": "is", "attr": str(op.expected)}
            case irdl.AnyOp():
                node = {"k": "any"}
            case irdl.AnyOfOp() | irdl.AllOfOp():
                kind = "any_of" if isinstance(op, irdl.AnyOfOp) else "all_of"
                node = {"k": kind, "args": [ids[a] for a in op.args]}
            case irdl.BaseOp() if op.base_name is not None:
                node = {"k": "base_name", "name": op.base_name.data}
            case irdl.BaseOp():
                assert op.base_ref is not None
                node = {"k": "base_ref", "ref": _ref(op.base_ref), "dialect": _owner_dialect(op)}
            case irdl.ParametricOp():
                node = {
                    "k": "parametric",
                    "ref": _ref(op.base_type),
                    "dialect": _owner_dialect(op),
                    "args": [ids[a] for a in op.args],
                }
            case irdl.RegionOp():
                blocks = op.number_of_blocks.value.data if op.number_of_blocks is not None else None
                node = {
                    "k": "region",
                    "blocks": blocks,
                    "constrained": op.constrained_arguments is not None,
                    "args": [ids[a] for a in op.entry_block_args],
                }
            case _:
                node = {"k": "unsupported", "op": op.name}
        node["uses"] = len(list(value.uses))
        table[cid] = node
    return table, ids


def extract_spec(module: ModuleOp) -> list[dict[str, Any]]:
    """Each `irdl.dialect` as plain data: its types/attributes and ops with constraints."""
    dialects = []
    for dialect_op in module.ops:
        if not isinstance(dialect_op, irdl.DialectOp):
            continue
        types, ops = [], []
        for entry in dialect_op.body.block.ops:
            table, ids = _entry_constraints(entry.body.block) if entry.regions else ({}, {})
            if isinstance(entry, irdl.TypeOp | irdl.AttributeOp):
                params = [
                    [name.data, ids[value]]
                    for inner in entry.body.block.ops
                    if isinstance(inner, irdl.ParametersOp)
                    for name, value in zip(inner.names, inner.args, strict=True)
                ]
                kind = "type" if isinstance(entry, irdl.TypeOp) else "attribute"
                types.append({"sym": entry.sym_name.data, "kind": kind, "params": params, "constraints": table})
            elif isinstance(entry, irdl.OperationOp):
                spec: dict[str, Any] = {
                    "sym": entry.sym_name.data,
                    "py_class": entry.get_py_class_name(),
                    "operands": [], "results": [], "attributes": [], "regions": [],
                    "constraints": table,
                }
                for inner in entry.body.block.ops:
                    match inner:
                        case irdl.OperandsOp() | irdl.ResultsOp():
                            key = "operands" if isinstance(inner, irdl.OperandsOp) else "results"
                            spec[key] = [
                                [n.data, v.data.value, ids[a]]
                                for n, v, a in zip(inner.names, inner.variadicity.value, inner.args, strict=True)
                            ]
                        case AttributesOp():
                            optional = inner.optional_names
                            spec["attributes"] = [
                                [n.data, n.data in optional, ids[a]]
                                for n, a in zip(inner.attribute_value_names, inner.attribute_values, strict=True)
                            ]
                        case irdl.RegionsOp():
                            spec["regions"] = [[n.data, ids[a]] for n, a in zip(inner.names, inner.args, strict=True)]
                        case _:
                            pass
                ops.append(spec)
        dialects.append({"name": dialect_op.sym_name.data, "types": types, "ops": ops})
    return dialects


# -- stage 2: spec -> xDSL classes ----------------------------------------------------


class _DialectBuilder:
    """Builds the classes of every dialect of a spec."""

    def __init__(
        self,
        spec: list[dict[str, Any]],
        source: str,
        context: Context,
        verify_hooks: Mapping[str, VerifyHook],
        op_members: Mapping[str, Mapping[str, Any]],
        module_prefix: str,
    ):
        self.spec = spec
        self.module_prefix = module_prefix
        self.source = source
        self.context = context
        self.verify_hooks = verify_hooks
        self.op_members = op_members
        self.attr_classes: dict[tuple[str, str], type[ParametrizedAttribute] | None] = {}
        self.var_count = 0
        self._parsed_attrs: dict[str, Attribute] = {}

    def error(self, where: str, message: str) -> IrdlLoadError:
        return IrdlLoadError(f"{self.source}: {where}: {message}")

    # -- attribute and type definitions ------------------------------------

    def build_attribute(self, dialect: str, entry: dict[str, Any]) -> type[ParametrizedAttribute]:
        sym = entry["sym"]
        where = f"{dialect}.{sym}"
        scope = _Scope(entry["constraints"])
        namespace: dict[str, Any] = {
            "name": f"{dialect}.{sym}",
            "__module__": f"{self.module_prefix}.{dialect}",
            "__annotations__": {},
        }
        for pname, cid in entry["params"]:
            ident = _python_name(pname)
            namespace["__annotations__"][ident] = Attribute
            namespace[ident] = param_def(self.constraint(scope, cid, where))
        is_type = entry["kind"] == "type"
        bases: tuple[type, ...] = (
            (ParametrizedAttribute, TypeAttribute) if is_type else (ParametrizedAttribute,)
        )
        cls = type(_class_name(sym, "Type" if is_type else "Attr"), bases, namespace)
        try:
            return irdl_attr_definition(cls)  # type: ignore[return-value]
        except PyRDLError as e:
            raise self.error(where, str(e)) from e

    # -- constraints ---------------------------------------------------------

    def resolve_base_name(self, name: str, where: str) -> type[Attribute]:
        if name in _BUILTIN_BASES:
            return _BUILTIN_BASES[name]
        if len(name) < 2 or name[0] not in "!#":
            raise self.error(
                where,
                f"irdl.base {name!r} must start with '!' (a type) or '#' (an attribute)",
            )
        dialect, _, sym = name[1:].partition(".")
        cls = self.attr_classes.get((dialect, sym))
        if cls is not None:
            return cls
        found = self.context.get_optional_attr(name[1:])
        if found is None:
            raise self.error(where, f"irdl.base {name!r} names no known attribute or type")
        return found

    def resolve_ref(self, ref: list[str], owner: str, where: str) -> type[Attribute]:
        text = "@" + "::@".join(ref)
        if len(ref) == 1:
            key = (owner, ref[0])
        elif len(ref) == 2:
            key = (ref[0], ref[1])
        else:
            raise self.error(where, f"reference {text} has too many levels")
        if key in self.attr_classes:
            cls = self.attr_classes[key]
            if cls is None:
                raise self.error(where, f"reference {text} is used before its definition")
            return cls
        # An attribute wins over a type of the same name (`@builtin::@integer` is
        # the integer attribute); no builtin type is commonly constrained by parameters.
        for sigil in "#!":
            name = f"{sigil}{key[0]}.{key[1]}"
            if name in _BUILTIN_BASES:
                return _BUILTIN_BASES[name]
        found = self.context.get_optional_attr(f"{key[0]}.{key[1]}")
        if found is None:
            raise self.error(where, f"reference {text} names no known attribute or type")
        return found

    def parse_attr(self, text: str, where: str) -> Attribute:
        if text not in self._parsed_attrs:
            context = Context()
            context.load_dialect(builtin.Builtin)
            try:
                self._parsed_attrs[text] = Parser(context, text).parse_attribute()
            except ParseError as e:
                raise self.error(where, f"irdl.is {text}: {e}") from e
        return self._parsed_attrs[text]

    def constraint(self, scope: _Scope, cid: str, where: str) -> AttrConstraint:
        if cid in scope.built:
            return scope.built[cid]
        node = scope.table[cid]
        constr = self.make_constraint(scope, node, where)
        # An equality constraint needs no variable: all its uses equal one value.
        if node["uses"] > 1 and node["k"] != "is":
            self.var_count += 1
            constr = VarConstraint(f"V{self.var_count}", constr)
        scope.built[cid] = constr
        return constr

    def make_constraint(self, scope: _Scope, node: dict[str, Any], where: str) -> AttrConstraint:
        match node["k"]:
            case "is":
                return EqAttrConstraint(self.parse_attr(node["attr"], where))
            case "any":
                return AnyAttr()
            case "any_of":
                args = [self.constraint(scope, a, where) for a in node["args"]]
                return FirstOf(args) if len(args) > 1 else args[0]
            case "all_of":
                args = [self.constraint(scope, a, where) for a in node["args"]]
                return AllOf(tuple(args)) if len(args) > 1 else args[0]
            case "base_name":
                return BaseAttr(self.resolve_base_name(node["name"], where))
            case "base_ref":
                return BaseAttr(self.resolve_ref(node["ref"], node["dialect"], where))
            case "parametric":
                cls = self.resolve_ref(node["ref"], node["dialect"], where)
                args = [self.constraint(scope, a, where) for a in node["args"]]
                if cls is builtin.ArrayAttr:
                    if len(args) != 1:
                        raise self.error(where, "@builtin::@array takes one element constraint")
                    return ArrayOfConstraint(args[0])
                if not issubclass(cls, ParametrizedAttribute):
                    raise self.error(where, f"@{'::@'.join(node['ref'])} has no parameters")
                return ParamAttrConstraint(cls, tuple(args))
            case _:
                raise self.error(where, f"unsupported constraint op '{node.get('op', node['k'])}'")

    # -- operations ------------------------------------------------------------

    def build_operation(self, dialect: str, entry: dict[str, Any]) -> type[IRDLOperation]:
        op_name = f"{dialect}.{entry['sym']}"
        scope = _Scope(entry["constraints"])
        namespace: dict[str, Any] = {
            "name": op_name,
            "__module__": f"{self.module_prefix}.{dialect}",
        }
        options: list[Any] = []
        if self.add_values(namespace, op_name, scope, entry["operands"], "operand"):
            options.append(AttrSizedOperandSegments(as_property=True))
        if self.add_values(namespace, op_name, scope, entry["results"], "result"):
            options.append(AttrSizedResultSegments(as_property=True))
        self.add_attributes(namespace, op_name, scope, entry["attributes"])
        self.add_regions(namespace, op_name, scope, entry["regions"])
        if options:
            namespace["irdl_options"] = tuple(options)
        hook = self.verify_hooks.get(op_name)
        if hook is not None:
            namespace["verify_"] = lambda self, _hook=hook: _hook(self)
        namespace.update(self.op_members.get(op_name, {}))
        cls = type(entry["py_class"], (IRDLOperation,), namespace)
        try:
            cls = irdl_op_definition(cls)
        except PyRDLError as e:
            raise self.error(op_name, str(e)) from e
        cls.verify_ = _naming_op(cls.verify_)
        return cls

    def add_field(self, namespace: dict[str, Any], op_name: str, name: str, value: Any) -> None:
        ident = _python_name(name)
        if ident in namespace:
            raise self.error(op_name, f"field '{name}' is defined twice")
        namespace[ident] = value

    def add_values(
        self,
        namespace: dict[str, Any],
        op_name: str,
        scope: _Scope,
        values: list[list[Any]],
        kind: str,
    ) -> bool:
        """Add operand or result fields; return whether segment sizes are needed."""
        makers = {
            "operand": (operand_def, opt_operand_def, var_operand_def),
            "result": (result_def, opt_result_def, var_result_def),
        }[kind]
        multi = 0
        for name, variadicity, cid in values:
            constr = FieldConstraint(self.constraint(scope, cid, op_name), op_name, kind, name)
            if variadicity == irdl.VariadicityEnum.SINGLE.value:
                field = makers[0](constr)
            elif variadicity == irdl.VariadicityEnum.OPTIONAL.value:
                field = makers[1](constr)
                multi += 1
            else:
                field = makers[2](RangeOf(constr))
                multi += 1
            self.add_field(namespace, op_name, name, field)
        return multi > 1

    def add_attributes(
        self, namespace: dict[str, Any], op_name: str, scope: _Scope, attributes: list[list[Any]]
    ) -> None:
        for name, optional, cid in attributes:
            constr = FieldConstraint(self.constraint(scope, cid, op_name), op_name, "attribute", name)
            make = opt_attr_def if optional else attr_def
            ident = _python_name(name)
            field = make(constr, attr_name=name) if ident != name else make(constr)
            self.add_field(namespace, op_name, name, field)

    def add_regions(
        self, namespace: dict[str, Any], op_name: str, scope: _Scope, regions: list[list[Any]]
    ) -> None:
        for name, cid in regions:
            node = scope.table[cid]
            single = node["k"] == "region" and node.get("blocks") == 1
            entry_args: Any = RangeOf(AnyAttr())
            if node["k"] == "region" and node.get("constrained"):
                if node["args"]:
                    raise self.error(
                        op_name,
                        f"region '{name}': constrained entry block arguments "
                        "other than none are not supported",
                    )
                entry_args = RangeLengthConstraint(RangeOf(AnyAttr()), 0)
            field = region_def("single_block" if single else None, entry_args=entry_args)
            self.add_field(namespace, op_name, name, field)

    # -- the whole spec ----------------------------------------------------------

    def build(self) -> list[Dialect]:
        if not self.spec:
            raise self.error("module", "no irdl.dialect found")
        for dialect in self.spec:
            for entry in dialect["types"]:
                self.attr_classes[(dialect["name"], entry["sym"])] = None
        attributes: dict[str, list[type[Attribute]]] = {}
        for dialect in self.spec:
            attributes[dialect["name"]] = []
            for entry in dialect["types"]:
                cls = self.build_attribute(dialect["name"], entry)
                self.attr_classes[(dialect["name"], entry["sym"])] = cls
                attributes[dialect["name"]].append(cls)
        return [
            LoadedDialect(
                dialect["name"],
                [self.build_operation(dialect["name"], entry) for entry in dialect["ops"]],
                attributes[dialect["name"]],
            )
            for dialect in self.spec
        ]


@dataclass
class _Scope:
    """The constraints of one definition (an op or a type) while it is built."""

    table: dict[str, dict[str, Any]]
    built: dict[str, AttrConstraint] = field(default_factory=dict)


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


def load_irdl_dialects(
    text: str,
    source: str = "<irdl>",
    *,
    context: Context | None = None,
    verify_hooks: Mapping[str, VerifyHook] | None = None,
    op_members: Mapping[str, Mapping[str, Any]] | None = None,
    module_prefix: str = "irdl_dialects",
    verify: bool = True,
    cache_dir: str | Path | None = None,
) -> list[Dialect]:
    """Build one xDSL `Dialect` per `irdl.dialect` in `text`.

    `context` resolves `irdl.base "!dialect.name"` references to dialects other
    than builtin and those of the file. `verify_hooks` maps a qualified op name to
    a function run after the IRDL constraints (for what IRDL cannot say);
    `op_members` maps it to extra class members (methods, properties).
    Generated classes claim to live in module `{module_prefix}.{dialect}`.
    `verify=False` skips verifying the IRDL module itself (for files a test
    verifies). With `cache_dir`, the parsed definitions are kept there as JSON
    keyed by a hash of the text, and later loads skip the parser entirely.
    """
    spec = load_spec(text, source, verify, cache_dir)
    builder = _DialectBuilder(
        spec,
        source,
        context or Context(),
        verify_hooks or {},
        op_members or {},
        module_prefix,
    )
    return builder.build()


# Bump when the spec format changes; cached specs of other versions are ignored.
_SPEC_VERSION = 1


def load_spec(
    text: str, source: str, verify: bool = True, cache_dir: str | Path | None = None
) -> list[dict[str, Any]]:
    """The dialects of IRDL `text` as plain data, from the cache when it holds them."""
    path = None
    if cache_dir is not None:
        from importlib.metadata import version

        key = hashlib.sha256(
            f"{_SPEC_VERSION}|{version('xdsl')}|{verify}|{text}".encode()
        ).hexdigest()[:32]
        path = Path(cache_dir) / f"irdl-{key}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            pass
    spec = extract_spec(parse_irdl(text, source, verify))
    if path is not None:
        _write_cache(path, spec)
    return spec


def _write_cache(path: Path, spec: list[dict[str, Any]]) -> None:
    """Write the cache atomically; a cache that cannot be written is simply skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name, dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(spec, f)
        os.replace(tmp, path)
    except OSError:
        return


__all__ = [
    "IRDL_EXTENDED",
    "AttributesOp",
    "FieldConstraint",
    "extract_spec",
    "load_irdl_dialects",
    "load_spec",
    "parse_irdl",
]
