"""What slicing needs of an IR op (`OpShape`), read from its types and attributes.

The bridge between xDSL ops and the xDSL-free slicing, layer-group and lane code:
codegen slices plain ops with it, `layer_groups.plan` builds a group's members.
"""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.backend.slicing import OpShape
from tpu_xdsl.device.isa import dtype_name
from tpu_xdsl.dialects.attr_values import op_attrs
from tpu_xdsl.dialects.module import is_none
from tpu_xdsl.kernels.dtypes import numpy_dtype

# Attributes of the IR, not of the kernel.
IR_ONLY_ATTRS = ("names", "ddr", "ginfo")


def kernel_attrs(op: Operation) -> dict:
    return {k: v for k, v in op_attrs(op).items() if k not in IR_ONLY_ATTRS}


def value_shape(value: SSAValue) -> tuple[int, ...]:
    t = value.type
    assert isinstance(t, TensorType)
    return tuple(int(d) for d in t.get_shape())


def value_dtype(value: SSAValue) -> str:
    t = value.type
    assert isinstance(t, TensorType)
    return dtype_name(numpy_dtype(t.element_type))


def op_shape(op: Operation, is_constant) -> OpShape:
    """What slicing needs of `op`, from its types; `is_constant(value)`: a weight."""
    operands = [None if is_none(v) else v for v in op.operands]
    return OpShape(
        op.name.split(".", 1)[1],
        kernel_attrs(op),
        tuple(None if v is None else value_shape(v) for v in operands),
        tuple(v is not None and is_constant(v) for v in operands),
        tuple(value_shape(r) for r in op.results),
    )
