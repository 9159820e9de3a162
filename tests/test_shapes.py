"""Shape rules of the TOP/TPU ops: hand-computed ONNX examples, agreement with
onnx's own shape inference (and onnxruntime), errors naming the culprit, and
the verify hooks on parsed IR."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects.builtin import (
    ArrayAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    f64,
    i1,
    i64,
)

from tpu_xdsl.dialects import Top, Tpu
from tpu_xdsl.dialects.shapes import (
    RULES,
    VERIFY_HOOKS,
    ShapeError,
    infer_shapes,
    to_python,
)
from tpu_xdsl.ir_io import InvalidIRError, parse_module

################################################################################
# Hand-computed examples (ONNX semantics)                                       #
################################################################################

K77 = {"kernel_shape": [7, 7], "strides": [2, 2], "pads": [3, 3, 3, 3]}
LSTM_FWD = [(5, 2, 3), (1, 16, 3), (1, 16, 4), (1, 32), (1, 2, 4), (1, 2, 4)]
LSTM_BI_L1 = [(2, 5, 3), (2, 16, 3), (2, 16, 4), None, (2, 2, 4), None]

# (op, operand shapes, attributes, expected result shapes[, declared results])
CASES = [
    # conv: O = floor((D + pads - dilation*(K-1) - 1) / stride) + 1
    ("conv", [(1, 3, 224, 224), (64, 3, 7, 7), (64,)], K77, [(1, 64, 112, 112)]),
    ("conv", [(1, 8, 10, 10), (16, 4, 3, 3), None],
     {"kernel_shape": [3, 3], "group": 2, "dilations": [2, 2]}, [(1, 16, 6, 6)]),
    ("conv", [(2, 4, 9), (6, 4, 3), None],
     {"kernel_shape": [3], "strides": [2], "pads": [1, 0]}, [(2, 6, 4)]),
    ("conv", [(1, 32, 56, 56), (32, 1, 3, 3), None],
     {"kernel_shape": [3, 3], "group": 32, "pads": [1, 1, 1, 1]}, [(1, 32, 56, 56)]),
    ("conv", [(1, 1, 5, 5), (1, 1, 3, 3), None],
     {"kernel_shape": [3, 3], "pads": [0, 1, 2, 3]}, [(1, 1, 5, 7)]),
    ("conv", [(1, 3, 8, 8), (4, 3, 3, 3), None], {}, [(1, 4, 6, 6)]),
    # deconv: O = stride*(D-1) + output_padding + dilation*(K-1) + 1 - pads
    ("deconv", [(1, 16, 7, 7), (16, 8, 4, 4), None],
     {"kernel_shape": [4, 4], "strides": [2, 2], "pads": [1, 1, 1, 1]}, [(1, 8, 14, 14)]),
    ("deconv", [(1, 4, 5, 5), (4, 2, 3, 3), (4,)],
     {"kernel_shape": [3, 3], "strides": [2, 2], "output_padding": [1, 1], "group": 2},
     [(1, 4, 12, 12)]),
    ("deconv", [(1, 2, 3), (2, 3, 3), None], {"kernel_shape": [3], "dilations": [2]},
     [(1, 3, 7)]),
    # pooling
    ("max_pool", [(1, 64, 112, 112)],
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, [(1, 64, 56, 56)]),
    ("avg_pool", [(1, 8, 7, 7)], {"kernel_shape": [7, 7]}, [(1, 8, 1, 1)]),
    ("max_pool", [(1, 1, 6, 6)], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": True},
     [(1, 1, 3, 3)]),
    ("max_pool", [(1, 1, 6, 6)], {"kernel_shape": [3, 3], "strides": [2, 2]}, [(1, 1, 2, 2)]),
    # ceil_mode: the last window must start inside the input or the begin pad
    ("avg_pool", [(1, 1, 5, 5)],
     {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": True},
     [(1, 1, 3, 3)]),
    ("max_pool", [(1, 1, 10)], {"kernel_shape": [3], "dilations": [2]}, [(1, 1, 6)]),
    # matmul
    ("matmul", [(2, 3), (3, 4), None], {}, [(2, 4)]),
    ("matmul", [(5, 2, 3), (3, 4), (4,)], {}, [(5, 2, 4)]),
    ("matmul", [(3,), (3, 4), None], {}, [(4,)]),
    ("matmul", [(2, 3), (3,), None], {}, [(2,)]),
    ("matmul", [(3,), (3,), None], {}, [()]),
    ("matmul", [(2, 1, 3, 4), (5, 4, 6), None], {}, [(2, 5, 3, 6)]),
    ("matmul", [(4, 3), (4, 5), None], {"left_transpose": True}, [(3, 5)]),
    ("matmul", [(2, 3), (5, 3), (5,)], {"right_transpose": True}, [(2, 5)]),
    # elementwise binary, numpy broadcasting
    ("add", [(2, 3, 4), (4,)], {}, [(2, 3, 4)]),
    ("mul", [(2, 1, 4), (3, 1)], {}, [(2, 3, 4)]),
    ("sub", [(1,), (1, 1, 5)], {}, [(1, 1, 5)]),
    ("div", [(0, 3), (1, 3)], {}, [(0, 3)]),
    ("max", [(4, 1), (1, 4)], {}, [(4, 4)]),
    ("min", [(3,), (3,)], {}, [(3,)]),
    ("pow", [(2, 2), ()], {}, [(2, 2)]),
    ("compare", [(), (2, 2)], {"mode": "lt"}, [(2, 2)]),
    ("logical", [(2, 3), (1, 3)], {"mode": "and"}, [(2, 3)]),
    ("logical", [(2, 3), None], {"mode": "not"}, [(2, 3)]),
    ("where", [(1, 3), (2, 1), (1,)], {}, [(2, 3)]),
    # same shape
    ("relu", [(1, 3, 8, 8)], {"relu_limit": 6.0}, [(1, 3, 8, 8)]),
    ("sigmoid", [(7,)], {}, [(7,)]),
    ("gelu", [(2, 5)], {"approximate": "tanh"}, [(2, 5)]),
    ("cast", [(1, 3)], {}, [(1, 3)]),
    ("requant", [(1, 3)], {"multiplier": [3], "rshift": [8]}, [(1, 3)]),
    ("load", [(1, 16, 8, 8)], {}, [(1, 16, 8, 8)]),
    ("store", [(1, 16, 8, 8)], {}, [(1, 16, 8, 8)]),
    ("softmax", [(2, 10)], {"axis": 1}, [(2, 10)]),
    ("log_softmax", [(2, 10)], {}, [(2, 10)]),
    ("lrn", [(1, 8, 4, 4)], {"size": 5}, [(1, 8, 4, 4)]),
    ("lut", [(1, 3), (256,)], {}, [(1, 3)]),
    ("prelu", [(1, 3, 4, 4), (3, 1, 1)], {}, [(1, 3, 4, 4)]),
    # normalization
    ("layer_norm", [(2, 5, 8), (8,), (8,)], {}, [(2, 5, 8)]),
    ("layer_norm", [(2, 5, 8), (5, 8), None], {"axis": 1}, [(2, 5, 8)]),
    ("instance_norm", [(2, 3, 4, 4), (3,), (3,)], {}, [(2, 3, 4, 4)]),
    ("batch_norm", [(2, 3, 4, 4), (3,), (3,), (3,), (3,)], {}, [(2, 3, 4, 4)]),
    ("scale", [(1, 3, 4, 4), (1, 3, 1, 1), (3,)], {}, [(1, 3, 4, 4)]),
    ("group_norm", [(2, 6, 4), (6,), None], {"num_groups": 3}, [(2, 6, 4)]),
    ("group_norm", [(2, 6, 4), (3,), (3,)], {"num_groups": 3}, [(2, 6, 4)]),
    # data movement
    ("reshape", [(1, 3, 8, 8)], {}, [(1, 192)], [(1, 192)]),
    ("reshape", [(1, 3, 8, 8)], {"shape": [0, -1]}, [(1, 192)]),
    ("reshape", [(2, 3, 4)], {"shape": [4, 0, -1]}, [(4, 3, 2)]),
    ("permute", [(1, 3, 8, 16)], {"order": [0, 2, 3, 1]}, [(1, 8, 16, 3)]),
    ("concat", [[(1, 3, 8), (1, 5, 8)]], {"axis": 1}, [(1, 8, 8)]),
    ("concat", [[(2, 3), (2, 1), (2, 4)]], {"axis": -1}, [(2, 8)]),
    ("split", [(2, 10)], {"axis": 1, "split": [3, 7]}, [(2, 3), (2, 7)]),
    ("split", [(10,)], {"num_outputs": 3}, [(4,), (4,), (2,)]),
    ("slice", [(10, 8)], {"starts": [1], "ends": [8], "axes": [0], "steps": [2]}, [(4, 8)]),
    ("slice", [(10,)], {"starts": [-1], "ends": [-100], "axes": [0], "steps": [-1]}, [(10,)]),
    ("slice", [(10, 8)], {"starts": [2, -3], "ends": [1000, -1], "axes": [0, 1],
                          "steps": [1, 1]}, [(8, 2)]),
    ("slice", [(10,)], {"starts": [9], "ends": [0], "axes": [0], "steps": [-3]}, [(3,)]),
    ("slice", [(4, 6)], {"starts": [5], "ends": [2], "axes": [-1], "steps": [1]}, [(4, 0)]),
    ("squeeze", [(1, 3, 1, 5)], {"axes": [0, -2]}, [(3, 5)]),
    ("squeeze", [(1, 3, 1, 5)], {"axes": []}, [(3, 5)]),
    ("unsqueeze", [(3, 5)], {"axes": [0, -1]}, [(1, 3, 5, 1)]),
    ("unsqueeze", [(3, 5)], {"axes": [1]}, [(3, 1, 5)]),
    ("flatten", [(2, 3, 4, 5)], {"axis": 2}, [(6, 20)]),
    ("flatten", [(2, 3, 4, 5)], {"axis": 0}, [(1, 120)]),
    ("flatten", [(2, 3, 4, 5)], {"axis": -1}, [(24, 5)]),
    ("flatten", [(2, 3, 4, 5)], {}, [(2, 60)]),
    ("pad", [(1, 3, 4, 4)], {"pads": [0, 0, 1, 2, 0, 0, 3, 4]}, [(1, 3, 8, 10)]),
    ("pad", [(5, 5)], {"pads": [-1, 0, -2, 1], "mode": "edge"}, [(2, 6)]),
    ("tile", [(2, 3)], {"repeats": [2, 1]}, [(4, 3)]),
    ("expand", [(3, 1)], {}, [(2, 3, 4)], [(2, 3, 4)]),
    ("expand", [(3, 1)], {"shape": [2, 1, 4]}, [(2, 3, 4)]),
    ("upsample", [(1, 3, 4, 5)], {"scale_h": 2, "scale_w": 3}, [(1, 3, 8, 15)]),
    ("interp", [(1, 3, 4, 4)], {"mode": "linear"}, [(1, 3, 8, 8)], [(1, 3, 8, 8)]),
    ("interp", [(1, 3, 4, 4)], {"scales": [1.0, 1.0, 2.0, 2.5]}, [(1, 3, 8, 10)]),
    ("grid_sample", [(2, 3, 4, 5), (2, 6, 7, 2)], {"mode": "cubic"}, [(2, 3, 6, 7)]),
    ("grid_sample", [(1, 3, 4, 5, 6), (1, 2, 3, 4, 3)], {}, [(1, 3, 2, 3, 4)]),
    ("depth2space", [(1, 8, 2, 3)], {"block_size": 2}, [(1, 2, 4, 6)]),
    ("depth2space", [(1, 8, 2, 3)], {"block_size": 2, "mode": "CRD"}, [(1, 2, 4, 6)]),
    ("depth2space", [(1, 2, 4, 6)], {"block_size": 2, "inverse": True}, [(1, 8, 2, 3)]),
    # 3x3 taps at stride 2 over 8x8 padded to 10x11: 4 x 5 windows, 9 x 3 channels
    ("fold_taps", [(1, 3, 8, 8)], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 2]},
     [(1, 27, 4, 5)]),
    ("fold_taps", [(2, 1, 7, 5)], {"kernel_shape": [3, 1], "strides": [2, 1]}, [(2, 3, 3, 5)]),
    # indexing
    ("gather", [(5, 4, 3), (2, 6)], {"axis": 1}, [(5, 2, 6, 3)]),
    ("gather", [(5, 4, 3), ()], {}, [(4, 3)]),
    ("gather_elements", [(3, 4), (3, 2)], {"axis": 1}, [(3, 2)]),
    ("scatter_nd", [(4, 5, 6), (2, 3, 2), (2, 3, 6)], {}, [(4, 5, 6)]),
    ("scatter_nd", [(4, 5), (3, 2), (3,)], {"reduction": "add"}, [(4, 5)]),
    # reductions
    ("reduce", [(2, 3, 4)], {"mode": "mean", "axes": [1]}, [(2, 1, 4)]),
    ("reduce", [(2, 3, 4)], {"mode": "sum", "axes": [0, -1], "keepdims": False}, [(3,)]),
    ("reduce", [(2, 3, 4)], {"mode": "max", "axes": []}, [(1, 1, 1)]),
    ("arg", [(2, 3, 4)], {"mode": "max", "axis": 1}, [(2, 1, 4)]),
    ("arg", [(2, 3, 4)], {"mode": "min", "axis": -1, "keepdims": False}, [(2, 3)]),
    ("topk", [(3, 7)], {"k": 4, "axis": 1}, [(3, 4), (3, 4)]),
    ("topk", [(3, 7)], {"k": 7}, [(3, 7), (3, 7)]),
    # recurrent
    ("lstm", LSTM_FWD, {"hidden_size": 4}, [(5, 1, 2, 4), (1, 2, 4), (1, 2, 4)]),
    ("lstm", LSTM_BI_L1, {"hidden_size": 4, "direction": "bidirectional", "layout": 1},
     [(2, 5, 2, 4), (2, 2, 4), (2, 2, 4)]),
    ("gru", [(5, 2, 3), (1, 12, 3), (1, 12, 4), (1, 24), None], {"hidden_size": 4},
     [(5, 1, 2, 4), (1, 2, 4)]),
    ("gru", [(2, 5, 3), (2, 12, 3), (2, 12, 4), None, (2, 2, 4)],
     {"hidden_size": 4, "direction": "bidirectional", "layout": 1},
     [(2, 5, 2, 4), (2, 2, 4)]),
]  # fmt: skip


@pytest.mark.parametrize(
    "case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_hand_computed(case):
    op, operands, attrs, expected, *declared = case
    assert infer_shapes(op, operands, attrs, *declared) == expected


def test_every_rule_has_a_hand_computed_case():
    covered = {c[0] for c in CASES}
    same_shape = {k for k, r in RULES.items() if r.fn is RULES["relu"].fn}
    assert set(RULES) - covered - same_shape == set()


def test_dialect_prefix_and_xdsl_attributes_are_accepted():
    attrs = {
        "kernel_shape": ArrayAttr([IntegerAttr(7, i64)] * 2),
        "strides": ArrayAttr([IntegerAttr(2, i64)] * 2),
        "pads": ArrayAttr([IntegerAttr(3, i64)] * 4),
        "do_relu": IntegerAttr(1, i1),
    }
    shapes = [(1, 3, 224, 224), (64, 3, 7, 7), None]
    assert infer_shapes("tpu.conv", shapes, attrs) == [(1, 64, 112, 112)]
    assert infer_shapes("top.conv", [list(s) if s else s for s in shapes], attrs) == [
        (1, 64, 112, 112)
    ]


def test_to_python():
    assert to_python(IntegerAttr(3, i64)) == 3
    assert to_python(IntegerAttr(1, i1)) is True
    assert to_python(IntegerAttr(0, i1)) is False
    assert to_python(FloatAttr(0.5, f64)) == 0.5
    assert to_python(StringAttr("DCR")) == "DCR"
    assert to_python(ArrayAttr([IntegerAttr(1, i64), StringAttr("a")])) == [1, "a"]


################################################################################
# Agreement with onnx's shape inference                                         #
################################################################################

OPSET = 18


def onnx_model(op_type, inputs, outputs, consts=None, **attrs):
    """A one-node model: `inputs` are (name, shape) pairs ('' for an absent
    input); `consts` maps input names to int64 initializer values."""
    consts = consts or {}
    graph_inputs = [
        helper.make_tensor_value_info(
            name, TensorProto.INT64 if name == "indices" else TensorProto.FLOAT, shape
        )
        for name, shape in inputs
        if name and name not in consts
    ]
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in consts.items()]
    node = helper.make_node(op_type, [n for n, _ in inputs], outputs, **attrs)
    graph = helper.make_graph([node], "g", graph_inputs, [], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model


def onnx_shapes(op_type, inputs, outputs, consts=None, **attrs):
    """The output shapes onnx's shape inference gives for a one-node model."""
    model = onnx_model(op_type, inputs, outputs, consts, **attrs)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    found = {
        vi.name: tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
        for vi in (*inferred.graph.value_info, *inferred.graph.output)
    }
    return [found[o] for o in outputs]


