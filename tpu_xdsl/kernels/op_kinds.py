"""What each TOP and TPU op is, declared once: groups of op kinds (the op name without its
dialect prefix) that shape rules, slicing, lowering, timing, fusion and the quantize-table
search ask instead of keeping lists of their own (tinygrad's `GroupOp`).

It lives on the ground floor because the device model asks it too, and it imports nothing:
kinds are strings. tests/test_op_kinds.py holds every op of both dialects to a group and
every kind named here to an op.
"""

from __future__ import annotations

# Elementwise functions of one tensor (float in float modes, a 256-entry table in INT8).
UNARY = frozenset({
    "sqrt", "rsqrt", "exp", "log", "abs", "neg", "sigmoid", "hard_swish", "silu", "tanh", "erf",
    "reciprocal", "floor", "ceil", "round", "sin", "cos", "softplus", "mish", "sign", "relu",
    "leaky_relu", "elu", "clip", "hard_sigmoid", "gelu",
})  # fmt: skip
# Elementwise functions of two tensors, broadcast.
BINARY = frozenset({"add", "sub", "mul", "div", "max", "min", "pow"})
# Elementwise with a parameter per channel (axis 1).
CHANNELWISE = frozenset({"prelu", "scale", "batch_norm"})
# Elementwise on or to booleans.
SELECT = frozenset({"compare", "logical", "where"})
# Elementwise changes of representation: element type, quantization, a lookup table.
CONVERT = frozenset({"cast", "requant", "lut"})
ELEMENTWISE = UNARY | BINARY | CHANNELWISE | SELECT | CONVERT

# Sums of products over a window or a reduction axis: the MAC array's ops.
GEMM = frozenset({"conv", "deconv", "matmul"})
POOL = frozenset({"max_pool", "avg_pool"})
# Ops whose output element reads a sliding window of the input (slicing widens the rows).
WINDOW = frozenset({"conv"}) | POOL
RESIZE = frozenset({"interp", "upsample"})

RESHAPES = frozenset({"reshape", "flatten", "squeeze", "unsqueeze"})
# Ops that move or pick elements and compute nothing.
MOVEMENT = RESHAPES | frozenset({
    "permute", "slice", "split", "concat", "pad", "tile", "expand", "gather", "depth2space",
    "upsample", "fold_taps",
})  # fmt: skip
INDEXING = frozenset({"gather", "gather_elements", "scatter_nd", "grid_sample"})
NORMALIZATION = frozenset({"softmax", "log_softmax", "layer_norm", "group_norm", "instance_norm", "lrn"})
# Along an axis: reductions, and the running sum (cumsum), which keeps the shape.
REDUCTION = frozenset({"reduce", "arg", "topk", "cumsum"})
RECURRENT = frozenset({"lstm", "gru"})
# Not computations: a module's inputs and constants, an absent operand, a layer group's
# region and its terminator, and the DMA ops of a group.
STRUCTURE = frozenset({"input", "weight", "none", "group", "yield", "load", "store"})

# -- what passes ask --------------------------------------------------------------------

# Shape rule: the result has the input's shape.
SAME_SHAPE = UNARY | frozenset({"cast", "requant", "load", "store", "cumsum"})
# May carry a fused ReLU (`do_relu`, `relu_limit`): top-fuse-relu folds a following ReLU in.
FUSES_RELU = GEMM | POOL | frozenset({"add", "sub", "mul", "scale"})
# Exact in INT8: codes in, the same codes out (max_pool and relu compare codes), so an op
# of these never needs a float mode.
EXACT_ON_CODES = MOVEMENT | frozenset({"max_pool", "relu"})

GROUPS: dict[str, frozenset[str]] = {
    "UNARY": UNARY, "BINARY": BINARY, "CHANNELWISE": CHANNELWISE, "SELECT": SELECT,
    "CONVERT": CONVERT, "GEMM": GEMM, "POOL": POOL, "RESIZE": RESIZE, "MOVEMENT": MOVEMENT,
    "INDEXING": INDEXING, "NORMALIZATION": NORMALIZATION, "REDUCTION": REDUCTION,
    "RECURRENT": RECURRENT, "STRUCTURE": STRUCTURE,
}  # fmt: skip


def kind_of(op_name: str) -> str:
    """`top.conv` -> `conv`."""
    return op_name.split(".", 1)[1] if "." in op_name else op_name
