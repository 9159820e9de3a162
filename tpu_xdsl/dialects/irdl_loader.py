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

import keyword
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import ArrayAttr, ArrayOfConstraint, ModuleOp, StringAttr
from xdsl.dialects.irdl import irdl
from xdsl.ir import (
    Attribute,
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
    opt_prop_def,
    prop_def,
    opt_attr_def,
    opt_operand_def,
    opt_region_def,
    opt_result_def,
    param_def,
    region_def,
    result_def,
    var_operand_def,
    var_region_def,
    var_result_def,
)
from xdsl.irdl.constraints import ConstraintContext, InferenceContext, VerificationContext
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


class _DialectBuilder:
    """Builds the classes of every `irdl.dialect` in one IRDL module."""

    def __init__(
        self,
        module: ModuleOp,
        source: str,
        context: Context,
        verify_hooks: Mapping[str, VerifyHook],
        op_members: Mapping[str, Mapping[str, Any]],
        module_prefix: str,
    ):
        self.module_prefix = module_prefix
        self.module = module
        self.source = source
        self.context = context
        self.verify_hooks = verify_hooks
        self.op_members = op_members
        self.attr_classes: dict[tuple[str, str], type[ParametrizedAttribute]] = {}
        self.constraints: dict[SSAValue, AttrConstraint] = {}
        self.var_count = 0

    def error(self, where: str, message: str) -> IrdlLoadError:
        return IrdlLoadError(f"{self.source}: {where}: {message}")

    # -- attribute and type definitions ------------------------------------

    def declare_attributes(self, dialect_op: irdl.DialectOp) -> None:
        """Create empty attribute/type classes so constraints can refer to them."""
        dialect = dialect_op.sym_name.data
        for entry in dialect_op.body.block.ops:
            if not isinstance(entry, irdl.TypeOp | irdl.AttributeOp):
                continue
            self.attr_classes[(dialect, entry.sym_name.data)] = None  # type: ignore[assignment]

    def build_attribute(
        self, dialect: str, entry: irdl.TypeOp | irdl.AttributeOp
    ) -> type[ParametrizedAttribute]:
        sym = entry.sym_name.data
        where = f"{dialect}.{sym}"
        params: list[tuple[str, AttrConstraint]] = []
        for inner in entry.body.block.ops:
            if isinstance(inner, irdl.ParametersOp):
                for pname, value in zip(inner.names, inner.args, strict=True):
                    params.append((pname.data, self.constraint(value, where)))
        namespace: dict[str, Any] = {
            "name": f"{dialect}.{sym}",
            "__module__": f"{self.module_prefix}.{dialect}",
            "__annotations__": {},
        }
        for pname, constr in params:
            ident = _python_name(pname)
            namespace["__annotations__"][ident] = Attribute
            namespace[ident] = param_def(constr)
        is_type = isinstance(entry, irdl.TypeOp)
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
        if (dialect, sym) in self.attr_classes:
            return self.attr_classes[(dialect, sym)]
        cls = self.context.get_optional_attr(name[1:])
        if cls is None:
            raise self.error(where, f"irdl.base {name!r} names no known attribute or type")
        return cls

    def resolve_ref(
        self, ref: builtin.SymbolRefAttr, owner: Operation, where: str
    ) -> type[Attribute]:
        nested = [r.data for r in ref.nested_references.data]
        if not nested:
            dialect_op = owner
            while not isinstance(dialect_op, irdl.DialectOp):
                parent = dialect_op.parent_op()
                if parent is None:
                    raise self.error(where, f"reference {ref} is outside a dialect")
                dialect_op = parent
            key = (dialect_op.sym_name.data, ref.root_reference.data)
        elif len(nested) == 1:
            key = (ref.root_reference.data, nested[0])
        else:
            raise self.error(where, f"reference {ref} has too many levels")
        if key in self.attr_classes:
            cls = self.attr_classes[key]
            if cls is None:
                raise self.error(where, f"reference {ref} is used before its definition")
            return cls
        # An attribute wins over a type of the same name (`@builtin::@integer` is
        # the integer attribute); no builtin type is commonly constrained by parameters.
        for sigil in "#!":
            name = f"{sigil}{key[0]}.{key[1]}"
            if name in _BUILTIN_BASES:
                return _BUILTIN_BASES[name]
        cls = self.context.get_optional_attr(f"{key[0]}.{key[1]}")
        if cls is None:
            raise self.error(where, f"reference {ref} names no known attribute or type")
        return cls

    def constraint(self, value: SSAValue, where: str) -> AttrConstraint:
        if value in self.constraints:
            return self.constraints[value]
        constr = self.make_constraint(value, where)
        # An equality constraint needs no variable: all its uses equal one value.
        if value.has_more_than_one_use() and not isinstance(value.owner, irdl.IsOp):
            self.var_count += 1
            constr = VarConstraint(f"V{self.var_count}", constr)
        self.constraints[value] = constr
        return constr

    def make_constraint(self, value: SSAValue, where: str) -> AttrConstraint:
        op = value.owner
        match op:
            case irdl.IsOp():
                return EqAttrConstraint(op.expected)
            case irdl.AnyOp():
                return AnyAttr()
            case irdl.AnyOfOp():
                args = [self.constraint(a, where) for a in op.args]
                return FirstOf(args) if len(args) > 1 else args[0]
            case irdl.AllOfOp():
                args = [self.constraint(a, where) for a in op.args]
                return AllOf(tuple(args)) if len(args) > 1 else args[0]
            case irdl.BaseOp():
                if op.base_name is not None:
                    return BaseAttr(self.resolve_base_name(op.base_name.data, where))
                assert op.base_ref is not None
                return BaseAttr(self.resolve_ref(op.base_ref, op, where))
            case irdl.ParametricOp():
                cls = self.resolve_ref(op.base_type, op, where)
                args = [self.constraint(a, where) for a in op.args]
                if cls is builtin.ArrayAttr:
                    if len(args) != 1:
                        raise self.error(where, "@builtin::@array takes one element constraint")
                    return ArrayOfConstraint(args[0])
                if not issubclass(cls, ParametrizedAttribute):
                    raise self.error(where, f"{op.base_type} has no parameters")
                return ParamAttrConstraint(cls, tuple(args))
            case _:
                raise self.error(
                    where, f"unsupported constraint op '{op.name if op else value}'"
                )

    # -- operations ------------------------------------------------------------

    def build_operation(self, dialect: str, entry: irdl.OperationOp) -> type[IRDLOperation]:
        op_name = f"{dialect}.{entry.sym_name.data}"
        namespace: dict[str, Any] = {
            "name": op_name,
            "__module__": f"{self.module_prefix}.{dialect}",
        }
        options: list[Any] = []
        for inner in entry.body.block.ops:
            match inner:
                case irdl.OperandsOp():
                    if self.add_values(namespace, op_name, inner, "operand"):
                        options.append(AttrSizedOperandSegments(as_property=True))
                case irdl.ResultsOp():
                    if self.add_values(namespace, op_name, inner, "result"):
                        options.append(AttrSizedResultSegments(as_property=True))
                case AttributesOp():
                    self.add_attributes(namespace, op_name, inner)
                case irdl.RegionsOp():
                    self.add_regions(namespace, op_name, inner)
                case _:
                    pass
        if options:
            namespace["irdl_options"] = tuple(options)
        hook = self.verify_hooks.get(op_name)
        if hook is not None:
            namespace["verify_"] = lambda self, _hook=hook: _hook(self)
        namespace.update(self.op_members.get(op_name, {}))
        cls = type(entry.get_py_class_name(), (IRDLOperation,), namespace)
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
        op: irdl.OperandsOp | irdl.ResultsOp,
        kind: str,
    ) -> bool:
        """Add operand or result fields; return whether segment sizes are needed."""
        makers = {
            "operand": (operand_def, opt_operand_def, var_operand_def),
            "result": (result_def, opt_result_def, var_result_def),
        }[kind]
        multi = 0
        for name, variadicity, value in zip(
            op.names, op.variadicity.value, op.args, strict=True
        ):
            constr = FieldConstraint(
                self.constraint(value, op_name), op_name, kind, name.data
            )
            match variadicity.data:
                case irdl.VariadicityEnum.SINGLE:
                    field = makers[0](constr)
                case irdl.VariadicityEnum.OPTIONAL:
                    field = makers[1](constr)
                    multi += 1
                case _:
                    field = makers[2](RangeOf(constr))
                    multi += 1
            self.add_field(namespace, op_name, name.data, field)
        return multi > 1

    def add_attributes(
        self, namespace: dict[str, Any], op_name: str, op: AttributesOp
    ) -> None:
        optional = op.optional_names
        for name, value in zip(op.attribute_value_names, op.attribute_values, strict=True):
            constr = FieldConstraint(
                self.constraint(value, op_name), op_name, "attribute", name.data
            )
            make = opt_attr_def if name.data in optional else attr_def
            ident = _python_name(name.data)
            field = make(constr, attr_name=name.data) if ident != name.data else make(constr)
            self.add_field(namespace, op_name, name.data, field)

    def add_regions(self, namespace: dict[str, Any], op_name: str, op: irdl.RegionsOp) -> None:
        for name, value in zip(op.names, op.args, strict=True):
            region_op = value.owner
            single = (
                isinstance(region_op, irdl.RegionOp)
                and region_op.number_of_blocks is not None
                and region_op.number_of_blocks.value.data == 1
            )
            entry_args: Any = RangeOf(AnyAttr())
            if isinstance(region_op, irdl.RegionOp) and region_op.constrained_arguments:
                args = [self.constraint(a, op_name) for a in region_op.entry_block_args]
                if args:
                    raise self.error(
                        op_name,
                        f"region '{name.data}': constrained entry block arguments "
                        "other than none are not supported",
                    )
                entry_args = RangeLengthConstraint(RangeOf(AnyAttr()), 0)
            field = region_def("single_block" if single else None, entry_args=entry_args)
            self.add_field(namespace, op_name, name.data, field)

    # -- the whole module ------------------------------------------------------

    def build(self) -> list[Dialect]:
        dialect_ops = [op for op in self.module.ops if isinstance(op, irdl.DialectOp)]
        if not dialect_ops:
            raise self.error("module", "no irdl.dialect found")
        for dialect_op in dialect_ops:
            self.declare_attributes(dialect_op)
        attributes: dict[str, list[type[Attribute]]] = {}
        for dialect_op in dialect_ops:
            dialect = dialect_op.sym_name.data
            attributes[dialect] = []
            for entry in dialect_op.body.block.ops:
                if isinstance(entry, irdl.TypeOp | irdl.AttributeOp):
                    cls = self.build_attribute(dialect, entry)
                    self.attr_classes[(dialect, entry.sym_name.data)] = cls
                    attributes[dialect].append(cls)
        dialects: list[Dialect] = []
        for dialect_op in dialect_ops:
            dialect = dialect_op.sym_name.data
            operations = [
                self.build_operation(dialect, entry)
                for entry in dialect_op.body.block.ops
                if isinstance(entry, irdl.OperationOp)
            ]
            dialects.append(LoadedDialect(dialect, operations, attributes[dialect]))
        return dialects


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
) -> list[Dialect]:
    """Build one xDSL `Dialect` per `irdl.dialect` in `text`.

    `context` resolves `irdl.base "!dialect.name"` references to dialects other
    than builtin and those of the file. `verify_hooks` maps a qualified op name to
    a function run after the IRDL constraints (for what IRDL cannot say);
    `op_members` maps it to extra class members (methods, properties).
    Generated classes claim to live in module `{module_prefix}.{dialect}`.
    `verify=False` skips verifying the IRDL module itself (for files a test
    verifies), which is a fifth of the load time.
    """
    module = parse_irdl(text, source, verify)
    builder = _DialectBuilder(
        module,
        source,
        context or Context(),
        verify_hooks or {},
        op_members or {},
        module_prefix,
    )
    return builder.build()


__all__ = [
    "AttributesOp",
    "FieldConstraint",
    "IRDL_EXTENDED",
    "load_irdl_dialects",
    "parse_irdl",
]