# (ONNX op, ONNX inputs, ONNX constant inputs, ONNX attributes, outputs,
#  our op, our operands, our attributes)
ONNX_CASES = [
    ("Conv", [("x", [1, 3, 224, 224]), ("w", [64, 3, 7, 7])], None,
     {"kernel_shape": [7, 7], "strides": [2, 2], "pads": [3, 3, 3, 3]}, ["y"],
     "conv", [(1, 3, 224, 224), (64, 3, 7, 7), None], K77),
    ("Conv", [("x", [2, 8, 17, 12]), ("w", [12, 2, 3, 5])], None,
     {"strides": [2, 3], "pads": [1, 0, 2, 4], "dilations": [2, 1], "group": 4}, ["y"],
     "conv", [(2, 8, 17, 12), (12, 2, 3, 5), None],
     {"kernel_shape": [3, 5], "strides": [2, 3], "pads": [1, 0, 2, 4],
      "dilations": [2, 1], "group": 4}),
    ("ConvTranspose", [("x", [1, 16, 7, 7]), ("w", [16, 8, 4, 4])], None,
     {"strides": [2, 2], "pads": [1, 1, 1, 1]}, ["y"],
     "deconv", [(1, 16, 7, 7), (16, 8, 4, 4), None],
     {"kernel_shape": [4, 4], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("ConvTranspose", [("x", [1, 6, 5, 9]), ("w", [6, 2, 3, 3])], None,
     {"strides": [3, 2], "pads": [0, 1, 1, 0], "output_padding": [2, 1], "group": 3,
      "dilations": [1, 2]}, ["y"],
     "deconv", [(1, 6, 5, 9), (6, 2, 3, 3), None],
     {"kernel_shape": [3, 3], "strides": [3, 2], "pads": [0, 1, 1, 0],
      "output_padding": [2, 1], "group": 3, "dilations": [1, 2]}),
    ("MaxPool", [("x", [1, 1, 6, 6])], None,
     {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, ["y"],
     "max_pool", [(1, 1, 6, 6)],
     {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": True}),
    ("MaxPool", [("x", [1, 4, 7, 10])], None,
     {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 1, 1], "ceil_mode": 1},
     ["y"], "max_pool", [(1, 4, 7, 10)],
     {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 1, 1], "ceil_mode": True}),
    ("Gather", [("x", [5, 4, 3]), ("indices", [2, 6])], None, {"axis": 1}, ["y"],
     "gather", [(5, 4, 3), (2, 6)], {"axis": 1}),
    ("Gather", [("x", [5, 4, 3]), ("indices", [])], None, {"axis": -1}, ["y"],
     "gather", [(5, 4, 3), ()], {"axis": -1}),
    ("Slice", [("x", [10, 8, 6]), ("s", None), ("e", None), ("a", None), ("st", None)],
     {"s": [-1, 1], "e": [-100, 100], "a": [0, 2], "st": [-2, 3]}, {}, ["y"],
     "slice", [(10, 8, 6)], {"starts": [-1, 1], "ends": [-100, 100], "axes": [0, 2],
                             "steps": [-2, 3]}),
    ("Slice", [("x", [10, 8]), ("s", None), ("e", None), ("a", None), ("st", None)],
     {"s": [6, -2], "e": [2, 3], "a": [0, -1], "st": [-1, 1]}, {}, ["y"],
     "slice", [(10, 8)], {"starts": [6, -2], "ends": [2, 3], "axes": [0, -1],
                          "steps": [-1, 1]}),
    ("Split", [("x", [2, 10, 3]), ("split", None)], {"split": [3, 2, 5]}, {"axis": 1},
     ["a", "b", "c"], "split", [(2, 10, 3)], {"axis": 1, "split": [3, 2, 5]}),
    ("Split", [("x", [11, 2])], None, {"axis": 0, "num_outputs": 3}, ["a", "b", "c"],
     "split", [(11, 2)], {"axis": 0, "num_outputs": 3}),
    ("DepthToSpace", [("x", [1, 18, 4, 5])], None, {"blocksize": 3, "mode": "DCR"}, ["y"],
     "depth2space", [(1, 18, 4, 5)], {"block_size": 3, "mode": "DCR"}),
    ("DepthToSpace", [("x", [2, 8, 3, 3])], None, {"blocksize": 2, "mode": "CRD"}, ["y"],
     "depth2space", [(2, 8, 3, 3)], {"block_size": 2, "mode": "CRD"}),
    ("SpaceToDepth", [("x", [1, 3, 8, 6])], None, {"blocksize": 2}, ["y"],
     "depth2space", [(1, 3, 8, 6)], {"block_size": 2, "inverse": True}),
    ("Pad", [("x", [1, 3, 4, 5]), ("pads", None)], {"pads": [0, 1, 2, -1, 0, 0, 3, 2]},
     {"mode": "constant"}, ["y"],
     "pad", [(1, 3, 4, 5)], {"pads": [0, 1, 2, -1, 0, 0, 3, 2]}),
    ("TopK", [("x", [3, 7, 2]), ("k", None)], {"k": [4]}, {"axis": 1}, ["v", "i"],
     "topk", [(3, 7, 2)], {"k": 4, "axis": 1}),
    ("LSTM", [("x", [5, 2, 3]), ("w", [1, 16, 3]), ("r", [1, 16, 4]), ("b", [1, 32])],
     None, {"hidden_size": 4}, ["y", "y_h", "y_c"],
     "lstm", LSTM_FWD, {"hidden_size": 4}),
    ("LSTM", [("x", [2, 5, 3]), ("w", [2, 16, 3]), ("r", [2, 16, 4])], None,
     {"hidden_size": 4, "direction": "bidirectional", "layout": 1}, ["y", "y_h", "y_c"],
     "lstm", LSTM_BI_L1, {"hidden_size": 4, "direction": "bidirectional", "layout": 1}),
    ("GRU", [("x", [5, 2, 3]), ("w", [2, 12, 3]), ("r", [2, 12, 4])], None,
     {"hidden_size": 4, "direction": "bidirectional"}, ["y", "y_h"],
     "gru", [(5, 2, 3), (2, 12, 3), (2, 12, 4), None, None],
     {"hidden_size": 4, "direction": "bidirectional"}),
]  # fmt: skip


@pytest.mark.parametrize(
    "case", ONNX_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(ONNX_CASES)]
)
def test_agrees_with_onnx_shape_inference(case):
    onnx_op, inputs, consts, onnx_attrs, outputs, op, operands, attrs = case
    expected = onnx_shapes(onnx_op, inputs, outputs, consts, **onnx_attrs)
    assert infer_shapes(op, operands, attrs) == expected


@pytest.mark.parametrize(
    "size,kernel,stride,pad", [(5, 2, 2, 1), (9, 4, 4, 2), (12, 1, 2, 0)]
)
def test_ceil_mode_pool_agrees_with_onnxruntime(size, kernel, stride, pad):
    """Where a last ceil_mode window would start in the end padding, onnxruntime,
    onnx's reference evaluator and PyTorch drop it; onnx 1.23's shape inference
    does not. The rule follows the runtimes."""
    import onnxruntime as ort

    attrs = {"kernel_shape": [kernel], "strides": [stride], "pads": [pad, pad]}
    model = onnx_model("MaxPool", [("x", [1, 1, size])], ["y"], ceil_mode=1, **attrs)
    y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model.graph.output.append(y_info)
    session = ort.InferenceSession(model.SerializeToString())
    (y,) = session.run(None, {"x": np.zeros((1, 1, size), np.float32)})
    assert infer_shapes("max_pool", [(1, 1, size)], {**attrs, "ceil_mode": True}) == [
        y.shape
    ]


################################################################################
# Errors name the culprit                                                       #
################################################################################

# (op, operands, attributes, substrings of the message[, declared results])
ERRORS = [
    ("add", [(2, 3), (4, 3)], {},
     ["'add'", "operands 'lhs' 2x3 and 'rhs' 4x3 do not broadcast", "2 vs 4 at axis -2"]),
    ("where", [(3,), (2, 3), (2, 4)], {}, ["'x' 2x3 and 'y' 2x4"]),
    ("matmul", [(2, 3), (4, 5), None], {}, ["'input' 2x3 and 'right' 4x5", "3 vs 4"]),
    ("matmul", [(2, 2, 3), (3, 3, 4), None], {}, ["'input' 2 and 'right' 3"]),
    ("matmul", [(2, 3), (3, 4), (3,)], {}, ["operand 'bias' 3", "the output 2x4"]),
    ("concat", [[(1, 3, 8), (1, 5, 9)]], {"axis": 1},
     ["operand 'inputs[1]' 1x5x9 differs from 'inputs[0]' 1x3x8 in dim 2 (9 vs 8)",
      "'axis' = 1"]),
    ("concat", [[(1, 3), (1, 3, 1)]], {"axis": 0}, ["'inputs[1]' 1x3x1 has rank 3"]),
    ("concat", [[(1, 3)]], {"axis": 2}, ["attribute 'axis' = 2 is out of range for rank 2"]),
    ("conv", [(1, 6, 8, 8), (4, 3, 3, 3), None], {"kernel_shape": [3, 3]},
     ["attribute 'group' = 1", "6 channels, expected 3"]),
    ("conv", [(1, 6, 8, 8), (5, 3, 3, 3), None], {"kernel_shape": [3, 3], "group": 2},
     ["attribute 'group' = 2 does not divide the 5 output channels"]),
    ("conv", [(1, 3, 8, 8), (4, 3, 3, 3), (3,)], {"kernel_shape": [3, 3]},
     ["operand 'bias' 3 has 3 elements, expected 4"]),
    ("conv", [(1, 3, 8, 8), (4, 3, 3, 3), None], {"kernel_shape": [5, 5]},
     ["attribute 'kernel_shape' = [5, 5] differs", "'filter' 4x3x3x3"]),
    ("conv", [(1, 3, 8, 8), (4, 3, 3, 3), None], {"kernel_shape": [3, 3], "strides": [1]},
     ["attribute 'strides' = [1] must have 2 entries"]),
    ("conv", [(1, 3, 2, 2), (4, 3, 3, 3), None], {"kernel_shape": [3, 3]},
     ["'kernel_shape' = [3, 3]", "more than the padded input 2"]),
    ("conv", [(1, 3, 8), (4, 3, 3, 3), None], {"kernel_shape": [3, 3]},
     ["operand 'input' 1x3x8 must have rank 4"]),
    ("deconv", [(1, 4, 5, 5), (3, 2, 3, 3), None], {"kernel_shape": [3, 3]},
     ["operand 'filter' 3x2x3x3 has 3 input channels, expected 4"]),
    ("max_pool", [(1, 3, 8, 8)], {}, ["attribute 'kernel_shape' is required"]),
    ("split", [(2, 10)], {"axis": 1, "split": [3, 6]},
     ["attribute 'split' = [3, 6] adds up to 9, expected 10"]),
    ("slice", [(10,)], {"starts": [0], "ends": [5], "axes": [0], "steps": [0]},
     ["attribute 'steps' = [0]"]),
    ("slice", [(10,)], {"starts": [0], "ends": [5, 6]}, ["attribute 'ends' = [5, 6] must have 1"]),
    ("squeeze", [(1, 3)], {"axes": [1]}, ["dim 1 of operand 'input' 1x3, which has size 3"]),
    ("unsqueeze", [(3,)], {"axes": [0, 0]}, ["attribute 'axes' = [0, 0] repeats"]),
    ("permute", [(1, 2, 3)], {"order": [0, 2, 2]}, ["attribute 'order' = [0, 2, 2]"]),
    ("flatten", [(2, 3)], {"axis": 3}, ["attribute 'axis' = 3"]),
    ("pad", [(2, 2)], {"pads": [0, -3, 0, 0]}, ["attribute 'pads' = [0, -3, 0, 0] crops"]),
    ("pad", [(2, 2)], {"pads": [1, 1]}, ["attribute 'pads' = [1, 1] must have 4 entries"]),
    ("tile", [(2, 2)], {"repeats": [2]}, ["attribute 'repeats' = [2] must have 2 entries"]),
    ("reshape", [(1, 3, 8, 8)], {}, ["result 'output' has shape 2x3x5 with 30 elements",
                                     "expected 192"], [(2, 3, 5)]),
    ("reshape", [(2, 3)], {"shape": [4, -1]}, ["attribute 'shape' = [4, -1] does not fit"]),
    ("expand", [(2, 3)], {}, ["operand 'input' 2x3 does not broadcast to result 'output' 4x3"], [(4, 3)]),
    ("interp", [(1, 3, 4, 4)], {}, ["result 'output' has shape 1x4x8x8"], [(1, 4, 8, 8)]),
    ("grid_sample", [(1, 3, 4, 4), (1, 2, 2, 3)], {}, ["operand 'grid' 1x2x2x3 must be [N, *output, 2]"]),
    ("grid_sample", [(1, 3, 4, 4), (1, 2, 2, 2)], {"mode": "bilinear"},
     ["attribute 'mode' = \"bilinear\" must be one of"]),
    ("depth2space", [(1, 6, 2, 2)], {"block_size": 2}, ["'block_size' = 2", "6 channels"]),
    ("fold_taps", [(1, 3, 2, 2)], {"kernel_shape": [5, 5], "strides": [1, 1]},
     ["attribute 'kernel_shape' = [5, 5] exceeds H and W of operand 'input' 1x3x2x2"]),
    ("depth2space", [(1, 8, 2, 2)], {"block_size": 2, "mode": "XYZ"},
     ["attribute 'mode' = \"XYZ\" must be one of \"DCR\", \"CRD\""]),
    ("gather", [(5, 4), (2,)], {"axis": 2}, ["attribute 'axis' = 2 is out of range"]),
    ("gather_elements", [(5, 4), (2,)], {}, ["operand 'indices' 2 must have rank 2"]),
    ("scatter_nd", [(4, 5), (3, 2), (3, 5)], {},
     ["operand 'updates' has shape 3x5, expected 3"]),
    ("scatter_nd", [(4, 5), (3, 3), (3,)], {}, ["operand 'indices' 3x3 indexes 3 dims"]),
    ("reduce", [(2, 3)], {"axes": [2]}, ["attribute 'axes' = 2 is out of range"]),
    ("topk", [(3, 7)], {"k": 8}, ["attribute 'k' = 8 exceeds dim 1"]),
    ("lstm", [(5, 2, 3), (1, 12, 3), (1, 16, 4), None, None, None], {"hidden_size": 4},
     ["operand 'w' has shape 1x12x3, expected 1x16x3", "hidden_size 4"]),
    ("lstm", [(5, 2, 3), (1, 16, 3), (1, 16, 4), None, (2, 2, 4), None],
     {"hidden_size": 4}, ["operand 'initial_h' has shape 2x2x4, expected 1x2x4"]),
    ("gru", [(5, 2, 3), (1, 12, 3), (1, 12, 4), None, None],
     {"hidden_size": 4, "layout": 2}, ["attribute 'layout' = 2 must be 0 or 1"]),
    ("logical", [(2,), (2,)], {"mode": "not"}, ["operand 'rhs' 2 must be none"]),
    ("logical", [(2,), None], {"mode": "or"}, ["operand 'rhs' must be a tensor"]),
    ("group_norm", [(1, 6, 4), None, None], {"num_groups": 4},
     ["attribute 'num_groups' = 4 does not divide the 6 channels"]),
    ("batch_norm", [(1, 6, 4), (6,), (6,), (5,), (6,)], {},
     ["operand 'mean' 5 has 5 elements, expected 6"]),
    ("layer_norm", [(2, 3, 4), (3,), None], {}, ["operand 'scale' 3 does not broadcast"]),
    ("prelu", [(1, 3, 4), (4, 1)], {}, ["operand 'slope' 4x1 does not broadcast"]),
    ("lut", [(1, 3), (255,)], {}, ["operand 'table' 255 has 255 elements, expected 256"]),
    ("softmax", [(2, 3)], {"axis": -3}, ["attribute 'axis' = -3"]),
    ("upsample", [(1, 3, 4)], {"scale_h": 2, "scale_w": 2}, ["must have rank 4"]),
    ("conv", [(1, 3, 8, 8), (4, 3, 3, 3), None], {"kernel_shape": [3, 3], "group": "1"},
     ["attribute 'group' = \"1\" must be an integer"]),
    ("conv", [(1, 3, 8, 8), (4, 3, 3, 3)], {}, ["takes 3 operands (input, filter, bias), got 2"]),
    ("nonexistent", [(1,)], {}, ["'nonexistent' has no shape rule"]),
]  # fmt: skip


@pytest.mark.parametrize(
    "case", ERRORS, ids=[f"{c[0]}-{i}" for i, c in enumerate(ERRORS)]
)
def test_errors_name_the_culprit(case):
    op, operands, attrs, fragments, *declared = case
    with pytest.raises(ShapeError) as info:
        infer_shapes(op, operands, attrs, *declared)
    for fragment in fragments:
        assert fragment in str(info.value)


################################################################################
# The verify hooks on parsed IR                                                 #
################################################################################


def test_hooks_cover_every_op_with_a_rule():
    names = {op.name for op in (*Top.operations, *Tpu.operations)}
    without_rule = {n for n in names if n not in VERIFY_HOOKS}
    trivial = {"top.input", "top.weight", "top.none", "tpu.group", "tpu.yield"}
    assert without_rule <= trivial
    for kind in RULES:
        assert f"top.{kind}" in VERIFY_HOOKS and f"tpu.{kind}" in VERIFY_HOOKS


def module(body: str, args: str) -> str:
    return f"func.func @main({args}) {{\n{body}\n  func.return\n}}"


CONV = (
    '  %n = "top.none"() : () -> none\n'
    '  %y = "{op}"(%x, %w, %n) {{kernel_shape = [3, 3], strides = [2, 2]}} '
    ": (tensor<1x3x16x16x{t}>, tensor<4x3x3x3x{t}>, none) -> tensor<1x4x{o}x{o}x{t}>"
)
CONV_ARGS = "%x: tensor<1x3x16x16x{t}>, %w: tensor<4x3x3x3x{t}>"


def test_verify_accepts_a_correct_conv():
    body = CONV.format(op="top.conv", t="f32", o=7)
    parse_module(module(body, CONV_ARGS.format(t="f32")))


@pytest.mark.parametrize("op,t", [("top.conv", "f32"), ("tpu.conv", "i8")])
def test_verify_names_result_declared_and_expected(op, t):
    text = module(CONV.format(op=op, t=t, o=8), CONV_ARGS.format(t=t))
    with pytest.raises(InvalidIRError) as info:
        parse_module(text)
    assert (
        f"'{op}' result 'output' has shape 1x4x8x8, expected 1x4x7x7 from operands "
        "input 1x3x16x16, filter 4x3x3x3, bias none and attributes "
        "kernel_shape = [3, 3], strides = [2, 2]"
    ) in str(info.value)


def test_verify_reports_the_rule_culprit():
    body = '  %y = "tpu.add"(%a, %b) : (tensor<2x3xi8>, tensor<4x3xi8>) -> tensor<4x3xi8>'
    with pytest.raises(InvalidIRError, match="'tpu.add' operands 'lhs' 2x3 and 'rhs' 4x3"):
        parse_module(module(body, "%a: tensor<2x3xi8>, %b: tensor<4x3xi8>"))


def test_verify_variadic_results_are_indexed():
    body = (
        '  %a, %b = "top.split"(%x) {axis = 1 : i64, split = [3, 7]} '
        ": (tensor<2x10xf32>) -> (tensor<2x3xf32>, tensor<2x6xf32>)"
    )
    with pytest.raises(InvalidIRError) as info:
        parse_module(module(body, "%x: tensor<2x10xf32>"))
    assert "attribute 'split' = [3, 7] adds up to 10" not in str(info.value)
    assert "result 'outputs[1]' has shape 2x6, expected 2x7" in str(info.value)


def test_verify_counts_results():
    body = (
        '  %a, %b = "top.split"(%x) {axis = 1 : i64, split = [3, 3, 4]} '
        ": (tensor<2x10xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)"
    )
    with pytest.raises(InvalidIRError, match="'top.split' has 2 results, expected 3"):
        parse_module(module(body, "%x: tensor<2x10xf32>"))


def test_verify_skips_none_results_of_lstm():
    body = (
        '  %n = "top.none"() : () -> none\n'
        '  %y, %h, %c = "top.lstm"(%x, %w, %r, %n, %n, %n) {hidden_size = 4 : i64} '
        ": (tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, none, none, none)"
        " -> (none, tensor<1x2x4xf32>, none)"
    )
    args = "%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<1x16x4xf32>"
    parse_module(module(body, args))
    bad = body.replace("tensor<1x2x4xf32>, none)", "tensor<2x1x4xf32>, none)")
    with pytest.raises(InvalidIRError, match="result 'y_h' has shape 2x1x4, expected 1x2x4"):
        parse_module(module(bad, args))


def test_verify_concat_and_reshape():
    concat = (
        '  %y = "top.concat"(%a, %b) {axis = 1 : i64} '
        ": (tensor<1x3x8xf32>, tensor<1x5x9xf32>) -> tensor<1x8x8xf32>"
    )
    with pytest.raises(InvalidIRError, match=r"'top.concat' operand 'inputs\[1\]' 1x5x9"):
        parse_module(module(concat, "%a: tensor<1x3x8xf32>, %b: tensor<1x5x9xf32>"))
    reshape = '  %y = "top.reshape"(%a) : (tensor<2x6xf32>) -> tensor<4x4xf32>'
    with pytest.raises(InvalidIRError, match="'top.reshape' result 'output' has shape 4x4"):
        parse_module(module(reshape, "%a: tensor<2x6xf32>"))


def test_verify_skips_dynamic_shapes():
    body = '  %y = "top.add"(%a, %b) : (tensor<?x3xf32>, tensor<4x3xf32>) -> tensor<7x3xf32>'
    parse_module(module(body, "%a: tensor<?x3xf32>, %b: tensor<4x3xf32>"))


def test_a_per_channel_table_of_the_wrong_height_names_both_shapes():
    """tpu.lut's per-channel table needs one row of 256 per channel of the input's axis."""
    from tpu_xdsl.dialects.shapes import ShapeError
    from tpu_xdsl.dialects.shapes.elementwise import lut

    assert lut([(1, 4, 8), (4, 256)], {}, None) == [(1, 4, 8)]
    assert lut([(1, 8, 3), (3, 256)], {"channel_axis": 2}, None) == [(1, 8, 3)]
    with pytest.raises(ShapeError, match=r"operand 'table' 3x256 should be 4x256"):
        lut([(1, 4, 8), (3, 256)], {}, None)


@pytest.mark.parametrize(
    "op, operands, message",
    [
        # A list where one tensor is expected used to pass through relu unchecked
        # (the "shape" [1x2] came back as the result) and crash concat with a TypeError.
        ("relu", [[(1, 2)]], "operand 'input' must be a tensor, not a list \\[1x2\\]"),
        ("conv", [(1, 3, 8, 8), (4, 3, 3, 3), [(4,)]], "operand 'bias' must be a tensor"),
        ("concat", [(1, 2)], "operand 'inputs' 1x2 must be a list of tensors"),
    ],
)
def test_a_variadic_list_and_a_single_tensor_are_not_confused(op, operands, message):
    """Rules narrow each operand: one tensor (or none) is not a variadic list, and back."""
    with pytest.raises(ShapeError, match=message):
        infer_shapes(op, operands, {"axis": 0})
