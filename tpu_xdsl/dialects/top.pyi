"""Typing stub for the top dialect, generated from irdl/top.irdl by tpu_xdsl.dialects.stubs; do not edit."""
from xdsl.dialects.builtin import (
    ArrayAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
)
from xdsl.ir import (
    Dialect,
    OpResult,
    ParametrizedAttribute,
)
from xdsl.irdl import (
    IRDLOperation,
    Operand,
    VarOpResult,
    VarOperand,
)

class CalibratedAttr(ParametrizedAttribute):
    threshold : "FloatAttr"
    min : "FloatAttr"
    max : "FloatAttr"


class ChannelCalibratedAttr(ParametrizedAttribute):
    threshold : "FloatAttr"
    min : "FloatAttr"
    max : "FloatAttr"
    ranges : "StringAttr"
    axis : "IntegerAttr"


class InputOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class WeightOp(IRDLOperation):
    output : OpResult
    names : ArrayAttr[StringAttr]
    ddr : ArrayAttr[IntegerAttr] | None


class NoneOp(IRDLOperation):
    output : OpResult


class ConvOp(IRDLOperation):
    input : Operand
    filter : Operand
    bias : Operand
    output : OpResult
    kernel_shape : ArrayAttr[IntegerAttr]
    strides : ArrayAttr[IntegerAttr] | None
    pads : ArrayAttr[IntegerAttr] | None
    dilations : ArrayAttr[IntegerAttr] | None
    group : IntegerAttr | None
    do_relu : IntegerAttr | None
    relu_limit : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class DeconvOp(IRDLOperation):
    input : Operand
    filter : Operand
    bias : Operand
    output : OpResult
    kernel_shape : ArrayAttr[IntegerAttr]
    strides : ArrayAttr[IntegerAttr] | None
    pads : ArrayAttr[IntegerAttr] | None
    dilations : ArrayAttr[IntegerAttr] | None
    output_padding : ArrayAttr[IntegerAttr] | None
    group : IntegerAttr | None
    do_relu : IntegerAttr | None
    relu_limit : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class MatmulOp(IRDLOperation):
    input : Operand
    right : Operand
    bias : Operand
    output : OpResult
    left_transpose : IntegerAttr | None
    right_transpose : IntegerAttr | None
    do_relu : IntegerAttr | None
    relu_limit : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class AddOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    do_relu : IntegerAttr | None
    relu_limit : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class SubOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    do_relu : IntegerAttr | None
    relu_limit : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class MulOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    do_relu : IntegerAttr | None
    relu_limit : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class DivOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class MaxOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class MinOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class PowOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class SqrtOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class RsqrtOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class ExpOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class LogOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class AbsOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class NegOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class SigmoidOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class HardSwishOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class SiluOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class TanhOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class ErfOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class ReciprocalOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class FloorOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class CeilOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class RoundOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class SinOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class CosOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class SoftplusOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class MishOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class SignOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class ReluOp(IRDLOperation):
    input : Operand
    output : OpResult
    relu_limit : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class LeakyReluOp(IRDLOperation):
    input : Operand
    output : OpResult
    alpha : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class EluOp(IRDLOperation):
    input : Operand
    output : OpResult
    alpha : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class PreluOp(IRDLOperation):
    input : Operand
    slope : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class ClipOp(IRDLOperation):
    input : Operand
    output : OpResult
    min : FloatAttr | None
    max : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class HardSigmoidOp(IRDLOperation):
    input : Operand
    output : OpResult
    alpha : FloatAttr | None
    beta : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class GeluOp(IRDLOperation):
    input : Operand
    output : OpResult
    approximate : StringAttr | None
    names : ArrayAttr[StringAttr] | None


class SoftmaxOp(IRDLOperation):
    input : Operand
    output : OpResult
    axis : IntegerAttr | None
    names : ArrayAttr[StringAttr] | None


class LogSoftmaxOp(IRDLOperation):
    input : Operand
    output : OpResult
    axis : IntegerAttr | None
    names : ArrayAttr[StringAttr] | None


