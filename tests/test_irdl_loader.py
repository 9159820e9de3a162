"""The IRDL loader on a small dialect that is not TOP/TPU."""

from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.dialects.test import Test
from xdsl.ir import Dialect, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import IRDLOperation
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from tpu_xdsl.dialects.irdl_loader import load_irdl_dialects, parse_irdl
from tpu_xdsl.errors import IrdlLoadError

TOY_IRDL = (Path(__file__).parent / "data" / "toy.irdl").read_text()


@pytest.fixture(scope="module")
def toy() -> Dialect:
    (dialect,) = load_irdl_dialects(TOY_IRDL, "toy.irdl")
    return dialect


def parse(toy: Dialect, body: str) -> ModuleOp:
    ctx = Context()
    for d in (Builtin, Func, Test, toy):
        ctx.load_dialect(d)
    return Parser(ctx, body).parse_module()


def verify_error(toy: Dialect, body: str) -> str:
    module = parse(toy, body)
    with pytest.raises(VerifyException) as info:
        module.verify()
    return str(info.value)


def test_dialect_contents(toy: Dialect):
    assert toy.name == "toy"
    assert sorted(op.name for op in toy.operations) == [
        "toy.combine",
        "toy.concat2",
        "toy.make_pair",
        "toy.scope",
    ]
    attrs = {a.name: a for a in toy.attributes}
    assert set(attrs) == {"toy.pair", "toy.tag"}
    assert issubclass(attrs["toy.pair"], TypeAttribute)
    assert not issubclass(attrs["toy.tag"], TypeAttribute)
    assert all(issubclass(op, IRDLOperation) for op in toy.operations)


COMBINE = """
func.func @f(%a: tensor<2xf32>, %b: tensor<3xi8>, %c: tensor<1xf16>) {{
  %r = "toy.combine"(%a, %b{extra}) {{count = 3 : {count_type}{attrs}}} : (tensor<2xf32>, tensor<3xi8>{extra_t}) -> {result}
  func.return
}}
"""


def combine(extra="", count_type="i64", attrs="", result="tensor<2xf32>") -> str:
    return COMBINE.format(
        extra=", %c" if extra else "",
        extra_t=", tensor<1xf16>" if extra else "",
        count_type=count_type,
        attrs=attrs,
        result=result,
    )


def test_valid_op_and_accessors(toy: Dialect):
    module = parse(toy, combine(extra=True, attrs=", kernel = [1, 2], flag, label = #toy.tag<\"hi\">"))
    module.verify()
    op = next(o for o in module.walk() if o.name == "toy.combine")
    assert op.lhs.type.get_shape() == (2,)
    assert op.extra is not None
    assert [a.value.data for a in op.kernel.data] == [1, 2]
    assert op.count.value.data == 3


def test_optional_operand_and_attributes_may_be_absent(toy: Dialect):
    module = parse(toy, combine())
    module.verify()
    op = next(o for o in module.walk() if o.name == "toy.combine")
    assert op.extra is None
    assert op.kernel is None and op.flag is None


def test_any_of_in_parametric_attribute(toy: Dialect):
    parse(toy, combine(count_type="i32")).verify()
    message = verify_error(toy, combine(count_type="i16"))
    assert "'toy.combine' attribute 'count'" in message
    assert "3 : i16" in message


def test_constraint_variable_ties_operand_and_result(toy: Dialect):
    message = verify_error(toy, combine(result="tensor<5xf32>"))
    assert "'toy.combine' result 'output'" in message
    assert "tensor<5xf32>" in message


def test_attribute_error_names_op_field_and_value(toy: Dialect):
    message = verify_error(toy, combine(attrs=', kernel = "x"'))
    assert "'toy.combine' attribute 'kernel' has invalid value \"x\"" in message
    message = verify_error(toy, combine(attrs=', kernel = [1, "y"]'))
    assert "attribute 'kernel'" in message and '"y"' in message


def test_missing_required_attribute(toy: Dialect):
    body = combine().replace("count = 3 : i64", "")
    assert "attribute 'count' expected" in verify_error(toy, body)


def test_operand_count(toy: Dialect):
    body = """
func.func @f(%a: tensor<2xf32>) {
  %r = "toy.combine"(%a) {count = 1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  func.return
}
"""
    assert "Expected 2 or 3 operands, but got 1" in verify_error(toy, body)


