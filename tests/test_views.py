"""Views: a reshape, or a split or slice whose axes before the cut all have size 1, is bytes
its input already holds (`backend/views.py`). tpu-assign-memory places it inside that
input and codegen gives it no instruction. Offsets here are worked out by hand from the
shapes; on the device every tensor, views and the ops reading them included, equals the
TPU interpreter's."""

from __future__ import annotations

import onnx
import pytest
from onnx import helper

from tests.test_codegen import compile_and_compare, ints, lower, node
from tpu_xdsl.backend.views import result_offsets
from tpu_xdsl.device.isa import DmaCopy
from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.ir_io import parse_module


def _op(body: str, arg: str = "tensor<1x16x5x5xi8>"):
    """The one op of `body` (which reads %x of type `arg`)."""
    module = parse_module(f"""
builtin.module attributes {{module.name = "v", module.state = "TPU_LOWERED", module.chip = "bm1684x"}} {{
  func.func @main(%arg0: {arg}) -> {arg} {{
    %x = "top.input"(%arg0) {{names = ["x"]}} : ({arg}) -> {arg}
    {body}
    func.return %x : {arg}
  }}
}}
""")
    return list(main_func(module).body.block.ops)[1]


@pytest.mark.parametrize(("body", "arg", "expected"), [
    # a reshape is the same bytes
    ('%y = "tpu.reshape"(%x) {shape = [1, 400], names = ["y"]} : (tensor<1x16x5x5xi8>) -> tensor<1x400xi8>',
     "tensor<1x16x5x5xi8>", [0]),
    # channels of a batch-1 tensor: part 2 starts after 4 channels of 5x5 int8 = 100 bytes
    (('%p, %q = "tpu.split"(%x) {axis = 1, split = [4, 12], names = ["p", "q"]} : (tensor<1x16x5x5xi8>) -> '
     '(tensor<1x4x5x5xi8>, tensor<1x12x5x5xi8>)'), "tensor<1x16x5x5xi8>", [0, 100]),
    # float32: 3 channels of 2x2 = 48 bytes
    (('%p, %q = "tpu.split"(%x) {axis = 1, split = [3, 5], names = ["p", "q"]} : (tensor<1x8x2x2xf32>) -> '
     '(tensor<1x3x2x2xf32>, tensor<1x5x2x2xf32>)'), "tensor<1x8x2x2xf32>", [0, 48]),
    # rows 2..3 of a [1, 4, 2100] tensor: 2 x 2100 bytes in
    (('%s = "tpu.slice"(%x) {starts = [2], ends = [4], axes = [1], steps = [1], names = ["s"]} : '
     '(tensor<1x4x2100xui8>) -> tensor<1x2x2100xui8>'), "tensor<1x4x2100xui8>", [4200]),
    # a transpose that only moves a size-1 axis keeps the order
    ('%t = "tpu.permute"(%x) {order = [1, 0, 2], names = ["t"]} : (tensor<1x6x7xi8>) -> tensor<6x1x7xi8>',
     "tensor<1x6x7xi8>", [0]),
])
def test_views_start_where_their_bytes_are(body, arg, expected):
    assert result_offsets(_op(body, arg)) == expected


@pytest.mark.parametrize(("body", "arg"), [
    # a split of a batch-2 tensor along channels: each part is two runs of bytes
    (('%p, %q = "tpu.split"(%x) {axis = 1, split = [4, 12], names = ["p", "q"]} : (tensor<2x16x5x5xi8>) -> '
     '(tensor<2x4x5x5xi8>, tensor<2x12x5x5xi8>)'), "tensor<2x16x5x5xi8>"),
    # a split along rows: every channel holds a part
    (('%p, %q = "tpu.split"(%x) {axis = 2, split = [2, 3], names = ["p", "q"]} : (tensor<1x16x5x5xi8>) -> '
     '(tensor<1x16x2x5xi8>, tensor<1x16x3x5xi8>)'), "tensor<1x16x5x5xi8>"),
    # every second row
    (('%s = "tpu.slice"(%x) {starts = [0], ends = [4], axes = [1], steps = [2], names = ["s"]} : '
     '(tensor<1x4x2100xui8>) -> tensor<1x2x2100xui8>'), "tensor<1x4x2100xui8>"),
    # a real transpose
    ('%t = "tpu.permute"(%x) {order = [0, 2, 1], names = ["t"]} : (tensor<1x6x7xi8>) -> tensor<1x7x6xi8>',
     "tensor<1x6x7xi8>"),
    # another element type: not the same bytes
    ('%c = "tpu.cast"(%x) {scale = 0.5, names = ["c"]} : (tensor<1x16x5x5xi8>) -> tensor<1x16x5x5xf32>',
     "tensor<1x16x5x5xi8>"),
])
def test_other_ops_are_not_views(body, arg):
    assert result_offsets(_op(body, arg)) is None


