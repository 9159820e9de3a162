"""What the TOSA ops' IRDL cannot say, checked as verify hooks: the rules of TOSA 1.0 that
IREE 3.13's verifier enforces, so a module that passes here is one IREE accepts.

- convolutions: `(H - 1 + pad_top + pad_bottom - (K - 1) * dilation) % stride == 0` per
  spatial dim, and the output size it gives; pools: `(H + pad_top + pad_bottom - K) % stride
  == 0`;
- the integer profile: add, sub, maximum and minimum take i32, not i8 (rescale to i32 first);
- rescale rounds SINGLE_ROUND or DOUBLE_ROUND (INEXACT_ROUND is refused), its multiplier is
  i32 with scale32 (i16 without) and its shift i8, one per channel along the last axis when
  per_channel;
- zero points are `tensor<1xT>`; constants hold data of their result type; reshape keeps the
  element count; transpose's perms is a permutation; a table is 256 i8 entries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, IntegerType, TensorType
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import VerifyException


def _tensor(attr: Attribute, what: str) -> TensorType:
    if not isinstance(attr, TensorType):
        raise VerifyException(f"{what} must be a ranked tensor, not {attr}")
    return attr


def _shape(attr: Attribute, what: str) -> tuple[int, ...]:
    return tuple(_tensor(attr, what).get_shape())


def _ints(op: Operation, name: str) -> list[int]:
    value = op.properties.get(name)
    if not isinstance(value, DenseArrayBase):
        raise VerifyException(f"'{op.name}' property '{name}' must be an array<i64>")
    return [int(v) for v in value.get_values()]


def _lengths(op: Operation, expected: Mapping[str, int]) -> None:
    for name, length in expected.items():
        got = _ints(op, name)
        if len(got) != length:
            raise VerifyException(f"'{op.name}' property '{name}' has {len(got)} values, expected {length}")


def _zero_point(op: Operation, index: int, element: Attribute) -> None:
    zp = _tensor(op.operands[index].type, f"'{op.name}' zero point")
    if zp.get_shape() != (1,) or zp.element_type != element:
        raise VerifyException(f"'{op.name}' zero point {index} must be tensor<1x{element}>, not {zp}")


def _non_negative(op: Operation, pad: Sequence[int]) -> None:
    if any(p < 0 for p in pad):
        raise VerifyException(f"'{op.name}' padding must be >= 0, not {list(pad)}")


def _spatial_out(size: int, kernel: int, before: int, after: int, stride: int, dilation: int, op: Operation) -> int:
    span = size - 1 + before + after - (kernel - 1) * dilation
    if stride < 1 or dilation < 1:
        raise VerifyException(f"'{op.name}' strides and dilations must be >= 1")
    if span < 0 or span % stride:
        raise VerifyException(
            f"'{op.name}' input size {size} with padding {before}+{after}, kernel {kernel} and dilation "
            f"{dilation} is not divisible by stride {stride} (TOSA needs (H - 1 + pads - (K - 1) * d) % s == 0)"
        )
    return span // stride + 1


def _check_output(op: Operation, expected: Sequence[int]) -> None:
    got = _shape(op.results[0].type, f"'{op.name}' result")
    if tuple(got) != tuple(expected):
        raise VerifyException(f"'{op.name}' result shape {list(got)} should be {list(expected)}")


def _convolution(spatial: int, depthwise: bool = False) -> Callable[[Operation], None]:
    def verify(op: Operation) -> None:
        _lengths(op, {"pad": 2 * spatial, "stride": spatial, "dilation": spatial})
        x = _shape(op.operands[0].type, f"'{op.name}' input")
        w = _shape(op.operands[1].type, f"'{op.name}' weight")
        if len(x) != spatial + 2 or len(w) != spatial + 2:
            raise VerifyException(f"'{op.name}' input and weight must have rank {spatial + 2}")
        _zero_point(op, 3, _tensor(op.operands[0].type, "input").element_type)
        _zero_point(op, 4, _tensor(op.operands[1].type, "weight").element_type)
        pad, stride, dilation = _ints(op, "pad"), _ints(op, "stride"), _ints(op, "dilation")
        _non_negative(op, pad)
        kernel = w[:spatial] if depthwise else w[1 : 1 + spatial]
        channels = w[spatial] if depthwise else w[-1]
        if channels != x[-1]:
            raise VerifyException(f"'{op.name}' weight has {channels} input channels, the input {x[-1]}")
        sizes = [
            _spatial_out(x[1 + i], kernel[i], pad[2 * i], pad[2 * i + 1], stride[i], dilation[i], op)
            for i in range(spatial)
        ]
        out_channels = w[spatial] * w[spatial + 1] if depthwise else w[0]
        _check_output(op, [x[0], *sizes, out_channels])

    return verify


def _pool(op: Operation) -> None:
    _lengths(op, {"kernel": 2, "stride": 2, "pad": 4})
    x = _shape(op.operands[0].type, f"'{op.name}' input")
    kernel, stride, pad = _ints(op, "kernel"), _ints(op, "stride"), _ints(op, "pad")
    _non_negative(op, pad)
    sizes = []
    for i in range(2):
        span = x[1 + i] + pad[2 * i] + pad[2 * i + 1] - kernel[i]
        if stride[i] < 1 or span < 0 or span % stride[i]:
            raise VerifyException(
                f"'{op.name}' input size {x[1 + i]} with padding {pad[2 * i]}+{pad[2 * i + 1]} and kernel "
                f"{kernel[i]} is not divisible by stride {stride[i]} (TOSA needs (H + pads - K) % s == 0)"
            )
        sizes.append(span // stride[i] + 1)
    _check_output(op, [x[0], *sizes, x[3]])


def _integer_profile(op: Operation) -> None:
    for operand in op.operands:
        element = _tensor(operand.type, f"'{op.name}' operand").element_type
        if isinstance(element, IntegerType) and element.width.data in (8, 16):
            raise VerifyException(
                f"'{op.name}' on i{element.width.data} is outside TOSA's integer profile; "
                "rescale the operands to i32 first"
            )


def _rescale(op: Operation) -> None:
    mode = op.properties.get("rounding_mode")
    if mode is not None and getattr(mode, "data", None) == "INEXACT_ROUND":
        raise VerifyException(
            f"'{op.name}' rounding_mode INEXACT_ROUND is not supported; use SINGLE_ROUND or DOUBLE_ROUND"
        )
    scale32 = op.properties.get("scale32")
    wide = isinstance(scale32, IntegerAttr) and bool(scale32.value.data)
    multiplier = _tensor(op.operands[1].type, f"'{op.name}' multiplier")
    shift = _tensor(op.operands[2].type, f"'{op.name}' shift")
    expected = IntegerType(32 if wide else 16)
    if multiplier.element_type != expected:
        raise VerifyException(f"'{op.name}' multiplier must be {expected} when scale32 is {wide}")
    if shift.element_type != IntegerType(8):
        raise VerifyException(f"'{op.name}' shift must be i8")
    per_channel = op.properties.get("per_channel")
    channels = _shape(op.operands[0].type, f"'{op.name}' input")[-1] if (
        isinstance(per_channel, IntegerAttr) and bool(per_channel.value.data)
    ) else 1
    for what, tensor in (("multiplier", multiplier), ("shift", shift)):
        if tuple(tensor.get_shape()) != (channels,):
            raise VerifyException(f"'{op.name}' {what} must have {channels} entries, not {list(tensor.get_shape())}")


def _const(op: Operation) -> None:
    values = op.properties.get("values")
    if values is None or getattr(values, "type", None) != op.results[0].type:
        raise VerifyException(f"'{op.name}' values must have the result type {op.results[0].type}")


def _reshape(op: Operation) -> None:
    source = _shape(op.operands[0].type, f"'{op.name}' input")
    target = _shape(op.results[0].type, f"'{op.name}' result")
    if _count(source) != _count(target):
        raise VerifyException(f"'{op.name}' cannot reshape {list(source)} to {list(target)}: element counts differ")


def _count(shape: Sequence[int]) -> int:
    total = 1
    for dim in shape:
        total *= dim
    return total


def _transpose(op: Operation) -> None:
    perms = _ints(op, "perms")
    source = _shape(op.operands[0].type, f"'{op.name}' input")
    if sorted(perms) != list(range(len(source))):
        raise VerifyException(f"'{op.name}' perms {perms} is not a permutation of the {len(source)} dims")
    _check_output(op, [source[p] for p in perms])


def _table(op: Operation) -> None:
    x = _tensor(op.operands[0].type, f"'{op.name}' input")
    table = _shape(op.operands[1].type, f"'{op.name}' table")
    if x.element_type == IntegerType(8) and table != (256,):
        raise VerifyException(f"'{op.name}' an i8 table has 256 entries, not {list(table)}")


VERIFY_HOOKS: Mapping[str, Callable[[Operation], None]] = {
    "tosa.conv2d": _convolution(2),
    "tosa.conv3d": _convolution(3),
    "tosa.depthwise_conv2d": _convolution(2, depthwise=True),
    "tosa.avg_pool2d": _pool,
    "tosa.max_pool2d": _pool,
    **{f"tosa.{name}": _integer_profile for name in ("add", "sub", "maximum", "minimum")},
    "tosa.rescale": _rescale,
    "tosa.const": _const,
    "tosa.reshape": _reshape,
    "tosa.transpose": _transpose,
    "tosa.table": _table,
}