class LayerNormOp(IRDLOperation):
    input : Operand
    scale : Operand
    bias : Operand
    output : OpResult
    axis : IntegerAttr | None
    epsilon : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class InstanceNormOp(IRDLOperation):
    input : Operand
    scale : Operand
    bias : Operand
    output : OpResult
    epsilon : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class GroupNormOp(IRDLOperation):
    input : Operand
    scale : Operand
    bias : Operand
    output : OpResult
    num_groups : IntegerAttr
    epsilon : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class BatchNormOp(IRDLOperation):
    input : Operand
    scale : Operand
    bias : Operand
    mean : Operand
    variance : Operand
    output : OpResult
    epsilon : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class ScaleOp(IRDLOperation):
    input : Operand
    scale : Operand
    bias : Operand
    output : OpResult
    do_relu : IntegerAttr | None
    relu_limit : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class LrnOp(IRDLOperation):
    input : Operand
    output : OpResult
    size : IntegerAttr
    alpha : FloatAttr | None
    beta : FloatAttr | None
    bias : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class MaxPoolOp(IRDLOperation):
    input : Operand
    output : OpResult
    kernel_shape : ArrayAttr[IntegerAttr]
    strides : ArrayAttr[IntegerAttr] | None
    pads : ArrayAttr[IntegerAttr] | None
    dilations : ArrayAttr[IntegerAttr] | None
    ceil_mode : IntegerAttr | None
    do_relu : IntegerAttr | None
    relu_limit : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class AvgPoolOp(IRDLOperation):
    input : Operand
    output : OpResult
    kernel_shape : ArrayAttr[IntegerAttr]
    strides : ArrayAttr[IntegerAttr] | None
    pads : ArrayAttr[IntegerAttr] | None
    ceil_mode : IntegerAttr | None
    count_include_pad : IntegerAttr | None
    do_relu : IntegerAttr | None
    relu_limit : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class ReshapeOp(IRDLOperation):
    input : Operand
    output : OpResult
    shape : ArrayAttr[IntegerAttr] | None
    names : ArrayAttr[StringAttr] | None


class PermuteOp(IRDLOperation):
    input : Operand
    output : OpResult
    order : ArrayAttr[IntegerAttr]
    names : ArrayAttr[StringAttr] | None


class ConcatOp(IRDLOperation):
    inputs : VarOperand
    output : OpResult
    axis : IntegerAttr
    do_relu : IntegerAttr | None
    names : ArrayAttr[StringAttr] | None


class SplitOp(IRDLOperation):
    input : Operand
    outputs : VarOpResult
    axis : IntegerAttr
    split : ArrayAttr[IntegerAttr]
    names : ArrayAttr[StringAttr] | None


class SliceOp(IRDLOperation):
    input : Operand
    output : OpResult
    starts : ArrayAttr[IntegerAttr]
    ends : ArrayAttr[IntegerAttr]
    axes : ArrayAttr[IntegerAttr]
    steps : ArrayAttr[IntegerAttr]
    names : ArrayAttr[StringAttr] | None


class SqueezeOp(IRDLOperation):
    input : Operand
    output : OpResult
    axes : ArrayAttr[IntegerAttr]
    names : ArrayAttr[StringAttr] | None


class UnsqueezeOp(IRDLOperation):
    input : Operand
    output : OpResult
    axes : ArrayAttr[IntegerAttr]
    names : ArrayAttr[StringAttr] | None


class FlattenOp(IRDLOperation):
    input : Operand
    output : OpResult
    axis : IntegerAttr | None
    names : ArrayAttr[StringAttr] | None


class PadOp(IRDLOperation):
    input : Operand
    output : OpResult
    pads : ArrayAttr[IntegerAttr]
    mode : StringAttr | None
    value : FloatAttr | None
    names : ArrayAttr[StringAttr] | None


