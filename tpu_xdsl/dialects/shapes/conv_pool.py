"""Shape rules of convolution, transposed convolution and pooling (ONNX's output sizes,
PyTorch's ceil_mode)."""

from __future__ import annotations

from dataclasses import dataclass

from tpu_xdsl.dialects.shapes.helpers import (
    _REQUIRED,
    _bool,
    _int,
    _ints,
    _numel,
    _positive,
    _rank,
    _require,
    fmt,
    fmt_value,
)
from tpu_xdsl.dialects.shapes.registry import (
    Attrs,
    Declared,
    Operands,
    OperandShape,
    Shape,
    ShapeError,
    shape_rule,
)


@dataclass(frozen=True)
class _Window:
    """Sliding-window attributes for `n` spatial dims (ONNX defaults applied)."""

    kernel: list[int]
    strides: list[int]
    pads: list[int]  # begins then ends
    dilations: list[int]

    @staticmethod
    def read(attrs: Attrs, kernel: list[int]) -> _Window:
        n = len(kernel)
        strides = _ints(attrs, "strides", [1] * n, n)
        pads = _ints(attrs, "pads", [0] * 2 * n, 2 * n)
        dilations = _ints(attrs, "dilations", [1] * n, n)
        _positive("kernel_shape", kernel)
        _positive("strides", strides)
        _positive("pads", pads, 0)
        _positive("dilations", dilations)
        return _Window(kernel, strides, pads, dilations)

    def padded(self, i: int, size: int) -> int:
        return size + self.pads[i] + self.pads[i + len(self.kernel)]

    def extent(self, i: int) -> int:
        """The dilated kernel size along spatial dim `i`."""
        return self.dilations[i] * (self.kernel[i] - 1) + 1

    def out_size(self, i: int, size: int, ceil_mode: bool = False) -> int:
        """ONNX Conv/Pool output size; with ceil_mode, PyTorch's rule that the
        last window must start inside the input or the begin padding."""
        span = self.padded(i, size) - self.extent(i)
        if span < 0:
            raise ShapeError(
                f"attribute 'kernel_shape' = {fmt_value(self.kernel)}: the kernel "
                f"spans {self.extent(i)} along spatial dim {i}, more than the padded "
                f"input {self.padded(i, size)}"
            )
        s = self.strides[i]
        if not ceil_mode:
            return span // s + 1
        out = -(-span // s) + 1
        return out - 1 if (out - 1) * s >= size + self.pads[i] else out


def _kernel(
    attrs: Attrs, x: OperandShape, w: Shape | None
) -> tuple[list[int], Shape]:
    """kernel_shape (from the filter when absent) and the input, whose rank (and the
    filter's) is checked against it."""
    default = list(w[2:]) if w is not None else _REQUIRED
    kernel = _ints(attrs, "kernel_shape", default)
    x = _rank("input", x, 2 + len(kernel))
    if w is not None:
        _rank("filter", w, 2 + len(kernel))
        if list(w[2:]) != kernel:
            raise ShapeError(
                f"attribute 'kernel_shape' = {fmt_value(kernel)} differs from the "
                f"spatial dims of operand 'filter' {fmt(w)}"
            )
    return kernel, x


def _group(attrs: Attrs) -> int:
    group = _int(attrs, "group", 1)
    _positive("group", [group])
    return group


@shape_rule("conv", operands=("input", "filter", "bias"))
def conv(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """ONNX Conv: input NxCxD..., filter Mx(C/group)xK...; output NxMxO...,
    O = floor((D + pad_begin + pad_end - dilation*(K-1) - 1) / stride) + 1."""
    x, w, bias = ins
    w = _require("filter", w)
    kernel, x = _kernel(attrs, x, w)
    win = _Window.read(attrs, kernel)
    group = _group(attrs)
    if x[1] != w[1] * group:
        raise ShapeError(
            f"attribute 'group' = {group}: operand 'input' {fmt(x)} has {x[1]} "
            f"channels, expected {w[1] * group} (filter channels {w[1]} of operand "
            f"'filter' {fmt(w)} * group {group})"
        )
    if w[0] % group:
        raise ShapeError(
            f"attribute 'group' = {group} does not divide the {w[0]} output channels "
            f"of operand 'filter' {fmt(w)}"
        )
    _numel("bias", bias, w[0], "(one per output channel)")
    spatial = [win.out_size(i, d) for i, d in enumerate(x[2:])]
    return [(x[0], w[0], *spatial)]


@shape_rule("deconv", operands=("input", "filter", "bias"))
def deconv(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """ONNX ConvTranspose: input NxCxD..., filter Cx(M/group)xK...; output
    NxMxO..., O = stride*(D-1) + output_padding + dilation*(K-1) + 1 - pads."""
    x, w, bias = ins
    w = _require("filter", w)
    kernel, x = _kernel(attrs, x, w)
    win = _Window.read(attrs, kernel)
    group = _group(attrs)
    n = len(win.kernel)
    out_pad = _ints(attrs, "output_padding", [0] * n, n)
    _positive("output_padding", out_pad, 0)
    if x[1] != w[0]:
        raise ShapeError(
            f"operand 'filter' {fmt(w)} has {w[0]} input channels, expected {x[1]}, "
            f"the channels of operand 'input' {fmt(x)}"
        )
    if x[1] % group:
        raise ShapeError(
            f"attribute 'group' = {group} does not divide the {x[1]} channels of "
            f"operand 'input' {fmt(x)}"
        )
    _numel("bias", bias, w[1] * group, "(one per output channel)")
    spatial = []
    for i, d in enumerate(x[2:]):
        size = win.strides[i] * (d - 1) + out_pad[i] + win.extent(i) - win.padded(i, 0)
        if size < 1:
            raise ShapeError(
                f"attribute 'pads' = {fmt_value(win.pads)} leaves no output along "
                f"spatial dim {i} (size {size})"
            )
        spatial.append(size)
    return [(x[0], w[1] * group, *spatial)]


@shape_rule("max_pool", "avg_pool", operands=("input",))
def pool(ins: Operands, attrs: Attrs, outs: Declared) -> list[Shape | None]:
    """ONNX MaxPool/AveragePool: output size as conv, ceil instead of floor
    with ceil_mode."""
    kernel, x = _kernel(attrs, ins[0], None)
    win = _Window.read(attrs, kernel)
    ceil_mode = _bool(attrs, "ceil_mode")
    spatial = [win.out_size(i, d, ceil_mode) for i, d in enumerate(x[2:])]
    return [(x[0], x[1], *spatial)]