# A ReLU split along its channels (a C2f block's split), one part reshaped and sliced along
# its outermost axis, each part read after the other; a flatten of the model input; two
# outputs that are views themselves.
def _views_model() -> onnx.ModelProto:
    nodes = [node("Relu", ["x"], ["r"]), node("Split", ["r", "split"], ["a", "b"], axis=1),
             node("Sigmoid", ["a"], ["sa"]), node("Reshape", ["b", "shape"], ["rb"]),
             node("Slice", ["rb", "starts", "ends", "axes"], ["sl"]), node("Flatten", ["x"], ["fx"], axis=1),
             node("Relu", ["fx"], ["y"])]
    inits = [ints("split", [4, 12]), ints("shape", [1, 12, 144]), ints("starts", [2]), ints("ends", [6]),
             ints("axes", [1])]
    graph = helper.make_graph(nodes, "views", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                                             [1, 16, 12, 12])],
                              [onnx.ValueInfoProto(name=n) for n in ("sa", "sl", "y")], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


@pytest.mark.parametrize(("scheme", "chip"), [("INT8", "cv183x"), ("INT8_asym", "bm1684x"), ("F32", "bm1684x"),
                                              ("BF16", "cv183x")])
def test_views_have_no_instructions_and_the_device_reproduces_the_interpreter(scheme, chip, tmp_path):
    tpu, feeds = lower(_views_model(), scheme, chip, tmp_path)
    model = compile_and_compare(tpu, feeds)
    places = {t.name: t.addr for t in [*model.tensors, *model.inputs, *model.outputs]}
    ops = {op.name.removeprefix("tpu."): op for op in main_func(tpu).body.block.ops
           if op.name in ("tpu.split", "tpu.slice")}
    split, cut = ops["split"], ops["slice"]
    a, b = tensor_names(split)
    (reshape,) = [use.operation for use in split.results[1].uses]
    (rb,), (sl,) = tensor_names(reshape), tensor_names(cut)
    copied = {i.layer for i in model.instructions if isinstance(i, DmaCopy)}
    assert not copied & {a, b, rb, sl}, copied
    item = 4 if scheme == "F32" else 2 if scheme == "BF16" else 1
    # b starts 4 channels of 12x12 after a; sl starts 2 rows of 144 into rb, the same bytes as b
    assert places[b] - places[a] == 4 * 144 * item
    assert places[rb] == places[b] and places[sl] - places[rb] == 2 * 144 * item
    # the flatten of the model input is copied (a view of it would be written by no
    # instruction); in INT8 and BF16 it reads the input's cast, and is a view of that
    (flatten,) = [op for op in main_func(tpu).body.block.ops if op.name == "tpu.reshape" and op is not reshape]
    (fx,) = tensor_names(flatten)
    assert (fx in copied) == (scheme == "F32"), (fx, copied)


def _concat_model() -> onnx.ModelProto:
    """Two ops' results joined along channels (batch 1): written in place into the join.
    One of them is also reshaped (a view, which moves with it) and read after the join;
    the join is split again (views of it)."""
    nodes = [node("Relu", ["x"], ["r"]), node("Sigmoid", ["x"], ["s"]), node("Reshape", ["r", "flat"], ["rr"]),
             node("Concat", ["r", "s"], ["c"], axis=1), node("Split", ["c", "split"], ["p", "q"], axis=1),
             node("Add", ["p", "q"], ["y"]), node("Neg", ["rr"], ["z"])]
    inits = [ints("flat", [1, 8 * 144]), ints("split", [8, 8])]
    graph = helper.make_graph(nodes, "join", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                                           [1, 8, 12, 12])],
                              [onnx.ValueInfoProto(name=n) for n in ("y", "z")], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


@pytest.mark.parametrize(("scheme", "chip"), [("INT8", "bm1684x"), ("F32", "bm1684x"), ("BF16", "cv183x")])
def test_a_join_along_channels_is_written_in_place(scheme, chip, tmp_path):
    tpu, feeds = lower(_concat_model(), scheme, chip, tmp_path)
    model = compile_and_compare(tpu, feeds)
    (concat,) = [op for op in main_func(tpu).body.block.ops if op.name == "tpu.concat"]
    assert "multiplier" not in concat.attributes  # per-channel scales side by side
    places = {t.name: t.addr for t in [*model.tensors, *model.inputs, *model.outputs]}
    (joined,), (first, second) = tensor_names(concat), (tensor_names(v.owner)[0] for v in concat.operands)
    item = 4 if scheme == "F32" else 2 if scheme == "BF16" else 1
    # the first input at the join's byte 0, the second 8 channels of 12x12 later
    assert places[first] == places[joined] and places[second] - places[joined] == 8 * 144 * item
    copied = {i.layer for i in model.instructions if isinstance(i, DmaCopy)}
    assert joined not in copied, copied
    # the reshape is a view of what it reads; in the float modes that is the first input,
    # and the view moved into the join with it (in INT8 the join reads a conversion of it)
    (reshape,) = [op for op in main_func(tpu).body.block.ops if op.name == "tpu.reshape"]
    source = tensor_names(reshape.operands[0].owner)[0]
    assert places[tensor_names(reshape)[0]] == places[source]
    assert (source == first) == (scheme != "INT8")