def test_two_variadic_groups_use_segment_sizes(toy: Dialect):
    body = """
func.func @f(%a: tensor<2xf32>, %b: tensor<3xf32>) {
  %r:2 = "toy.concat2"(%a, %a, %b) <{operandSegmentSizes = array<i32: 2, 1>}> : (tensor<2xf32>, tensor<2xf32>, tensor<3xf32>) -> (tensor<1xf32>, tensor<1xf32>)
  func.return
}
"""
    module = parse(toy, body)
    module.verify()
    op = next(o for o in module.walk() if o.name == "toy.concat2")
    assert len(op.first) == 2 and len(op.second) == 1 and len(op.outputs) == 2


def test_type_from_the_dialect(toy: Dialect):
    body = '%p = "toy.make_pair"() : () -> !toy.pair<f32, 7 : i64>'
    module = parse(toy, body)
    module.verify()
    pair = next(o for o in module.walk() if o.name == "toy.make_pair").results[0].type
    assert isinstance(pair, ParametrizedAttribute)
    assert pair.name == "toy.pair"
    bad = '%p = "toy.make_pair"() : () -> !toy.pair<f16, 7 : i64>'
    assert "f16" in verify_error(toy, bad)
    bad_param = '%p = "toy.make_pair"() : () -> !toy.pair<f32, "s">'
    with pytest.raises(VerifyException):
        parse(toy, bad_param)


def test_regions_and_all_of(toy: Dialect):
    ok = """
func.func @f(%x: i8) {
  "toy.scope"(%x) ({
    "test.termop"() : () -> ()
  }, {
  ^bb1:
    "test.termop"()[^bb2] : () -> ()
  ^bb2:
    "test.termop"() : () -> ()
  }) : (i8) -> ()
  func.return
}
"""
    module = parse(toy, ok)
    module.verify()
    op = next(o for o in module.walk() if o.name == "toy.scope")
    assert len(op.other.blocks) == 2
    two_blocks = ok.replace(
        '"test.termop"() : () -> ()\n  }, {',
        '"test.termop"()[^bb9] : () -> ()\n  ^bb9:\n    "test.termop"() : () -> ()\n  }, {',
    )
    assert "Region 'body' at position 0 expected a single block" in verify_error(toy, two_blocks)
    wrong_width = ok.replace("i8", "i16")
    assert "'toy.scope' operand 'arg'" in verify_error(toy, wrong_width)


def test_optional_attribute_syntax_round_trips():
    module = parse_irdl(TOY_IRDL, "toy.irdl")
    text = str(module)
    assert '"kernel" = optional %' in text
    again = parse_irdl(text, "printed")
    assert str(again) == text


@pytest.mark.parametrize(
    ("irdl", "message"),
    [
        (
            'irdl.dialect @d { irdl.operation @o { %0 = irdl.base "!nope.type"\n irdl.results(r: %0) } }',
            "names no known attribute or type",
        ),
        (
            "irdl.dialect @d { irdl.operation @o { %0 = irdl.parametric @missing<>\n irdl.results(r: %0) } }",
            "@missing names no known",
        ),
        (
            'irdl.dialect @d { irdl.operation @o { %0 = irdl.base "tensor"\n irdl.results(r: %0) } }',
            "must start with '!'",
        ),
        (
            "irdl.dialect @d { irdl.operation @o { %0 = irdl.any\n irdl.results(r: %0)\n irdl.operands(r: %0) } }",
            "field 'r' is defined twice",
        ),
        ("irdl.operation @o {}", "invalid IRDL"),
        ("this is not irdl", "invalid IRDL"),
    ],
)
def test_bad_irdl_is_a_clear_error(irdl: str, message: str):
    with pytest.raises(IrdlLoadError) as info:
        load_irdl_dialects(irdl, "bad.irdl")
    assert message in str(info.value)
    assert str(info.value).startswith("bad.irdl")


def test_verify_hook_runs_after_constraints():
    calls = []

    def hook(op):
        calls.append(op.name)
        raise VerifyException(f"'{op.name}' hook says no")

    (dialect,) = load_irdl_dialects(TOY_IRDL, "toy.irdl", verify_hooks={"toy.combine": hook})
    ctx = Context()
    for d in (Builtin, Test, dialect):
        ctx.load_dialect(d)
    ctx.load_dialect(Func)
    module = Parser(ctx, combine()).parse_module()
    with pytest.raises(VerifyException, match="hook says no"):
        module.verify()
    assert calls == ["toy.combine"]


