"""Stage 2: a spec -> xDSL classes: one `ParametrizedAttribute` per IRDL type or
attribute, one `IRDLOperation` per op, with the constraints of `constraints`, the
caller's verify hooks and extra members, gathered into `LoadedDialect`s."""

from __future__ import annotations

import keyword
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import ArrayOfConstraint
from xdsl.dialects.irdl import irdl
from xdsl.ir import (
    Attribute,
    Dialect,
    Operation,
    ParametrizedAttribute,
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
    EqIntConstraint,
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
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, PyRDLError, VerifyException

from tpu_xdsl.dialects.irdl_loader.constraints import FieldConstraint, FirstOf
from tpu_xdsl.errors import IrdlLoadError

VerifyHook = Callable[[Operation], None]


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
    "#builtin.type": TypeAttribute,
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
        lookup = self.context.get_optional_type if name[0] == "!" else self.context.get_optional_attr
        found = lookup(name[1:])
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
        self.add_attributes(namespace, op_name, scope, entry["properties"], properties=True)
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
        self,
        namespace: dict[str, Any],
        op_name: str,
        scope: _Scope,
        attributes: list[list[Any]],
        properties: bool = False,
    ) -> None:
        kind = "property" if properties else "attribute"
        for name, optional, cid in attributes:
            constr = FieldConstraint(self.constraint(scope, cid, op_name), op_name, kind, name)
            if properties:
                make = opt_prop_def if optional else prop_def
                ident = _python_name(name)
                field = make(constr, prop_name=name) if ident != name else make(constr)
                self.add_field(namespace, op_name, name, field)
                continue
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
                entry_args = RangeLengthConstraint(RangeOf(AnyAttr()), EqIntConstraint(0))
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
