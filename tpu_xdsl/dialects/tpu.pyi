"""Typing stub for the tpu dialect, generated from irdl/tpu.irdl by tpu_xdsl.dialects.stubs; do not edit."""
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
    Region,
)
from xdsl.irdl import (
    IRDLOperation,
    Operand,
    VarOpResult,
    VarOperand,
)

class UniformAttr(ParametrizedAttribute):
    scale : "FloatAttr"
    zero_point : "IntegerAttr"


class ChannelUniformAttr(ParametrizedAttribute):
    scales : "StringAttr"
    axis : "IntegerAttr"


class LgInfoAttr(ParametrizedAttribute):
    out_addr : "IntegerAttr"
    out_size : "IntegerAttr"
    buffer_addr : "IntegerAttr"
    buffer_size : "IntegerAttr"
    eu_align : "IntegerAttr"
    n_idx : "ArrayAttr[IntegerAttr]"
    n_slice : "ArrayAttr[IntegerAttr]"
    h_idx : "ArrayAttr[IntegerAttr]"
    h_slice : "ArrayAttr[IntegerAttr]"


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
    multiplier : ArrayAttr[IntegerAttr] | None
    rshift : ArrayAttr[IntegerAttr] | None
    round_mode : StringAttr | None
    input_zero_points : ArrayAttr[IntegerAttr] | None
    output_zero_point : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


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
    multiplier : ArrayAttr[IntegerAttr] | None
    rshift : ArrayAttr[IntegerAttr] | None
    round_mode : StringAttr | None
    input_zero_points : ArrayAttr[IntegerAttr] | None
    output_zero_point : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class MatmulOp(IRDLOperation):
    input : Operand
    right : Operand
    bias : Operand
    output : OpResult
    left_transpose : IntegerAttr | None
    right_transpose : IntegerAttr | None
    do_relu : IntegerAttr | None
    relu_limit : FloatAttr | None
    multiplier : ArrayAttr[IntegerAttr] | None
    rshift : ArrayAttr[IntegerAttr] | None
    round_mode : StringAttr | None
    input_zero_points : ArrayAttr[IntegerAttr] | None
    output_zero_point : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class AddOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    do_relu : IntegerAttr | None
    relu_limit : FloatAttr | None
    multiplier : ArrayAttr[IntegerAttr] | None
    rshift : ArrayAttr[IntegerAttr] | None
    round_mode : StringAttr | None
    input_zero_points : ArrayAttr[IntegerAttr] | None
    output_zero_point : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class SubOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    do_relu : IntegerAttr | None
    relu_limit : FloatAttr | None
    multiplier : ArrayAttr[IntegerAttr] | None
    rshift : ArrayAttr[IntegerAttr] | None
    round_mode : StringAttr | None
    input_zero_points : ArrayAttr[IntegerAttr] | None
    output_zero_point : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class MulOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    do_relu : IntegerAttr | None
    relu_limit : FloatAttr | None
    multiplier : ArrayAttr[IntegerAttr] | None
    rshift : ArrayAttr[IntegerAttr] | None
    round_mode : StringAttr | None
    input_zero_points : ArrayAttr[IntegerAttr] | None
    output_zero_point : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class DivOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class MaxOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    multiplier : ArrayAttr[IntegerAttr] | None
    rshift : ArrayAttr[IntegerAttr] | None
    round_mode : StringAttr | None
    input_zero_points : ArrayAttr[IntegerAttr] | None
    output_zero_point : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class MinOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    multiplier : ArrayAttr[IntegerAttr] | None
    rshift : ArrayAttr[IntegerAttr] | None
    round_mode : StringAttr | None
    input_zero_points : ArrayAttr[IntegerAttr] | None
    output_zero_point : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class PowOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class SqrtOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class RsqrtOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class ExpOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class LogOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class AbsOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class NegOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class SigmoidOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class HardSwishOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class SiluOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class TanhOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class ErfOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class ReciprocalOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class FloorOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class CeilOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class RoundOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class SinOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class CosOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class SoftplusOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class MishOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class SignOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class ReluOp(IRDLOperation):
    input : Operand
    output : OpResult
    relu_limit : FloatAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class LeakyReluOp(IRDLOperation):
    input : Operand
    output : OpResult
    alpha : FloatAttr | None
    multiplier : ArrayAttr[IntegerAttr] | None
    rshift : ArrayAttr[IntegerAttr] | None
    round_mode : StringAttr | None
    input_zero_points : ArrayAttr[IntegerAttr] | None
    output_zero_point : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class EluOp(IRDLOperation):
    input : Operand
    output : OpResult
    alpha : FloatAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class PreluOp(IRDLOperation):
    input : Operand
    slope : Operand
    output : OpResult
    multiplier : ArrayAttr[IntegerAttr] | None
    rshift : ArrayAttr[IntegerAttr] | None
    round_mode : StringAttr | None
    input_zero_points : ArrayAttr[IntegerAttr] | None
    output_zero_point : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class ClipOp(IRDLOperation):
    input : Operand
    output : OpResult
    min : FloatAttr | None
    max : FloatAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class HardSigmoidOp(IRDLOperation):
    input : Operand
    output : OpResult
    alpha : FloatAttr | None
    beta : FloatAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class GeluOp(IRDLOperation):
    input : Operand
    output : OpResult
    approximate : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class SoftmaxOp(IRDLOperation):
    input : Operand
    output : OpResult
    axis : IntegerAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class LogSoftmaxOp(IRDLOperation):
    input : Operand
    output : OpResult
    axis : IntegerAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class LayerNormOp(IRDLOperation):
    input : Operand
    scale : Operand
    bias : Operand
    output : OpResult
    axis : IntegerAttr | None
    epsilon : FloatAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class InstanceNormOp(IRDLOperation):
    input : Operand
    scale : Operand
    bias : Operand
    output : OpResult
    epsilon : FloatAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class GroupNormOp(IRDLOperation):
    input : Operand
    scale : Operand
    bias : Operand
    output : OpResult
    num_groups : IntegerAttr
    epsilon : FloatAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class BatchNormOp(IRDLOperation):
    input : Operand
    scale : Operand
    bias : Operand
    mean : Operand
    variance : Operand
    output : OpResult
    epsilon : FloatAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class ScaleOp(IRDLOperation):
    input : Operand
    scale : Operand
    bias : Operand
    output : OpResult
    do_relu : IntegerAttr | None
    relu_limit : FloatAttr | None
    multiplier : ArrayAttr[IntegerAttr] | None
    rshift : ArrayAttr[IntegerAttr] | None
    round_mode : StringAttr | None
    input_zero_points : ArrayAttr[IntegerAttr] | None
    output_zero_point : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class LrnOp(IRDLOperation):
    input : Operand
    output : OpResult
    size : IntegerAttr
    alpha : FloatAttr | None
    beta : FloatAttr | None
    bias : FloatAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


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
    multiplier : ArrayAttr[IntegerAttr] | None
    rshift : ArrayAttr[IntegerAttr] | None
    round_mode : StringAttr | None
    input_zero_points : ArrayAttr[IntegerAttr] | None
    output_zero_point : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


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
    multiplier : ArrayAttr[IntegerAttr] | None
    rshift : ArrayAttr[IntegerAttr] | None
    round_mode : StringAttr | None
    input_zero_points : ArrayAttr[IntegerAttr] | None
    output_zero_point : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class ReshapeOp(IRDLOperation):
    input : Operand
    output : OpResult
    shape : ArrayAttr[IntegerAttr] | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class PermuteOp(IRDLOperation):
    input : Operand
    output : OpResult
    order : ArrayAttr[IntegerAttr]
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class ConcatOp(IRDLOperation):
    inputs : VarOperand
    output : OpResult
    axis : IntegerAttr
    do_relu : IntegerAttr | None
    multiplier : ArrayAttr[IntegerAttr] | None
    rshift : ArrayAttr[IntegerAttr] | None
    round_mode : StringAttr | None
    input_zero_points : ArrayAttr[IntegerAttr] | None
    output_zero_point : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class SplitOp(IRDLOperation):
    input : Operand
    outputs : VarOpResult
    axis : IntegerAttr
    split : ArrayAttr[IntegerAttr]
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class SliceOp(IRDLOperation):
    input : Operand
    output : OpResult
    starts : ArrayAttr[IntegerAttr]
    ends : ArrayAttr[IntegerAttr]
    axes : ArrayAttr[IntegerAttr]
    steps : ArrayAttr[IntegerAttr]
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class SqueezeOp(IRDLOperation):
    input : Operand
    output : OpResult
    axes : ArrayAttr[IntegerAttr]
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class UnsqueezeOp(IRDLOperation):
    input : Operand
    output : OpResult
    axes : ArrayAttr[IntegerAttr]
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class FlattenOp(IRDLOperation):
    input : Operand
    output : OpResult
    axis : IntegerAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class PadOp(IRDLOperation):
    input : Operand
    output : OpResult
    pads : ArrayAttr[IntegerAttr]
    mode : StringAttr | None
    value : FloatAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class InterpOp(IRDLOperation):
    input : Operand
    output : OpResult
    mode : StringAttr
    coordinate_mode : StringAttr
    nearest_mode : StringAttr | None
    scales : ArrayAttr[FloatAttr] | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class UpsampleOp(IRDLOperation):
    input : Operand
    output : OpResult
    scale_h : IntegerAttr
    scale_w : IntegerAttr
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class GatherOp(IRDLOperation):
    input : Operand
    indices : Operand
    output : OpResult
    axis : IntegerAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class GatherElementsOp(IRDLOperation):
    input : Operand
    indices : Operand
    output : OpResult
    axis : IntegerAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class ScatterNdOp(IRDLOperation):
    input : Operand
    indices : Operand
    updates : Operand
    output : OpResult
    reduction : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class ReduceOp(IRDLOperation):
    input : Operand
    output : OpResult
    mode : StringAttr
    axes : ArrayAttr[IntegerAttr]
    keepdims : IntegerAttr | None
    multiplier : ArrayAttr[IntegerAttr] | None
    rshift : ArrayAttr[IntegerAttr] | None
    round_mode : StringAttr | None
    input_zero_points : ArrayAttr[IntegerAttr] | None
    output_zero_point : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class ArgOp(IRDLOperation):
    input : Operand
    output : OpResult
    mode : StringAttr
    axis : IntegerAttr
    keepdims : IntegerAttr | None
    select_last_index : IntegerAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class TopkOp(IRDLOperation):
    input : Operand
    values : OpResult
    indices : OpResult
    k : IntegerAttr
    axis : IntegerAttr | None
    largest : IntegerAttr | None
    sorted : IntegerAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class CumsumOp(IRDLOperation):
    input : Operand
    output : OpResult
    axis : IntegerAttr
    exclusive : IntegerAttr | None
    reverse : IntegerAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class CastOp(IRDLOperation):
    input : Operand
    scales : VarOperand
    output : OpResult
    scale : FloatAttr | None
    zero_point : IntegerAttr | None
    round_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class TileOp(IRDLOperation):
    input : Operand
    output : OpResult
    repeats : ArrayAttr[IntegerAttr]
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class ExpandOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class WhereOp(IRDLOperation):
    cond : Operand
    x : Operand
    y : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class CompareOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    mode : StringAttr
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class LogicalOp(IRDLOperation):
    lhs : Operand
    rhs : Operand
    output : OpResult
    mode : StringAttr
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class GridSampleOp(IRDLOperation):
    input : Operand
    grid : Operand
    output : OpResult
    mode : StringAttr | None
    padding_mode : StringAttr | None
    align_corners : IntegerAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class FoldTapsOp(IRDLOperation):
    input : Operand
    output : OpResult
    kernel_shape : ArrayAttr[IntegerAttr]
    strides : ArrayAttr[IntegerAttr]
    pads : ArrayAttr[IntegerAttr] | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class Depth2spaceOp(IRDLOperation):
    input : Operand
    output : OpResult
    block_size : IntegerAttr
    mode : StringAttr | None
    inverse : IntegerAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


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
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


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
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class RequantOp(IRDLOperation):
    input : Operand
    output : OpResult
    multiplier : ArrayAttr[IntegerAttr]
    rshift : ArrayAttr[IntegerAttr]
    zero_point : IntegerAttr | None
    round_mode : StringAttr | None
    axis : IntegerAttr | None
    quant_mode : StringAttr | None
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class LutOp(IRDLOperation):
    input : Operand
    table : Operand
    output : OpResult
    ginfo : LgInfoAttr | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class GroupOp(IRDLOperation):
    outputs : VarOpResult
    n_slices : IntegerAttr
    h_slices : IntegerAttr
    group_type : StringAttr | None
    flow : ArrayAttr[IntegerAttr] | None
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None
    body : Region


class YieldOp(IRDLOperation):
    results_ : VarOperand


class LoadOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


class StoreOp(IRDLOperation):
    input : Operand
    output : OpResult
    ginfo : LgInfoAttr
    names : ArrayAttr[StringAttr] | None
    ddr : ArrayAttr[IntegerAttr] | None


Tpu : Dialect