def test_python_keywords_and_operation_members_get_safe_accessors():
    text = """irdl.dialect @kw {
  irdl.operation @o {
    %t = irdl.base "!builtin.tensor"
    %s = irdl.base "#builtin.string"
    irdl.operands(in: %t)
    irdl.attributes {"name" = %s}
  }
}"""
    (dialect,) = load_irdl_dialects(text, "kw.irdl")
    ctx = Context()
    for d in (Builtin, Test, dialect):
        ctx.load_dialect(d)
    body = '%a = "test.op"() : () -> tensor<1xf32>\n"kw.o"(%a) {name = "hello"} : (tensor<1xf32>) -> ()'
    module = Parser(ctx, body).parse_module()
    module.verify()
    op = next(o for o in module.walk() if o.name == "kw.o")
    assert op.in_ is op.operands[0]
    assert op.name_.data == "hello"


def test_parse_cache_gives_the_same_dialect_and_survives_corruption(tmp_path):
    first = load_irdl_dialects(TOY_IRDL, "toy.irdl", cache_dir=tmp_path)[0]
    cached = list(tmp_path.glob("irdl-*.json"))
    assert len(cached) == 1
    second = load_irdl_dialects(TOY_IRDL, "toy.irdl", cache_dir=tmp_path)[0]
    assert [op.name for op in first.operations] == [op.name for op in second.operations]
    assert [a.name for a in first.attributes] == [a.name for a in second.attributes]
    # The cached definitions verify exactly like freshly parsed ones.
    assert "attribute 'kernel'" in verify_error(second, combine(attrs=', kernel = "x"'))
    cached[0].write_text("{not json")
    third = load_irdl_dialects(TOY_IRDL, "toy.irdl", cache_dir=tmp_path)[0]
    assert len(third.operations) == len(first.operations)


def test_a_region_constrained_to_no_entry_arguments_verifies():
    """`irdl.region()` (no entry arguments) used to build a length constraint of the
    int 0, so verifying any op with such a region raised AttributeError."""
    irdl_text = """
irdl.dialect @rt {
  irdl.operation @scope {
    %body = irdl.region()
    irdl.regions(body: %body)
  }
}
"""
    (dialect,) = load_irdl_dialects(irdl_text, "rt.irdl")
    ctx = Context()
    for d in (Builtin, Test, dialect):
        ctx.load_dialect(d)
    empty = '"rt.scope"() ({\n  "test.termop"() : () -> ()\n}) : () -> ()'
    Parser(ctx, empty).parse_module().verify()
    with_arg = '"rt.scope"() ({\n^bb0(%a: i8):\n  "test.termop"() : () -> ()\n}) : () -> ()'
    with pytest.raises(VerifyException, match="entry arguments do not verify"):
        Parser(ctx, with_arg).parse_module().verify()


PROPERTIES_IRDL = """
irdl.dialect @props {
  irdl.operation @scale {
    %t = irdl.base "!builtin.tensor"
    %r = irdl.base "!builtin.tensor"
    %i32 = irdl.is i32
    %v = irdl.any
    %axis = irdl.parametric @builtin::@integer<%v, %i32>
    %note = irdl.base "#builtin.string"
    irdl.operands(input: %t)
    irdl.results(output: %r)
    irdl.properties {"axis" = %axis, "note" = optional %note}
  }
}
"""


def test_properties_are_inherent_and_print_in_the_generic_form():
    """`irdl.properties` (the loader's extension) declares properties: they parse from and
    print to `<{...}>`, are verified against their constraints, and the IRDL text
    round-trips through the extended parser."""
    import io

    from xdsl.printer import Printer

    (dialect,) = load_irdl_dialects(PROPERTIES_IRDL, "props.irdl")
    body = """func.func @main(%x: tensor<2xf32>) {
      %0 = "props.scale"(%x) <{axis = 1 : i32}> : (tensor<2xf32>) -> tensor<2xf32>
      func.return
    }"""
    module = parse(dialect, body)
    module.verify()
    out = io.StringIO()
    Printer(out, print_generic_format=True).print_op(module)
    assert '"props.scale"(%x) <{axis = 1 : i32}> :' in out.getvalue()
    # As MLIR's parser does, an attribute dictionary entry of a property's name sets it.
    as_attribute = parse(dialect, body.replace("<{axis = 1 : i32}>", "{axis = 1 : i32}"))
    (op,) = [op for op in as_attribute.walk() if op.name == "props.scale"]
    assert "axis" in op.properties and "axis" not in op.attributes
    wrong = parse(dialect, body.replace("1 : i32", "1 : i64"))
    with pytest.raises(VerifyException, match="'props.scale' property 'axis'"):
        wrong.verify()
    assert 'irdl.properties {"axis" = %' in str(parse_irdl(PROPERTIES_IRDL))