class InterpOp(IRDLOperation):
    input : Operand
    output : OpResult
    mode : StringAttr
    coordinate_mode : StringAttr
    nearest_mode : StringAttr | None
    scales : ArrayAttr[FloatAttr] | None
    names : ArrayAttr[StringAttr] | None


class UpsampleOp(IRDLOperation):
    input : Operand
    output : OpResult
    scale_h : IntegerAttr
    scale_w : IntegerAttr
    names : ArrayAttr[StringAttr] | None


class GatherOp(IRDLOperation):
    input : Operand
    indices : Operand
    output : OpResult
    axis : IntegerAttr | None
    names : ArrayAttr[StringAttr] | None


class GatherElementsOp(IRDLOperation):
    input : Operand
    indices : Operand
    output : OpResult
    axis : IntegerAttr | None
    names : ArrayAttr[StringAttr] | None


class ScatterNdOp(IRDLOperation):
    input : Operand
    indices : Operand
    updates : Operand
    output : OpResult
    reduction : StringAttr | None
    names : ArrayAttr[StringAttr] | None


class ReduceOp(IRDLOperation):
    input : Operand
    output : OpResult
    mode : StringAttr
    axes : ArrayAttr[IntegerAttr]
    keepdims : IntegerAttr | None
    names : ArrayAttr[StringAttr] | None


class ArgOp(IRDLOperation):
    input : Operand
    output : OpResult
    mode : StringAttr
    axis : IntegerAttr
    keepdims : IntegerAttr | None
    select_last_index : IntegerAttr | None
    names : ArrayAttr[StringAttr] | None


class TopkOp(IRDLOperation):
    input : Operand
    values : OpResult
    indices : OpResult
    k : IntegerAttr
    axis : IntegerAttr | None
    largest : IntegerAttr | None
    sorted : IntegerAttr | None
    names : ArrayAttr[StringAttr] | None


class CumsumOp(IRDLOperation):
    input : Operand
    output : OpResult
    axis : IntegerAttr
    exclusive : IntegerAttr | None
    reverse : IntegerAttr | None
    names : ArrayAttr[StringAttr] | None


class CastOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class TileOp(IRDLOperation):
    input : Operand
    output : OpResult
    repeats : ArrayAttr[IntegerAttr]
    names : ArrayAttr[StringAttr] | None


class ExpandOp(IRDLOperation):
    input : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class WhereOp(IRDLOperation):
    cond : Operand
    x : Operand
    y : Operand
    output : OpResult
    names : ArrayAttr[StringAttr] | None


class CompareOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    mode : StringAttr
    names : ArrayAttr[StringAttr] | None


class LogicalOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    mode : StringAttr
    names : ArrayAttr[StringAttr] | None


class GridSampleOp(IRDLOperation):
    input : Operand
    grid : Operand
    output : OpResult
    mode : StringAttr | None
    padding_mode : StringAttr | None
    align_corners : IntegerAttr | None
    names : ArrayAttr[StringAttr] | None


class Depth2spaceOp(IRDLOperation):
    input : Operand
    output : OpResult
    block_size : IntegerAttr
    mode : StringAttr | None
    inverse : IntegerAttr | None
    names : ArrayAttr[StringAttr] | None


class LstmOp(IRDLOperation):
    input : Operand
    w : Operand
    r : Operand
    b : Operand
    initial_h : Operand
    initial_c : Operand
    y : OpResult
    y_h : OpResult
    y_c : OpResult
    hidden_size : IntegerAttr
    direction : StringAttr | None
    layout : IntegerAttr | None
    names : ArrayAttr[StringAttr] | None


class GruOp(IRDLOperation):
    input : Operand
    w : Operand
    r : Operand
    b : Operand
    initial_h : Operand
    y : OpResult
    y_h : OpResult
    hidden_size : IntegerAttr
    direction : StringAttr | None
    linear_before_reset : IntegerAttr | None
    layout : IntegerAttr | None
    names : ArrayAttr[StringAttr] | None


Top : Dialect
